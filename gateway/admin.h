/*
 * The admin listener: GET /healthz (process alive), GET /readyz (Redis
 * reachable from every worker and certificates loaded), GET /metrics
 * (Prometheus text format).
 */
#ifndef GW_GATEWAY_ADMIN_H
#define GW_GATEWAY_ADMIN_H

#include <h2o.h>

/* Installs the admin handlers on `pathconf` (path "/"). */
void gw_admin_register(h2o_pathconf_t *pathconf);

#endif
