/*
 * h2o checks the request body against max_request_entity_size while reading
 * it, and the request head against max_request_head_size while parsing or
 * decoding it (patches 0130, 0150), before the request is routed, and answers
 * with h2o_send_error_generic(413 or 431, "text/plain"). Such a request is
 * bound to its hostconf's fallback path (lib/core/request.c,
 * h2o_send_error_generic), so a filter there sees the response at
 * h2o_start_response and replaces its headers and body with the contract's
 * body_too_large or headers_too_large.
 */
#include <string.h>
#include "http/early_errors.h"
#include "common/engine.h"
#include "errors/errors.h"
#include "routing/host.h"

typedef struct st_early_filter_t {
    h2o_filter_t super;
    const gw_config_t *config;
} early_filter_t;

/* Replaces the body h2o_send_inline hands down (one final send). */
typedef struct st_replace_body_t {
    h2o_ostream_t super;
    h2o_iovec_t body;
    gw_ostream_vec_t vec; /* `body`, as the engine's ostreams take it */
} replace_body_t;

static h2o_iovec_t request_header(h2o_req_t *req, const h2o_token_t *token, const char *name, size_t len)
{
    ssize_t i = token != NULL ? h2o_find_header(&req->headers, token, -1) : h2o_find_header_by_str(&req->headers, name, len, -1);
    return i == -1 ? h2o_iovec_init(NULL, 0) : req->headers.entries[i].value;
}

static void replace_do_send(h2o_ostream_t *_self, h2o_req_t *req, gw_ostream_vec_t *bufs, size_t bufcnt, h2o_send_state_t state)
{
    replace_body_t *self = (void *)_self;

    /* no buffer: a HEAD request, whose body is not sent */
    (void)bufs;
    h2o_ostream_send_next(&self->super, req, bufcnt != 0 ? &self->vec : NULL, bufcnt != 0 ? 1 : 0, state);
}

/* h2o's 413 or 431 is in req->res: make it the contract's `code`. */
static void rewrite(early_filter_t *self, h2o_req_t *req, h2o_ostream_t **slot, gw_error_code_t code)
{
    const gw_config_t *config = self->config;
    h2o_iovec_t origin = request_header(req, NULL, H2O_STRLIT("origin"));
    const char *sandbox_id = NULL;
    uint16_t port = 0;
    gw_host_t host;
    replace_body_t *replace;
    int html;

    /* the address names the sandbox even though the request was never routed */
    if (gw_host_parse(req->authority, config->domains, config->num_domains, &host) == GW_HOST_OK) {
        sandbox_id = h2o_strdup(&req->pool, host.sandbox_id, SIZE_MAX).base;
        port = host.port;
    }
    html = gw_error_prefers_html(request_header(req, NULL, H2O_STRLIT("sec-fetch-mode")),
                                 request_header(req, H2O_TOKEN_ACCEPT, NULL, 0));

    replace = (void *)gw_add_ostream(req, sizeof(*replace), slot);
    replace->super.do_send = replace_do_send;
    replace->body = gw_error_render(&req->pool, code, html, sandbox_id, port, NULL);
    gw_ostream_vec_init(&replace->vec, replace->body);

    /* the same head as gw_error_send gives (errors.c); h2o set only Content-Type */
    gw_error_note(req, code);
    memset(&req->res.headers, 0, sizeof(req->res.headers));
    req->res.content_length = replace->body.len;
    if (html) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/html; charset=utf-8"));
    } else {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/json"));
    }
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-content-type-options"), 0, NULL, H2O_STRLIT("nosniff"));
    if (origin.base != NULL) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, NULL, origin.base, origin.len);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_VARY, NULL, H2O_STRLIT("Origin"));
    }
}

static void on_setup_ostream(h2o_filter_t *_self, h2o_req_t *req, h2o_ostream_t **slot)
{
    early_filter_t *self = (void *)_self;

    /* The fallback path has no handler, so every response on it is h2o's
     * own; its only 413 is the body limit, its only 431 the head limit. */
    if (req->res.status == 413 || req->res.status == 431) {
        rewrite(self, req, slot, req->res.status == 413 ? GW_ERR_BODY_TOO_LARGE : GW_ERR_HEADERS_TOO_LARGE);
        slot = &(*slot)->next;
    }
    h2o_setup_next_ostream(req, slot);
}

void gw_early_errors_register(h2o_pathconf_t *fallback, const gw_config_t *config)
{
    early_filter_t *filter = (void *)h2o_create_filter(fallback, sizeof(*filter));

    filter->super.on_setup_ostream = on_setup_ostream;
    filter->config = config;
}
