/*
 * The CORS headers of an edge port's responses (see cors.h). One pass over
 * the response's headers takes the app's Access-Control-* out (keeping what
 * it exposed) and notes a Vary that already names Origin.
 */
#include <string.h>
#include "http/cors.h"
#include "routing/cors_origins.h"

#define AC_PREFIX "access-control-"
#define AC_EXPOSE "access-control-expose-headers"

int gw_cors_decide(const gw_sandbox_port_t *port, h2o_iovec_t origin, gw_cors_t *out)
{
    *out = (gw_cors_t){{NULL, 0}, 0};
    if (origin.len == 0 || h2o_memis(origin.base, origin.len, H2O_STRLIT("null")))
        return 0;
    if (gw_cors_origins_contain(port->cors_origins, origin)) {
        out->origin = origin;
        out->credentials = !port->cors_any;
        return 1;
    }
    if (port->cors_any) {
        out->origin = origin;
        return 1;
    }
    return 0;
}

static void add(h2o_mem_pool_t *pool, h2o_headers_t *headers, const h2o_token_t *token, const char *name, size_t name_len,
                h2o_iovec_t value)
{
    if (token != NULL)
        h2o_add_header(pool, headers, token, NULL, value.base, value.len);
    else
        h2o_add_header_by_str(pool, headers, name, name_len, 0, NULL, value.base, value.len);
}

/* Takes every Access-Control-* header out of `headers`; returns what the
 * app's Access-Control-Expose-Headers listed (joined with ", "), and sets
 * *vary_origin when a Vary names Origin (or is "*"). */
static h2o_iovec_t take_app_headers(h2o_mem_pool_t *pool, h2o_headers_t *headers, int *vary_origin)
{
    h2o_iovec_t exposed = {NULL, 0};
    size_t i, kept = 0;

    *vary_origin = 0;
    for (i = 0; i != headers->size; ++i) {
        const h2o_header_t *h = headers->entries + i;
        if (h->name->len > sizeof(AC_PREFIX) - 1 && h2o_lcstris(h->name->base, sizeof(AC_PREFIX) - 1, H2O_STRLIT(AC_PREFIX))) {
            if (h2o_lcstris(h->name->base, h->name->len, H2O_STRLIT(AC_EXPOSE)) && h->value.len != 0)
                exposed = exposed.len == 0 ? h->value : h2o_concat(pool, exposed, h2o_iovec_init(H2O_STRLIT(", ")), h->value);
            continue;
        }
        if (h->name == &H2O_TOKEN_VARY->buf && (h2o_contains_token(h->value.base, h->value.len, H2O_STRLIT("origin"), ',') ||
                                                h2o_contains_token(h->value.base, h->value.len, H2O_STRLIT("*"), ',')))
            *vary_origin = 1;
        headers->entries[kept++] = *h;
    }
    headers->size = kept;
    return exposed;
}

void gw_cors_rewrite(h2o_mem_pool_t *pool, h2o_headers_t *headers, const gw_cors_t *c)
{
    int vary_origin;
    h2o_iovec_t exposed = take_app_headers(pool, headers, &vary_origin);

    if (c->origin.base != NULL) {
        add(pool, headers, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, NULL, 0, c->origin);
        if (c->credentials)
            add(pool, headers, NULL, H2O_STRLIT("access-control-allow-credentials"), h2o_iovec_init(H2O_STRLIT("true")));
        h2o_iovec_t ours = h2o_iovec_init(H2O_STRLIT(GW_CORS_EXPOSED));
        add(pool, headers, NULL, H2O_STRLIT(AC_EXPOSE),
            exposed.len == 0 ? ours : h2o_concat(pool, ours, h2o_iovec_init(H2O_STRLIT(", ")), exposed));
    }
    if (!vary_origin)
        add(pool, headers, H2O_TOKEN_VARY, NULL, 0, h2o_iovec_init(H2O_STRLIT("Origin")));
}

void gw_cors_preflight_headers(h2o_mem_pool_t *pool, h2o_headers_t *headers, const gw_cors_t *c, h2o_iovec_t method,
                               h2o_iovec_t request_headers)
{
    add(pool, headers, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, NULL, 0, c->origin);
    add(pool, headers, H2O_TOKEN_VARY, NULL, 0, h2o_iovec_init(H2O_STRLIT("Origin")));
    add(pool, headers, NULL, H2O_STRLIT("access-control-allow-methods"), method);
    if (request_headers.len != 0)
        add(pool, headers, NULL, H2O_STRLIT("access-control-allow-headers"), request_headers);
    add(pool, headers, NULL, H2O_STRLIT("access-control-max-age"), h2o_iovec_init(H2O_STRLIT(GW_CORS_MAX_AGE)));
    if (c->credentials)
        add(pool, headers, NULL, H2O_STRLIT("access-control-allow-credentials"), h2o_iovec_init(H2O_STRLIT("true")));
}
