/*
 * The admin listener: GET /healthz (process alive), GET /readyz (listeners
 * open and certificates loaded; Redis reported in the body, never a reason
 * to be unready), GET /metrics (Prometheus text format).
 */
#ifndef GW_OBSERVE_ADMIN_H
#define GW_OBSERVE_ADMIN_H

#include <h2o.h>
#include "observe/metrics.h"
#include "tls/tls.h"

typedef struct st_gw_admin_conf_t {
    gw_metrics_t *metrics; /* borrowed */
    gw_tls_t *tls;         /* borrowed; NULL when none was loaded */
    int tls_listeners;     /* 1 when a listener takes TLS (its certificates are then required) */
    int ktls;              /* 1 when the kernel took kTLS transmit at start (tls/ktls.h); reported, never a verdict */
} gw_admin_conf_t;

/* Installs the admin handlers on `pathconf` (path "/"); conf is copied. */
void gw_admin_register(h2o_pathconf_t *pathconf, const gw_admin_conf_t *conf);

/* The /readyz verdict on certificates: 1 when no listener takes TLS, or when
 * tls holds a certificate context with a certificate and its key. Pure. */
int gw_admin_certificates_ready(int tls_listeners, gw_tls_t *tls);

/* bound of the /readyz body */
#define GW_ADMIN_READYZ_MAX 96

/* The /readyz answer: writes the JSON body (at most GW_ADMIN_READYZ_MAX
 * bytes) to body and its length to *len, returns the status, 200 when the
 * certificates are ready, 503 when not. `redis` (every worker's connection
 * up) and `ktls` (the kernel's kTLS transmit, probed at start) are reported
 * in the body and change nothing else. Pure. */
int gw_admin_readyz(int certificates, int redis, int ktls, char *body, size_t *len);

#endif
