/* libFuzzer target: an upstream's HTTP/1 response, as the proxy reads it
 * (upstream/http1_head.c): the head through gw_http1_response_parse, its
 * framing and the headers that would reach the client (without a view, and
 * through upstream/address_view.c in preserve and localhost mode), then the
 * rest of the input as the body through gw_http1_body_decode, fed in two
 * slices as a socket would. Invariants: no crash; every header name and value
 * lies inside the input; a view only drops Set-Cookie and only changes
 * Set-Cookie (and, in localhost mode, Location, Content-Location, Refresh,
 * Access-Control-Allow-Origin); what it passes on never holds CR, LF or NUL
 * and is left as it is by a second pass (no loopback origin, no gateway
 * cookie, no preview Domain is left); decoding never produces more bytes
 * than it was given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "upstream/http1_head.h"

static char *domains[] = {"lizard.app", "example.org"};
static const gw_cookie_rules_t rules = {domains, 2, "__Host-lizard_access"};

static int rewritable(const h2o_iovec_t *name, int localhost)
{
    if (name == &H2O_TOKEN_SET_COOKIE->buf)
        return 1;
    return localhost && (name == &H2O_TOKEN_LOCATION->buf || name == &H2O_TOKEN_CONTENT_LOCATION->buf ||
                         name == &H2O_TOKEN_REFRESH->buf || name == &H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN->buf);
}

/* `got` is `plain` (the headers without a view) as the view may change it. */
static void check_view(h2o_mem_pool_t *pool, const gw_address_view_t *v, const h2o_headers_t *plain, const h2o_headers_t *got)
{
    size_t i, j = 0;

    for (i = 0; i != plain->size; ++i) {
        const h2o_header_t *p = plain->entries + i, *g = j != got->size ? got->entries + j : NULL;
        /* names h2o has no token for are copies: compared by their bytes */
        if (g == NULL || !h2o_memis(g->name->base, g->name->len, p->name->base, p->name->len)) {
            /* dropped: only a Set-Cookie */
            if (p->name != &H2O_TOKEN_SET_COOKIE->buf)
                __builtin_trap();
            continue;
        }
        ++j;
        if (!rewritable(g->name, v->localhost_port != 0) && !h2o_memis(g->value.base, g->value.len, p->value.base, p->value.len))
            __builtin_trap();
        if (memchr(g->value.base, '\r', g->value.len) != NULL || memchr(g->value.base, '\n', g->value.len) != NULL ||
            memchr(g->value.base, '\0', g->value.len) != NULL)
            __builtin_trap();
        if (h2o_iovec_is_token(g->name)) {
            h2o_iovec_t again = g->value;
            if (!gw_address_view_response_header(v, pool, H2O_STRUCT_FROM_MEMBER(h2o_token_t, buf, g->name), &again) ||
                !h2o_memis(again.base, again.len, g->value.base, g->value.len))
                __builtin_trap();
        }
    }
    if (j != got->size)
        __builtin_trap();
}

static int inside(const char *p, size_t n, const uint8_t *data, size_t size)
{
    return n == 0 || (p >= (const char *)data && p + n <= (const char *)data + size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_http1_response_t res;
    gw_http1_body_t body;
    h2o_mem_pool_t pool;
    h2o_headers_t out = {NULL, 0, 0};
    size_t i;

    if (gw_http1_response_parse((const char *)data, size, &res) != GW_HTTP1_HEAD_COMPLETE)
        return 0;
    if (res.size == 0 || res.size > size || res.num_headers > GW_HTTP1_MAX_RESPONSE_HEADERS || res.status < 100 ||
        res.status > 599 || !inside(res.reason.base, res.reason.len, data, size))
        __builtin_trap();
    for (i = 0; i != res.num_headers; ++i)
        if (!inside(res.headers[i].name, res.headers[i].name_len, data, size) ||
            !inside(res.headers[i].value, res.headers[i].value_len, data, size))
            __builtin_trap();
    if (gw_http1_response_framing(&res, &body, NULL) != 0)
        return 0;
    h2o_mem_init_pool(&pool);
    gw_http1_response_headers(&pool, &out, &res, 1, NULL);
    if (out.size > res.num_headers)
        __builtin_trap();
    for (int localhost = 0; localhost != 2; ++localhost) {
        gw_address_view_t view;
        h2o_headers_t viewed = {NULL, 0, 0};
        gw_address_view_init(&view, &pool, h2o_iovec_init(H2O_STRLIT("3000-sbx1.lizard.app:8443")), localhost ? 5000 : 0, &rules);
        gw_http1_response_headers(&pool, &viewed, &res, 1, &view);
        check_view(&pool, &view, &out, &viewed);
        /* the same values as request headers: what is cut is the preview origin */
        for (i = 0; i != out.size; ++i) {
            for (int whole = 0; whole != 2; ++whole) {
                size_t cut = gw_address_view_request_origin(&view, out.entries[i].value, whole);
                if (cut != 0 && (cut != view.preview_origin.len || cut > out.entries[i].value.len ||
                                 !h2o_lcstris(out.entries[i].value.base, cut, view.preview_origin.base, cut)))
                    __builtin_trap();
            }
        }
    }
    h2o_mem_clear_pool(&pool);

    /* the body: decoded in place, in two reads */
    size_t body_len = size - res.size, split = body_len / 2, got = 0;
    char *buf = malloc(body_len + 1);
    memcpy(buf, data + res.size, body_len);
    for (int part = 0; part != 2; ++part) {
        size_t len = part == 0 ? split : body_len - split, in = len;
        int r = gw_http1_body_decode(&body, buf + (part == 0 ? 0 : split), &len);
        if (len > in || r < -1 || r > 1)
            __builtin_trap();
        got += len;
        if (r != 0)
            break;
    }
    if (got > body_len)
        __builtin_trap();
    free(buf);
    return 0;
}
