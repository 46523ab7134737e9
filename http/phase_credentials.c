/*
 * The credentials phase: the port's access rule on the routed record. A
 * port not exposed is port_not_exposed; a public one goes on (past the
 * warning page when auth.public_warning is on); a private one needs a
 * credential (http/credentials.h), and a valid query credential on a
 * navigation is answered with the 302 that turns it into the cookie. Hands
 * on r->grant. The credentials themselves are taken off the request once,
 * when the route answers (gw_phase_credentials_take): the sandbox never
 * sees them.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "common/engine.h"
#include "auth/cookie.h"
#include "auth/query.h"
#include "http/credentials.h"
#include "http/oauth_resource.h"
#include "http/phases.h"
#include "http/redirect.h"
#include "http/warning_page.h"

#define TOKEN_HEADER "x-lizard-access-token"
#define QUERY_PARAM "lizard_token"

static gw_cookie_same_site_t same_site(const gw_config_t *conf)
{
    return conf->auth.cookie_same_site;
}

static h2o_iovec_t cookie_name(const gw_config_t *conf)
{
    return h2o_iovec_init(conf->auth.cookie_name, strlen(conf->auth.cookie_name));
}

/* An Authorization field: 1 when it is the gateway's (a Bearer that is a
 * share link or the record's access token), to be taken off; the only one
 * of the request (num_fields 1) is then its credential (r->bearer). With
 * several fields none is a credential (which would count is ambiguous), and
 * the gateway's are still never forwarded. Any other is the app's. */
static int take_authorization(gw_pipeline_req_t *r, h2o_iovec_t field, size_t num_fields)
{
    h2o_iovec_t bearer = gw_credentials_bearer(field);

    if (bearer.base == NULL || r->sbx == NULL || !gw_credentials_bearer_is_ours(bearer, r->sbx))
        return 0;
    if (num_fields == 1)
        r->bearer = bearer;
    return 1;
}

/* Takes the token header fields, the gateway's Authorization fields and the
 * Cookie fields off the request, in one pass over its headers: the first
 * token header is the credential (r->token_header), none is forwarded (the
 * proxy's X-Lizard-* rule need not find it, nor a phase look it up again);
 * the Cookie fields are returned in *fields for the caller to rebuild. */
static void take_token_and_cookie_fields(gw_pipeline_req_t *r, h2o_iovec_t **fields, size_t *num_fields)
{
    h2o_headers_t *headers = &r->req->headers;
    size_t num_cookies = 0, num_tokens = 0, num_auth = 0, taken = 0, i, kept;

    /* Linear in the number of header fields: HPACK makes a repeated "cookie" field cost a byte,
     * so a request can carry hundreds of thousands of them. */
    for (i = 0; i != headers->size; ++i) {
        const h2o_iovec_t *name = headers->entries[i].name;
        if (name == &H2O_TOKEN_COOKIE->buf)
            ++num_cookies;
        else if (name == &H2O_TOKEN_AUTHORIZATION->buf)
            ++num_auth;
        else if (h2o_memis(name->base, name->len, H2O_STRLIT(TOKEN_HEADER))) /* h2o's names are lowercase */
            ++num_tokens;
    }
    *fields = NULL;
    *num_fields = 0;
    if (num_cookies == 0 && num_tokens == 0 && num_auth == 0)
        return;
    if (num_cookies != 0)
        *fields = gw_pool_alloc(&r->req->pool, sizeof(**fields) * num_cookies);
    for (i = 0, kept = 0; i != headers->size; ++i) {
        const h2o_header_t *h = headers->entries + i;
        if (h->name == &H2O_TOKEN_COOKIE->buf)
            (*fields)[(*num_fields)++] = h->value;
        else if (h->name == &H2O_TOKEN_AUTHORIZATION->buf && take_authorization(r, h->value, num_auth))
            continue;
        else if (num_tokens != 0 && h2o_memis(h->name->base, h->name->len, H2O_STRLIT(TOKEN_HEADER))) {
            if (taken++ == 0)
                r->token_header = h->value;
        } else
            headers->entries[kept++] = *h;
    }
    headers->size = kept;
}

/* Removes the gateway's credentials from what will be forwarded: the
 * lizard_token parameter (into r->path), the token header (into
 * r->token_header), the gateway's cookie and the warning page's two cookies
 * (the Cookie header is rebuilt from the app's own cookies, HTTP/2 fields
 * joined). The proxy also drops every X-Lizard-* header. */
static void strip_credentials(gw_pipeline_req_t *r)
{
    h2o_req_t *req = r->req;
    const gw_config_t *conf = r->conf->config;
    h2o_iovec_t *fields, rest;
    size_t num_fields;

    r->query_token_count = gw_query_take(&req->pool, req->path, h2o_iovec_init(H2O_STRLIT(QUERY_PARAM)), &r->query_token, &r->path);
    take_token_and_cookie_fields(r, &fields, &num_fields);
    if (num_fields == 0)
        return;
    gw_cookie_extract(&req->pool, fields, num_fields, cookie_name(conf), &r->cookie, &rest);
    /* whether or not the page is on now: the sandbox never learns a nonce (with it, its server could fetch a token
     * for this very browser) nor a consent */
    h2o_iovec_t others = rest;
    if (others.len != 0)
        gw_cookie_extract(&req->pool, &others, 1, h2o_iovec_init(H2O_STRLIT(GW_WARNING_CONSENT_COOKIE)), &r->warning.consent,
                          &rest);
    if ((others = rest).len != 0)
        gw_cookie_extract(&req->pool, &others, 1, h2o_iovec_init(H2O_STRLIT(GW_WARNING_NONCE_COOKIE)), &r->warning.nonce, &rest);
    if (rest.len != 0)
        h2o_add_header(&req->pool, &req->headers, H2O_TOKEN_COOKIE, NULL, rest.base, rest.len);
}

/* The request line the app gets must be one: an HTTP/2 :path may hold bytes
 * an HTTP/1.1 request-target cannot (space, controls, non-ASCII, '#'), or be
 * empty. Those bytes are percent-encoded, as a browser would; a valid target
 * passes byte for byte. */
static h2o_iovec_t safe_target(h2o_mem_pool_t *pool, h2o_iovec_t path)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i, extra = 0;
    char *out, *o;

    if (path.len == 0)
        return h2o_iovec_init(H2O_STRLIT("/"));
    for (i = 0; i != path.len; ++i) {
        unsigned char c = (unsigned char)path.base[i];
        if (c <= 0x20 || c >= 0x7f || c == '#')
            extra += 2;
    }
    if (extra == 0)
        return path;
    o = out = gw_pool_alloc(pool, path.len + extra + 1);
    for (i = 0; i != path.len; ++i) {
        unsigned char c = (unsigned char)path.base[i];
        if (c <= 0x20 || c >= 0x7f || c == '#') {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        } else {
            *o++ = (char)c;
        }
    }
    *o = '\0';
    return h2o_iovec_init(out, (size_t)(o - out));
}

/* The query token on a GET/HEAD becomes a cookie: 302 to the same target
 * without the parameter, so the token leaves the address bar and history. */
static void redirect_with_cookie(gw_pipeline_req_t *r, const gw_sandbox_t *sbx)
{
    h2o_req_t *req = r->req;
    const gw_config_t *conf = r->conf->config;
    uint64_t expires = (uint64_t)time(NULL) + conf->auth.cookie_ttl_s;
    h2o_iovec_t value;

    /* the set was not empty when the caller checked; a reload never empties it */
    if (gw_cookie_keys_sign(r->conf->cookie_keys, &req->pool, sbx->id, r->host.port, expires, sbx->token_sha256, &value) != 0) {
        gw_phase_error(r, GW_ERR_INVALID_TOKEN, NULL);
        return;
    }
    h2o_iovec_t set = gw_cookie_set_header(&req->pool, cookie_name(conf), value, conf->auth.cookie_ttl_s, same_site(conf));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, set.base, set.len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("referrer-policy"), 0, NULL, H2O_STRLIT("no-referrer"));
    gw_redirect_send(req, 302, "Found", gw_redirect_location(&req->pool, req->authority, r->path));
}

/* A frame in a page of another site, as Fetch Metadata says: there a
 * SameSite=Lax or Strict cookie is neither stored nor sent. */
static int is_cross_site_frame(h2o_req_t *req)
{
    return (gw_phase_header_is(req, H2O_STRLIT("sec-fetch-dest"), H2O_STRLIT("iframe")) ||
            gw_phase_header_is(req, H2O_STRLIT("sec-fetch-dest"), H2O_STRLIT("frame"))) &&
           gw_phase_header_is(req, H2O_STRLIT("sec-fetch-site"), H2O_STRLIT("cross-site"));
}

/* A share link in the query of a navigation becomes the gateway's own
 * cookie (CONTRACT.md: the cookie is not the token), signed with the cookie
 * secrets and binding sandbox, port, an expiry no later than the link's
 * (nor than auth.cookie_ttl_s) and the link's epoch: a new link_epoch ends
 * it, as it ends the link. A view-only link's cookie is view-only ("w1"). */
static void redirect_with_link_cookie(gw_pipeline_req_t *r, const gw_grant_t *grant)
{
    h2o_req_t *req = r->req;
    const gw_config_t *conf = r->conf->config;
    uint64_t now = (uint64_t)time(NULL), max_age = grant->expires_at > now ? grant->expires_at - now : 0;
    h2o_iovec_t value;

    if (max_age > conf->auth.cookie_ttl_s)
        max_age = conf->auth.cookie_ttl_s;
    /* the set was not empty when the caller checked; a reload never empties it */
    if ((grant->view_only ? gw_cookie_keys_sign_view_link : gw_cookie_keys_sign_link)(
            r->conf->cookie_keys, &req->pool, r->host.sandbox_id, r->host.port, now + max_age, grant->link_epoch, &value) != 0) {
        gw_phase_error(r, GW_ERR_INVALID_TOKEN, NULL);
        return;
    }
    h2o_iovec_t set = gw_cookie_set_header(&req->pool, cookie_name(conf), value, max_age, same_site(conf));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, set.base, set.len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("referrer-policy"), 0, NULL, H2O_STRLIT("no-referrer"));
    gw_redirect_send(req, 302, "Found", gw_redirect_location(&req->pool, req->authority, r->path));
}

typedef enum {
    CREDENTIAL_NONE = 0,
    CREDENTIAL_OK,       /* the grant is filled */
    CREDENTIAL_ANSWERED, /* a valid query credential on a navigation: answered with 302 and the cookie */
    CREDENTIAL_REFUSED,  /* *why says why; *clear when the refused one was the gateway's cookie */
} credential_t;

/* The request's credential (http/credentials.h). A valid lizard_token on
 * a GET/HEAD navigation becomes the cookie; only a navigation does: a
 * cross-origin fetch cannot use a 302 that carries no CORS headers, and
 * EventSource or media send nothing but the URL. */
static credential_t check_credential(gw_pipeline_req_t *r, const gw_sandbox_t *sbx, gw_grant_t *grant, gw_error_why_t *why,
                                     int *clear)
{
    h2o_req_t *req = r->req;
    gw_credentials_t c = {.header = r->token_header,
                          .query = r->query_token,
                          .has_query = r->query_token_count != 0,
                          .cookie = r->cookie,
                          .bearer = r->bearer};
    gw_credential_keys_t keys = {r->conf->cookie_keys, r->conf->link_keys, r->conf->config->auth.link_max_ttl_s};
    int from = GW_CREDENTIAL_FROM_HEADER;

    *clear = 0;
    switch (gw_credentials_check(&c, &keys, sbx, r->host.port, (uint64_t)time(NULL), grant, why, &from)) {
    case GW_CREDENTIAL_OK:
        break;
    case GW_CREDENTIAL_REFUSED:
        *clear = from == GW_CREDENTIAL_FROM_COOKIE;
        return CREDENTIAL_REFUSED;
    default:
        return CREDENTIAL_NONE;
    }
    if (from == GW_CREDENTIAL_FROM_QUERY &&
        (gw_phase_is_method(req, H2O_STRLIT("GET")) || gw_phase_is_method(req, H2O_STRLIT("HEAD"))) && req->upgrade.base == NULL &&
        gw_error_is_navigation(req)) {
        /* without cookie secrets there is no cookie to give: the query is accepted in place */
        if (gw_cookie_keys_count(r->conf->cookie_keys) != 0) {
            if (grant->kind == GW_GRANT_LINK)
                redirect_with_link_cookie(r, grant);
            else
                redirect_with_cookie(r, sbx);
            return CREDENTIAL_ANSWERED;
        }
    }
    return CREDENTIAL_OK; /* a query credential is accepted in place, removed before forwarding */
}

/* 1 when the request may go on to a private port, with the grant filled;
 * otherwise answers it. */
static int authenticate(gw_pipeline_req_t *r, const gw_sandbox_t *sbx, gw_grant_t *grant)
{
    h2o_req_t *req = r->req;
    const gw_config_t *conf = r->conf->config;
    gw_error_why_t why = GW_WHY_DEFAULT;
    int clear;

    switch (check_credential(r, sbx, grant, &why, &clear)) {
    case CREDENTIAL_OK:
        return 1;
    case CREDENTIAL_ANSWERED:
        return 0;
    case CREDENTIAL_REFUSED:
        if (clear) {
            h2o_iovec_t c = gw_cookie_clear_header(&req->pool, cookie_name(conf), same_site(conf));
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, c.base, c.len);
        }
        gw_phase_error_why(r, GW_ERR_INVALID_TOKEN, why);
        return 0;
    default:
        break;
    }
    gw_oauth_resource_challenge(conf, req);
    gw_phase_error_why(r, GW_ERR_MISSING_TOKEN,
                       same_site(conf) != GW_COOKIE_SAME_SITE_NONE && is_cross_site_frame(req) ? GW_WHY_EMBEDDED_SAME_SITE
                                                                                               : GW_WHY_DEFAULT);
    return 0;
}

/* A public port with auth.public_warning (CONTRACT.md, "Public ports and the
 * warning page"): 1 when the request goes on to the sandbox, 0 when answered
 * with the page (or with the redirect that turns a valid query credential
 * into the cookie, or as the page's consent form). Only a top-level
 * navigation without a valid credential or consent gets the page; a wrong
 * credential does not skip it. */
static int public_warning(gw_pipeline_req_t *r, const gw_sandbox_t *sbx)
{
    h2o_req_t *req = r->req;
    const gw_config_t *conf = r->conf->config;
    gw_grant_t ignored = {.kind = GW_GRANT_PUBLIC};
    gw_error_why_t why;
    int clear;

    /* a tcp port serves no page to warn about: every request but its tunnel is not_http_port (protocol phase) */
    if (!conf->auth.public_warning || gw_phase_port_is_tcp(r))
        return 1;
    /* the Continue button's form: only for a host whose port is public (and exposed: the caller knows) */
    if (gw_warning_page_is_consent(r->path)) {
        gw_warning_page_consent(req, conf, r->conf->cookie_keys, &r->host, &r->warning);
        return 0;
    }
    if (!gw_warning_page_applies(req))
        return 1;
    switch (check_credential(r, sbx, &ignored, &why, &clear)) {
    case CREDENTIAL_OK:
        return 1;
    case CREDENTIAL_ANSWERED:
        return 0;
    default:
        break;
    }
    if (gw_warning_page_consented(req, r->conf->cookie_keys, &r->host, &r->warning))
        return 1;
    gw_warning_page_send(req, conf, r->conf->cookie_keys, &r->host, r->path, &r->warning);
    return 0;
}

void gw_phase_credentials_take(gw_pipeline_req_t *r)
{
    strip_credentials(r);
    r->path = safe_target(&r->req->pool, r->path);
}

gw_phase_result_t gw_phase_credentials(gw_pipeline_req_t *r)
{
    gw_sandbox_t *sbx = r->sbx;

    r->grant = (gw_grant_t){.record = sbx, .port = r->host.port, .kind = GW_GRANT_PUBLIC};
    /* a tcp port takes only its tunnel's handshake: no CORS to answer */
    if (r->sbx_port != NULL && r->sbx_port->cors_edge && !r->sbx_port->tcp && gw_phase_cors_edge(r) == GW_PHASE_ANSWERED)
        return GW_PHASE_ANSWERED;
    switch (r->sbx_port != NULL ? r->sbx_port->access : GW_PORT_NOT_EXPOSED) {
    case GW_PORT_PUBLIC:
        return public_warning(r, sbx) ? GW_PHASE_NEXT : GW_PHASE_ANSWERED;
    case GW_PORT_PRIVATE:
        /* the RFC 9728 document names who issues credentials: it cannot need one */
        if (gw_oauth_resource_is_request(r->conf->config, r->req, r->path)) {
            gw_oauth_resource_send(r->conf->config, r->req);
            return GW_PHASE_ANSWERED;
        }
        if (gw_phase_is_cors_preflight(r->req)) {
            r->grant.kind = GW_GRANT_PREFLIGHT;
            return GW_PHASE_NEXT;
        }
        return authenticate(r, sbx, &r->grant) ? GW_PHASE_NEXT : GW_PHASE_ANSWERED;
    default:
        return gw_phase_error(r, GW_ERR_PORT_NOT_EXPOSED, NULL);
    }
}
