/*
 * The ACME HTTP-01 responder: one GET <prefix>acme:{<token>} per challenge
 * request on the worker's Redis connection, after the token has been checked
 * (base64url, bounded), so that a scanner's paths never reach Redis. The
 * pending GET is cancelled when the request goes away.
 */
#include <stdlib.h>
#include <string.h>
#include "errors/errors.h"
#include "http/acme.h"

struct st_gw_acme_t {
    h2o_handler_t super;
    gw_acme_conf_t conf;
};

/* Per h2o context: the worker's connection (NULL until gw_acme_attach). */
typedef struct st_acme_context_t {
    gw_redis_t *redis;
} acme_context_t;

/* One challenge request waiting for Redis; in req->pool, disposed with it. */
typedef struct st_acme_pending_t {
    h2o_req_t *req;
    gw_redis_req_t *get;
} acme_pending_t;

static int base64url_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int gw_acme_token(h2o_iovec_t path, h2o_iovec_t *token)
{
    size_t prefix = sizeof(GW_ACME_PATH "/") - 1, i;

    if (path.len <= prefix || path.len - prefix > GW_ACME_TOKEN_MAX || memcmp(path.base, GW_ACME_PATH "/", prefix) != 0)
        return -1;
    for (i = prefix; i != path.len; ++i)
        if (!base64url_char(path.base[i]))
            return -1;
    *token = h2o_iovec_init(path.base + prefix, path.len - prefix);
    return 0;
}

/* The answer for an ACME server: plain text, never cached, no contract code
 * (the caller is a CA, not a browser or a sandbox's client). */
static void send_text(h2o_req_t *req, int status, const char *reason, h2o_iovec_t body)
{
    req->res.status = status;
    req->res.reason = reason;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/plain"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    h2o_send_inline(req, body.base, body.len);
}

static void not_found(h2o_req_t *req)
{
    send_text(req, 404, "Not Found", h2o_iovec_init(H2O_STRLIT("No such ACME challenge.\n")));
}

static void on_dispose(void *_p)
{
    acme_pending_t *p = _p;

    if (p->get != NULL)
        gw_redis_req_cancel(p->get);
}

static void on_get(void *data, const char *err, redisReply *reply)
{
    acme_pending_t *p = data;
    h2o_req_t *req = p->req;

    p->get = NULL;
    if (err != NULL) {
        gw_error_send(req, GW_ERR_ROUTING_UNAVAILABLE, NULL, 0, NULL);
        return;
    }
    if (reply->type != REDIS_REPLY_STRING || reply->len == 0 || reply->len > GW_ACME_VALUE_MAX) {
        not_found(req);
        return;
    }
    /* the reply dies with this call; the response body must outlive it */
    send_text(req, 200, "OK", h2o_strdup(&req->pool, reply->str, reply->len));
}

static int on_req(h2o_handler_t *_self, h2o_req_t *req)
{
    gw_acme_t *self = (void *)_self;
    acme_context_t *ac = h2o_context_get_handler_context(req->conn->ctx, _self);
    h2o_iovec_t token;

    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) &&
        !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"))) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, H2O_STRLIT("GET, HEAD"));
        send_text(req, 405, "Method Not Allowed", h2o_iovec_init(H2O_STRLIT("ACME challenges are read with GET.\n")));
        return 0;
    }
    /* checked before any Redis call: a path that cannot be a token costs nothing */
    if (gw_acme_token(req->path_normalized, &token) != 0) {
        not_found(req);
        return 0;
    }
    if (ac->redis == NULL) {
        gw_error_send(req, GW_ERR_ROUTING_UNAVAILABLE, NULL, 0, NULL);
        return 0;
    }

    acme_pending_t *p = h2o_mem_alloc_shared(&req->pool, sizeof(*p), on_dispose);
    h2o_iovec_t key = h2o_concat(&req->pool, h2o_iovec_init(self->conf.prefix, strlen(self->conf.prefix)),
                                 h2o_iovec_init(H2O_STRLIT("acme:{")), token, h2o_iovec_init(H2O_STRLIT("}")));
    const char *argv[] = {"GET", key.base};
    size_t argvlen[] = {3, key.len};

    p->req = req;
    if ((p->get = gw_redis_command_argv(ac->redis, self->conf.lookup_timeout_ms, on_get, p, 2, argv, argvlen)) == NULL)
        gw_error_send(req, GW_ERR_ROUTING_UNAVAILABLE, NULL, 0, NULL); /* Redis is known to be down */
    return 0;
}

static void on_context_init(h2o_handler_t *self, h2o_context_t *ctx)
{
    acme_context_t *ac = h2o_mem_alloc(sizeof(*ac));

    ac->redis = NULL;
    h2o_context_set_handler_context(ctx, self, ac);
}

static void on_context_dispose(h2o_handler_t *self, h2o_context_t *ctx)
{
    free(h2o_context_get_handler_context(ctx, self));
}

gw_acme_t *gw_acme_register(h2o_pathconf_t *pathconf, const gw_acme_conf_t *conf)
{
    gw_acme_t *self = (void *)h2o_create_handler(pathconf, sizeof(*self));

    self->super.on_context_init = on_context_init;
    self->super.on_context_dispose = on_context_dispose;
    self->super.on_req = on_req;
    self->conf = *conf;
    return self;
}

void gw_acme_attach(gw_acme_t *acme, h2o_context_t *ctx, gw_redis_t *redis)
{
    acme_context_t *ac = h2o_context_get_handler_context(ctx, &acme->super);
    ac->redis = redis;
}
