/*
 * The warning page's responses. The CSRF token and the consent cookie are
 * gateway cookies (auth/cookie.c) signed with the cookie secrets for the
 * host's sandbox and port, with a binding of their own (auth/warning.c):
 * neither serves as the other, as an access cookie, or for another host, and
 * each only in the browser whose nonce cookie it was made for.
 */
#include <string.h>
#include <time.h>
#include "auth/query.h"
#include "auth/warning.h"
#include "errors/errors.h"
#include "http/redirect.h"
#include "upstream/request_line.h"
#include "http/warning_page.h"

int gw_warning_page_is_consent(h2o_iovec_t path)
{
    size_t len = sizeof(GW_WARNING_CONSENT_PATH) - 1;

    return path.len >= len && memcmp(path.base, GW_WARNING_CONSENT_PATH, len) == 0 && (path.len == len || path.base[len] == '?');
}

static void binding(h2o_req_t *req, gw_warning_binding_kind_t kind, h2o_iovec_t nonce, char out[GW_WARNING_BINDING_SIZE])
{
    gw_warning_binding(kind, gw_host_strip_port(req->authority), nonce, out);
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

/* 1 when `origin` (an Origin header's value) is this host's own: "https://" and the authority as the request names it. */
static int is_own_origin(h2o_req_t *req, h2o_iovec_t origin)
{
    static const char scheme[] = "https://";
    size_t n = sizeof(scheme) - 1;

    return origin.len == n + req->authority.len && h2o_lcstris(origin.base, n, scheme, n) &&
           h2o_lcstris(origin.base + n, req->authority.len, req->authority.base, req->authority.len);
}

int gw_warning_page_applies(h2o_req_t *req)
{
    h2o_iovec_t origin = header_value(req, H2O_STRLIT("origin")), accept = {NULL, 0};
    ssize_t i;

    if ((i = h2o_find_header(&req->headers, H2O_TOKEN_ACCEPT, -1)) != -1)
        accept = req->headers.entries[i].value;
    gw_warning_request_t r = {.method = req->method,
                              .sec_fetch_dest = header_value(req, H2O_STRLIT("sec-fetch-dest")),
                              .is_upgrade = req->upgrade.base != NULL,
                              .prefers_html = gw_error_prefers_html(h2o_iovec_init(NULL, 0), accept),
                              .other_origin = origin.base != NULL && !is_own_origin(req, origin)};
    return gw_warning_applies(&r);
}

int gw_warning_page_consented(h2o_req_t *req, gw_cookie_keys_t *keys, const gw_host_t *host, const gw_warning_cookies_t *cookies)
{
    char b[GW_WARNING_BINDING_SIZE];

    /* bound to the browser's nonce: a consent given in another browser (the sandbox's own, say) does not pass here
     * even if a script could plant it; a browser's HttpOnly nonce cannot be replaced by a script */
    if (cookies->consent.base == NULL || !gw_warning_nonce_ok(cookies->nonce))
        return 0;
    binding(req, GW_WARNING_CONSENT, cookies->nonce, b);
    return gw_cookie_keys_verify(keys, cookies->consent, host->sandbox_id, host->port, (uint64_t)time(NULL), b) == GW_COOKIE_OK;
}

void gw_warning_page_send(h2o_req_t *req, const gw_config_t *conf, gw_cookie_keys_t *keys, const gw_host_t *host,
                          h2o_iovec_t return_path, const gw_warning_cookies_t *cookies)
{
    int iframe_mode = conf->auth.cookie_same_site == GW_COOKIE_SAME_SITE_NONE;
    char b[GW_WARNING_BINDING_SIZE], fresh[GW_WARNING_NONCE_LEN + 1];
    h2o_iovec_t nonce = cookies->nonce, csrf = h2o_iovec_init(NULL, 0), body, set;

    /* the browser's nonce again when it has one, so that the pages of several tabs all work; a planted one
     * cannot be there (__Host-Http-: no script can set it, and the sandbox's Set-Cookie cannot either) */
    if (!gw_warning_nonce_ok(nonce)) {
        if (gw_warning_nonce_new(fresh) != 0) {
            gw_error_send(req, GW_ERR_INVALID_TOKEN, host->sandbox_id, host->port, NULL);
            return;
        }
        nonce = h2o_strdup(&req->pool, fresh, GW_WARNING_NONCE_LEN);
    }
    binding(req, GW_WARNING_CSRF, nonce, b);
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
    /* host-only and HttpOnly like the consent cookie; it lives as long as the token */
    set = gw_cookie_set_header(&req->pool, h2o_iovec_init(H2O_STRLIT(GW_WARNING_NONCE_COOKIE)), nonce, GW_WARNING_CSRF_TTL_S,
                               conf->auth.cookie_same_site);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, set.base, set.len);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/html; charset=utf-8"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    add_header(req, H2O_STRLIT("x-robots-tag"), H2O_STRLIT("noindex"));
    add_header(req, H2O_STRLIT("x-content-type-options"), H2O_STRLIT("nosniff"));
    /* no window of the sandbox's (same origin, but opened from a frame in another site) can reach into the page and
     * read its token */
    add_header(req, H2O_STRLIT("cross-origin-opener-policy"), H2O_STRLIT("same-origin"));
    /* not no-referrer: under it a browser sends "Origin: null" with the form, which from_this_host refuses */
    add_header(req, H2O_STRLIT("referrer-policy"), H2O_STRLIT("same-origin"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_VARY, NULL, H2O_STRLIT("Accept-Language"));
    /* no script can run on the page; only in iframe mode may another site frame it (a browser without Fetch Metadata
     * can get it in a frame) */
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

/* 1 when the browser's own headers say the form was this host's page at the
 * top level: Sec-Fetch-Site same-origin and Sec-Fetch-Dest document, and an
 * Origin of this host, where sent. */
static int from_this_host(h2o_req_t *req)
{
    h2o_iovec_t site = header_value(req, H2O_STRLIT("sec-fetch-site")), dest = header_value(req, H2O_STRLIT("sec-fetch-dest")),
                origin = header_value(req, H2O_STRLIT("origin"));

    if (site.base != NULL && !h2o_lcstris(site.base, site.len, H2O_STRLIT("same-origin")))
        return 0;
    if (dest.base != NULL && !h2o_lcstris(dest.base, dest.len, H2O_STRLIT("document")))
        return 0;
    return origin.base == NULL || is_own_origin(req, origin);
}

void gw_warning_page_consent(h2o_req_t *req, const gw_config_t *conf, gw_cookie_keys_t *keys, const gw_host_t *host,
                             const gw_warning_cookies_t *cookies)
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
    /* the token is worth something only with the nonce of the browser it was shown to: one fetched by anyone else
     * (the sandbox's server, say) was made for another nonce */
    if (csrf.base == NULL || !gw_warning_nonce_ok(cookies->nonce) || !from_this_host(req)) {
        gw_error_send_why(req, GW_ERR_INVALID_TOKEN, GW_WHY_CONSENT_NOT_VALID, host->sandbox_id, host->port, NULL);
        return;
    }
    binding(req, GW_WARNING_CSRF, cookies->nonce, b);
    if (gw_cookie_keys_verify(keys, csrf, host->sandbox_id, host->port, now, b) != GW_COOKIE_OK) {
        gw_error_send_why(req, GW_ERR_INVALID_TOKEN, GW_WHY_CONSENT_NOT_VALID, host->sandbox_id, host->port, NULL);
        return;
    }
    if (!gw_warning_return_path_ok(return_path))
        return_path = h2o_iovec_init(H2O_STRLIT("/"));

    binding(req, GW_WARNING_CONSENT, cookies->nonce, b);
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
    /* the nonce the consent is bound to lives as long as the consent (and at least as long as a token) */
    set = gw_cookie_set_header(&req->pool, h2o_iovec_init(H2O_STRLIT(GW_WARNING_NONCE_COOKIE)), cookies->nonce,
                               conf->auth.public_warning_ttl_s > GW_WARNING_CSRF_TTL_S ? conf->auth.public_warning_ttl_s
                                                                                       : GW_WARNING_CSRF_TTL_S,
                               conf->auth.cookie_same_site);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, set.base, set.len);
    gw_redirect_send(req, 303, "See Other", gw_redirect_location(&req->pool, req->authority, return_path));
}
