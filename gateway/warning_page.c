/*
 * The warning page's responses. The CSRF token and the consent cookie are
 * gateway cookies (auth/cookie.c) signed with the cookie secrets for the
 * host's sandbox and port, with a binding of their own (auth/warning.c):
 * neither serves as the other, as an access cookie, or for another host.
 */
#include <string.h>
#include <time.h>
#include "auth/query.h"
#include "auth/warning.h"
#include "gateway/errors.h"
#include "gateway/request_line.h"
#include "gateway/warning_page.h"

int gw_warning_page_is_consent(h2o_iovec_t path)
{
    size_t len = sizeof(GW_WARNING_CONSENT_PATH) - 1;

    return path.len >= len && memcmp(path.base, GW_WARNING_CONSENT_PATH, len) == 0 && (path.len == len || path.base[len] == '?');
}

static void binding(h2o_req_t *req, gw_warning_binding_kind_t kind, char out[GW_WARNING_BINDING_SIZE])
{
    gw_warning_binding(kind, gw_host_strip_port(req->authority), out);
}

int gw_warning_page_consented(h2o_req_t *req, gw_cookie_keys_t *keys, const gw_host_t *host, h2o_iovec_t value)
{
    char b[GW_WARNING_BINDING_SIZE];

    if (value.base == NULL)
        return 0;
    binding(req, GW_WARNING_CONSENT, b);
    return gw_cookie_keys_verify(keys, value, host->sandbox_id, host->port, (uint64_t)time(NULL), b) == GW_COOKIE_OK;
}

static h2o_iovec_t header_value(h2o_req_t *req, const char *name, size_t len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, len, -1);
    return i != -1 ? req->headers.entries[i].value : h2o_iovec_init(NULL, 0);
}

static void add_header(h2o_req_t *req, const char *name, size_t name_len, const char *value, size_t value_len)
{
    h2o_add_header_by_str(&req->pool, &req->res.headers, name, name_len, 0, NULL, value, value_len);
}

void gw_warning_page_send(h2o_req_t *req, const gw_config_t *conf, gw_cookie_keys_t *keys, const gw_host_t *host,
                          h2o_iovec_t return_path)
{
    int iframe_mode = conf->auth.cookie_same_site == GW_COOKIE_SAME_SITE_NONE;
    char b[GW_WARNING_BINDING_SIZE];
    h2o_iovec_t csrf = h2o_iovec_init(NULL, 0), body;

    binding(req, GW_WARNING_CSRF, b);
    /* config requires cookie secrets with the page, and a reload never empties them */
    if (gw_cookie_keys_sign(keys, &req->pool, host->sandbox_id, host->port, (uint64_t)time(NULL) + GW_WARNING_CSRF_TTL_S, b,
                            &csrf) != 0 ||
        csrf.base == NULL) {
        gw_error_send(req, GW_ERR_INVALID_TOKEN, host->sandbox_id, host->port, NULL);
        return;
    }
    if (!gw_warning_return_path_ok(return_path))
        return_path = h2o_iovec_init(H2O_STRLIT("/"));
    body = gw_warning_render(&req->pool, gw_warning_strings(header_value(req, H2O_STRLIT("accept-language"))),
                             gw_host_strip_port(req->authority), csrf, return_path);

    req->res.status = 200;
    req->res.reason = "OK";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/html; charset=utf-8"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    add_header(req, H2O_STRLIT("x-robots-tag"), H2O_STRLIT("noindex"));
    add_header(req, H2O_STRLIT("x-content-type-options"), H2O_STRLIT("nosniff"));
    /* not no-referrer: under it a browser sends "Origin: null" with the form, which from_this_host refuses */
    add_header(req, H2O_STRLIT("referrer-policy"), H2O_STRLIT("same-origin"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_VARY, NULL, H2O_STRLIT("Accept-Language"));
    /* no script can run on the page; only in iframe mode may another site frame it (and its Continue button) */
    if (iframe_mode) {
        add_header(req, H2O_STRLIT("content-security-policy"),
                   H2O_STRLIT("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'"));
    } else {
        add_header(req, H2O_STRLIT("content-security-policy"),
                   H2O_STRLIT("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; "
                              "frame-ancestors 'none'"));
        add_header(req, H2O_STRLIT("x-frame-options"), H2O_STRLIT("DENY"));
    }
    req->res.content_length = body.len;
    h2o_send_inline(req, body.base, body.len);
}

/* 1 when the browser's own headers say the form came from this host: a
 * same-origin Sec-Fetch-Site and an Origin of this host, where sent. A
 * CSRF token alone would not do: anyone can fetch a page and its token. */
static int from_this_host(h2o_req_t *req)
{
    h2o_iovec_t site = header_value(req, H2O_STRLIT("sec-fetch-site")), origin = header_value(req, H2O_STRLIT("origin"));

    if (site.base != NULL && !h2o_lcstris(site.base, site.len, H2O_STRLIT("same-origin")))
        return 0;
    if (origin.base != NULL) {
        static const char scheme[] = "https://";
        size_t n = sizeof(scheme) - 1;
        if (!(origin.len == n + req->authority.len && h2o_lcstris(origin.base, n, scheme, n) &&
              h2o_lcstris(origin.base + n, req->authority.len, req->authority.base, req->authority.len)))
            return 0;
    }
    return 1;
}

void gw_warning_page_consent(h2o_req_t *req, const gw_config_t *conf, gw_cookie_keys_t *keys, const gw_host_t *host)
{
    h2o_iovec_t form, csrf = h2o_iovec_init(NULL, 0), return_path = h2o_iovec_init(NULL, 0), ignored, value;
    char b[GW_WARNING_BINDING_SIZE];
    uint64_t now = (uint64_t)time(NULL);

    if (!h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"))) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, H2O_STRLIT("POST"));
        gw_request_line_refuse(req, 405, "Method Not Allowed", "The warning page's consent is sent with POST only");
        return;
    }
    /* the form as a query: its fields are percent-decoded the same way */
    if (req->entity.base != NULL && req->entity.len <= GW_WARNING_MAX_FORM_BYTES) {
        form = h2o_concat(&req->pool, h2o_iovec_init(H2O_STRLIT("/?")), req->entity);
        gw_query_take(&req->pool, form, h2o_iovec_init(H2O_STRLIT("csrf")), &csrf, &ignored);
        gw_query_take(&req->pool, form, h2o_iovec_init(H2O_STRLIT("return")), &return_path, &ignored);
    }
    binding(req, GW_WARNING_CSRF, b);
    if (csrf.base == NULL || !from_this_host(req) ||
        gw_cookie_keys_verify(keys, csrf, host->sandbox_id, host->port, now, b) != GW_COOKIE_OK) {
        gw_error_send_why(req, GW_ERR_INVALID_TOKEN, GW_WHY_CONSENT_NOT_VALID, host->sandbox_id, host->port, NULL);
        return;
    }
    if (!gw_warning_return_path_ok(return_path))
        return_path = h2o_iovec_init(H2O_STRLIT("/"));

    binding(req, GW_WARNING_CONSENT, b);
    if (gw_cookie_keys_sign(keys, &req->pool, host->sandbox_id, host->port, now + conf->auth.public_warning_ttl_s, b, &value) !=
            0 ||
        value.base == NULL) {
        gw_error_send_why(req, GW_ERR_INVALID_TOKEN, GW_WHY_CONSENT_NOT_VALID, host->sandbox_id, host->port, NULL);
        return;
    }
    /* host-only like the access cookie; SameSite=None; Partitioned in iframe mode */
    h2o_iovec_t set = gw_cookie_set_header(&req->pool, h2o_iovec_init(H2O_STRLIT(GW_WARNING_CONSENT_COOKIE)), value,
                                           conf->auth.public_warning_ttl_s, conf->auth.cookie_same_site);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, set.base, set.len);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL, return_path.base, return_path.len);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    req->res.status = 303;
    req->res.reason = "See Other";
    h2o_send_inline(req, "", 0);
}
