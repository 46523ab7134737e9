/*
 * The request pipeline: a preview request runs through its phases (host,
 * route, ingress, credentials, hold, address, limits, forward; http/phases.h) and is
 * handed to the proxy. Plain listeners get the redirect handler instead.
 */
#ifndef GW_HTTP_PIPELINE_H
#define GW_HTTP_PIPELINE_H

#include <sys/socket.h>
#include <h2o.h>
#include "config/config.h"
#include "limits/conn_limit.h"
#include "limits/rate_limit.h"
#include "common/hangup.h"
#include "auth/cookie_keys.h"
#include "auth/link_keys.h"
#include "metering/metering.h"
#include "observe/metrics.h"
#include "upstream/proxy.h"
#include "routing/domain_store.h"
#include "routing/route_store.h"
#include "routing/wake.h"

/* What the handlers share across workers; every pointer is borrowed and must
 * outlive the server. */
typedef struct st_gw_pipeline_conf_t {
    const gw_config_t *config;
    gw_metrics_t *metrics;                /* each context counts into its worker's block (gw_metrics_worker_of) */
    gw_cookie_keys_t *cookie_keys;        /* the live cookie secrets */
    gw_link_keys_t *link_keys;            /* the live share-link keys */
    gw_conn_limit_t *conn_limit;          /* limits.max_connections_per_sandbox */
    gw_conn_limit_t *client_reqs;         /* limits.max_connections_per_client: requests in flight per address */
    gw_conn_limit_t *desktop_viewers;     /* limits.max_desktop_viewers: desktop WebSockets per sandbox */
    const struct st_gw_viewer_t *viewer;  /* the desktop ports' viewer (http/viewer.h); NULL: none loaded */
    gw_rate_limit_t *rate_limit;          /* the sandboxes' req_rate buckets, across workers */
    gw_rate_limit_t *stream_errors;       /* limits.max_stream_errors_per_client: per address, across workers; NULL: off */
    h2o_hostconf_t *(*listener_hosts)[2]; /* per listener (config->listen[i]): the `hosts` its connections carry */
    uint16_t https_port;                  /* where the redirect handler sends plain requests */
} gw_pipeline_conf_t;

/* What one worker's preview handler uses: its own route store, proxy,
 * meter, held-request registry and hang-up watch (borrowed; they outlive the
 * worker's loop). */
typedef struct st_gw_pipeline_thread_t {
    gw_route_store_t *routes;
    gw_domain_store_t *domains; /* custom domains; NULL: a host not under a preview domain is unknown_host */
    gw_proxy_t *proxy;
    gw_worker_meter_t *meter; /* where the route names the project of the bytes the proxy bills */
    gw_wake_t *wake;
    gw_hangup_t *hangup; /* NULL: held HTTP/1 requests are not watched */
    size_t worker;       /* the worker's index: the one its connection slots are taken and given back with */
} gw_pipeline_thread_t;

typedef struct st_gw_pipeline_t gw_pipeline_t;

/* Installs the preview handler on `pathconf` (conf is copied). The handler
 * keeps a gw_pipeline_thread_t per h2o context, empty until
 * gw_pipeline_attach; aborts on out of memory. */
gw_pipeline_t *gw_pipeline_register(h2o_pathconf_t *pathconf, const gw_pipeline_conf_t *conf);

/* Gives the handler its objects on `ctx` (initialized with the handler's
 * globalconf), from that context's thread, before it accepts. */
void gw_pipeline_attach(gw_pipeline_t *p, h2o_context_t *ctx, const gw_pipeline_thread_t *thread);

/* The request's client as text, the one address that limits, ingress rules,
 * the sandbox's X-Forwarded-For and the access log use (CONTRACT.md,
 * Forwarding): behind a trusted listener (a load balancer ending TLS) the
 * last X-Forwarded-For entry, the one the balancer appended, when it is an
 * IP address; else the connection's client (common/client_addr.h: the
 * socket's peer, or the PROXY header's). buf holds INET6_ADDRSTRLEN bytes.
 * Returns 0, or -1 when unknown. */
int gw_pipeline_client_text(const gw_pipeline_conf_t *conf, h2o_req_t *req, char *buf, size_t bufsize);

typedef struct st_gw_pipeline_redirect_t gw_pipeline_redirect_t;

/* Installs the handler that redirects preview requests to https (conf is copied). */
gw_pipeline_redirect_t *gw_pipeline_register_redirect(h2o_pathconf_t *pathconf, const gw_pipeline_conf_t *conf);

/* Gives the redirect handler the custom domains of the thread that runs `ctx`
 * (borrowed): an active custom domain is then redirected like a preview
 * host; without, custom hosts are unknown_host there. */
void gw_pipeline_attach_redirect(gw_pipeline_redirect_t *r, h2o_context_t *ctx, gw_domain_store_t *domains);

#endif
