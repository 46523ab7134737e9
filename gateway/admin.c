/*
 * The admin listener (loopback by default): /healthz says the process
 * answers, /readyz that every worker reaches Redis and certificates are
 * loaded, /metrics exposes the counters in Prometheus text format.
 */
#include <stdio.h>
#include <string.h>
#include "gateway/admin.h"

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
        int redis = gw_metrics_redis_ready(conf->metrics);
        int certs = gw_admin_certificates_ready(conf->tls_listeners, conf->tls);
        char body[128];
        int n = snprintf(body, sizeof(body), "{\"ready\":%s,\"redis\":%s,\"certificates\":%s}\n", redis && certs ? "true" : "false",
                         redis ? "true" : "false", certs ? "true" : "false");
        if (redis && certs)
            send_text(req, 200, "OK", "application/json", body, (size_t)n);
        else
            send_text(req, 503, "Service Unavailable", "application/json", body, (size_t)n);
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
