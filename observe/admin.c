/*
 * The admin listener (loopback by default): /healthz says the process
 * answers, /readyz that the listeners are open and the certificates loaded
 * (and reports Redis, which never makes it unready), /metrics exposes the
 * counters in Prometheus text format.
 */
#include <stdio.h>
#include <string.h>
#include "observe/admin.h"

typedef struct st_admin_handler_t {
    h2o_handler_t super;
    gw_admin_conf_t conf;
} admin_handler_t;

static void send_text(h2o_req_t *req, int status, const char *reason, const char *type, const char *body, size_t len)
{
    req->res.status = status;
    req->res.reason = reason;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, type, strlen(type));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    h2o_send_inline(req, body, len);
}

int gw_admin_certificates_ready(int tls_listeners, gw_tls_t *tls)
{
    SSL_CTX *ctx;

    if (!tls_listeners)
        return 1;
    /* the listeners' context carries the default certificate (tls.c); a reload that fails keeps it */
    return tls != NULL && (ctx = gw_tls_listener_ctx(tls)) != NULL && SSL_CTX_get0_certificate(ctx) != NULL &&
           SSL_CTX_get0_privatekey(ctx) != NULL;
}

int gw_admin_readyz(int certificates, int redis, int ktls, char *body, size_t *len)
{
    /* Redis is reported, never a verdict: cached routes keep serving through an outage, and
     * failing readiness on it would take every gateway out of the load balancer at once
     * (CONTRACT.md, Operations). The listeners are open: this answer comes from a started server. */
    int n = snprintf(body, GW_ADMIN_READYZ_MAX, "{\"ready\":%s,\"redis\":%s,\"certificates\":%s,\"ktls\":%s}\n",
                     certificates ? "true" : "false", redis ? "true" : "false", certificates ? "true" : "false",
                     ktls ? "true" : "false");
    *len = (size_t)n;
    return certificates ? 200 : 503;
}

static void send_metrics(h2o_req_t *req, gw_metrics_t *m)
{
    h2o_iovec_t body;

    if (gw_metrics_render(m, &req->pool, GW_METRICS_MAX_BYTES, &body) != 0) {
        /* never a cut exposition: a scraper would take it for a complete one */
        send_text(req, 500, "Internal Server Error", "text/plain", H2O_STRLIT("metrics: exposition over its size bound\n"));
        return;
    }
    send_text(req, 200, "OK", "text/plain; version=0.0.4", body.base, body.len);
}

static int on_req(h2o_handler_t *_self, h2o_req_t *req)
{
    gw_admin_conf_t *conf = &((admin_handler_t *)_self)->conf;

    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) &&
        !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"))) {
        send_text(req, 405, "Method Not Allowed", "text/plain", H2O_STRLIT("method not allowed\n"));
        return 0;
    }
    if (h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/healthz"))) {
        send_text(req, 200, "OK", "text/plain", H2O_STRLIT("ok\n"));
    } else if (h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/readyz"))) {
        char body[GW_ADMIN_READYZ_MAX];
        size_t len;
        int status = gw_admin_readyz(gw_admin_certificates_ready(conf->tls_listeners, conf->tls),
                                     gw_metrics_redis_ready(conf->metrics), conf->ktls, body, &len);
        send_text(req, status, status == 200 ? "OK" : "Service Unavailable", "application/json", body, len);
    } else if (h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/metrics"))) {
        send_metrics(req, conf->metrics);
    } else {
        send_text(req, 404, "Not Found", "text/plain", H2O_STRLIT("not found\n"));
    }
    return 0;
}

void gw_admin_register(h2o_pathconf_t *pathconf, const gw_admin_conf_t *conf)
{
    admin_handler_t *self = (void *)h2o_create_handler(pathconf, sizeof(*self));
    self->super.on_req = on_req;
    self->conf = *conf;
}
