/*
 * The request pipeline: request line (method, origin-form target) -> host
 * -> route (cache or Redis) -> access rule -> credential -> state -> allowed
 * network -> connection slot -> proxy, with the gateway's credentials
 * stripped from what is forwarded. Each step either answers the request with
 * a contract error or passes it on; the route lookup is the only
 * asynchronous step, and its state is detached when the request dies.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "auth/cookie.h"
#include "auth/query.h"
#include "auth/warning.h"
#include "common/hashtab.h"
#include "common/netaddr.h"
#include "http/credentials.h"
#include "errors/errors.h"
#include "http/pipeline.h"
#include "http/redirect.h"
#include "metering/metering.h"
#include "upstream/proxy.h"
#include "upstream/request_line.h"
#include "upstream/tcp_tunnel.h"
#include "http/warning_page.h"
#include "routing/host.h"

#define TOKEN_HEADER "x-lizard-access-token"
#define QUERY_PARAM "lizard_token"

/* The preview handler; its per-context state is a pipeline_context_t. */
struct st_gw_pipeline_t {
    h2o_handler_t super;
    gw_pipeline_conf_t conf;
};

/* A (sandbox, lifecycle) whose addr was refused and logged. */
typedef struct st_refused_addr_t {
    gw_hashtab_node_t node;
    char key[]; /* sandbox id, lifecycle, addr (refuse_addr) */
} refused_addr_t;

/* At most this many refused (sandbox, lifecycle) pairs are remembered per
 * context; past it the memo starts again (a line more, never unbounded). */
#define MAX_REFUSED_ADDRS 1024

/* What the preview handler keeps per h2o context. */
typedef struct st_pipeline_context_t {
    gw_pipeline_thread_t thread;  /* from gw_pipeline_attach */
    gw_metrics_worker_t *metrics; /* the counters of the context's worker, found at on_context_init */
    gw_hashtab_t refused_addrs;   /* of refused_addr_t: the upstream_forbidden lines already written */
} pipeline_context_t;

typedef struct st_redirect_handler_t {
    h2o_handler_t super;
    gw_pipeline_conf_t conf;
} redirect_handler_t;

/* State of one preview request while its route is being looked up; lives in
 * req->pool, so its dispose runs whenever the request goes away (including an
 * HTTP/2 reset while the lookup is pending). */
typedef struct st_pending_t {
    h2o_req_t *req;
    const gw_pipeline_conf_t *conf;
    gw_pipeline_thread_t *thread;
    gw_metrics_worker_t *metrics;
    pipeline_context_t *pc;
    gw_host_t host;
    gw_route_lookup_t *lookup;
    h2o_iovec_t path;             /* request target to forward: lizard_token removed */
    h2o_iovec_t query_token;      /* first lizard_token value, decoded */
    size_t query_token_count;     /* 0: no lizard_token parameter */
    h2o_iovec_t cookie;           /* the gateway's cookie, {NULL, 0} if absent */
    gw_warning_cookies_t warning; /* the warning page's consent and nonce cookies, {NULL, 0} if absent */
    gw_wake_waiter_t *waiter;     /* held while the sandbox wakes, or NULL */
    gw_hangup_watch_t hangup;     /* HTTP/1: the client is watched while held */
} pending_t;

static void on_pending_dispose(void *_p)
{
    pending_t *p = _p;

    if (p->lookup != NULL)
        gw_route_lookup_cancel(p->lookup);
    if (p->waiter != NULL) {
        /* an HTTP/2 reset, or the connection closed, while held */
        gw_hangup_unwatch(p->thread->hangup, &p->hangup);
        gw_wake_cancel(p->waiter, 1);
    }
    /* the request's connection is on this worker's loop, as it was when on_req counted it */
    GW_COUNTER_ADD(&p->metrics->in_flight, -1);
}

static void send_error(pending_t *p, gw_error_code_t code, const char *detail)
{
    gw_error_send(p->req, code, p->host.sandbox_id, p->host.port, detail);
}

static void send_error_why(pending_t *p, gw_error_code_t code, gw_error_why_t why)
{
    gw_error_send_why(p->req, code, why, p->host.sandbox_id, p->host.port, NULL);
}

static int is_method(h2o_req_t *req, const char *m, size_t len)
{
    return h2o_memis(req->method.base, req->method.len, m, len);
}

/* A CORS preflight cannot carry the token: it goes to the sandbox without one. */
static int is_cors_preflight(h2o_req_t *req)
{
    return is_method(req, H2O_STRLIT("OPTIONS")) && h2o_find_header_by_str(&req->headers, H2O_STRLIT("origin"), -1) != -1 &&
           h2o_find_header_by_str(&req->headers, H2O_STRLIT("access-control-request-method"), -1) != -1;
}

static gw_cookie_same_site_t same_site(const gw_config_t *conf)
{
    return conf->auth.cookie_same_site;
}

static h2o_iovec_t cookie_name(const gw_config_t *conf)
{
    return h2o_iovec_init(conf->auth.cookie_name, strlen(conf->auth.cookie_name));
}

/* Removes the gateway's credentials from what will be forwarded: the
 * lizard_token parameter (into p->path), the gateway's cookie and the warning
 * page's two cookies (the Cookie header is rebuilt from the app's own cookies,
 * HTTP/2 fields joined). The token header goes with every X-Lizard-* header in
 * the proxy. */
static void strip_credentials(pending_t *p)
{
    h2o_req_t *req = p->req;
    const gw_config_t *conf = p->conf->config;
    h2o_iovec_t *fields, rest;
    size_t num_fields = 0, i, kept;

    p->query_token_count = gw_query_take(&req->pool, req->path, h2o_iovec_init(H2O_STRLIT(QUERY_PARAM)), &p->query_token, &p->path);

    /* Linear in the number of header fields: HPACK makes a repeated "cookie" field cost a byte,
     * so a request can carry hundreds of thousands of them. */
    for (i = 0; i != req->headers.size; ++i)
        if (req->headers.entries[i].name == &H2O_TOKEN_COOKIE->buf)
            ++num_fields;
    if (num_fields == 0)
        return;
    fields = h2o_mem_alloc_pool(&req->pool, sizeof(*fields) * num_fields);
    num_fields = 0;
    for (i = 0, kept = 0; i != req->headers.size; ++i) {
        if (req->headers.entries[i].name == &H2O_TOKEN_COOKIE->buf)
            fields[num_fields++] = req->headers.entries[i].value;
        else
            req->headers.entries[kept++] = req->headers.entries[i];
    }
    req->headers.size = kept;
    gw_cookie_extract(&req->pool, fields, num_fields, cookie_name(conf), &p->cookie, &rest);
    /* whether or not the page is on now: the sandbox never learns a nonce (with it, its server could fetch a token
     * for this very browser) nor a consent */
    h2o_iovec_t others = rest;
    if (others.len != 0)
        gw_cookie_extract(&req->pool, &others, 1, h2o_iovec_init(H2O_STRLIT(GW_WARNING_CONSENT_COOKIE)), &p->warning.consent,
                          &rest);
    if ((others = rest).len != 0)
        gw_cookie_extract(&req->pool, &others, 1, h2o_iovec_init(H2O_STRLIT(GW_WARNING_NONCE_COOKIE)), &p->warning.nonce, &rest);
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
    o = out = h2o_mem_alloc_pool(pool, path.len + extra + 1);
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
static void redirect_with_cookie(pending_t *p, const gw_sandbox_t *sbx)
{
    h2o_req_t *req = p->req;
    const gw_config_t *conf = p->conf->config;
    uint64_t expires = (uint64_t)time(NULL) + conf->auth.cookie_ttl_s;
    h2o_iovec_t value;

    /* the set was not empty when the caller checked; a reload never empties it */
    if (gw_cookie_keys_sign(p->conf->cookie_keys, &req->pool, sbx->id, p->host.port, expires, sbx->token_sha256, &value) != 0) {
        send_error(p, GW_ERR_INVALID_TOKEN, NULL);
        return;
    }
    h2o_iovec_t set = gw_cookie_set_header(&req->pool, cookie_name(conf), value, conf->auth.cookie_ttl_s, same_site(conf));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, set.base, set.len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("referrer-policy"), 0, NULL, H2O_STRLIT("no-referrer"));
    gw_redirect_send(req, 302, "Found", gw_redirect_location(&req->pool, req->authority, p->path));
}

static int header_is(h2o_req_t *req, const char *name, size_t name_len, const char *value, size_t value_len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, name_len, -1);
    return i != -1 && h2o_lcstris(req->headers.entries[i].value.base, req->headers.entries[i].value.len, value, value_len);
}

/* A frame in a page of another site, as Fetch Metadata says: there a
 * SameSite=Lax or Strict cookie is neither stored nor sent. */
static int is_cross_site_frame(h2o_req_t *req)
{
    return (header_is(req, H2O_STRLIT("sec-fetch-dest"), H2O_STRLIT("iframe")) ||
            header_is(req, H2O_STRLIT("sec-fetch-dest"), H2O_STRLIT("frame"))) &&
           header_is(req, H2O_STRLIT("sec-fetch-site"), H2O_STRLIT("cross-site"));
}

/* A share link in the query of a navigation becomes the gateway's own
 * cookie (CONTRACT.md: the cookie is not the token), signed with the cookie
 * secrets and binding sandbox, port, an expiry no later than the link's
 * (nor than auth.cookie_ttl_s) and the link's epoch: a new link_epoch ends
 * it, as it ends the link. */
static void redirect_with_link_cookie(pending_t *p, const gw_grant_t *grant)
{
    h2o_req_t *req = p->req;
    const gw_config_t *conf = p->conf->config;
    uint64_t now = (uint64_t)time(NULL), max_age = grant->expires_at > now ? grant->expires_at - now : 0;
    h2o_iovec_t value;

    if (max_age > conf->auth.cookie_ttl_s)
        max_age = conf->auth.cookie_ttl_s;
    /* the set was not empty when the caller checked; a reload never empties it */
    if (gw_cookie_keys_sign_link(p->conf->cookie_keys, &req->pool, p->host.sandbox_id, p->host.port, now + max_age,
                                 grant->link_epoch, &value) != 0) {
        send_error(p, GW_ERR_INVALID_TOKEN, NULL);
        return;
    }
    h2o_iovec_t set = gw_cookie_set_header(&req->pool, cookie_name(conf), value, max_age, same_site(conf));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, set.base, set.len);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("referrer-policy"), 0, NULL, H2O_STRLIT("no-referrer"));
    gw_redirect_send(req, 302, "Found", gw_redirect_location(&req->pool, req->authority, p->path));
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
static credential_t check_credential(pending_t *p, const gw_sandbox_t *sbx, gw_grant_t *grant, gw_error_why_t *why, int *clear)
{
    h2o_req_t *req = p->req;
    ssize_t i = h2o_find_header_by_str(&req->headers, H2O_STRLIT(TOKEN_HEADER), -1);
    gw_credentials_t c = {.header = i != -1 ? req->headers.entries[i].value : h2o_iovec_init(NULL, 0),
                          .query = p->query_token,
                          .has_query = p->query_token_count != 0,
                          .cookie = p->cookie};
    gw_credential_keys_t keys = {p->conf->cookie_keys, p->conf->link_keys, p->conf->config->auth.link_max_ttl_s};
    int from = GW_CREDENTIAL_FROM_HEADER;

    *clear = 0;
    switch (gw_credentials_check(&c, &keys, sbx, p->host.port, (uint64_t)time(NULL), grant, why, &from)) {
    case GW_CREDENTIAL_OK:
        break;
    case GW_CREDENTIAL_REFUSED:
        *clear = from == GW_CREDENTIAL_FROM_COOKIE;
        return CREDENTIAL_REFUSED;
    default:
        return CREDENTIAL_NONE;
    }
    if (from == GW_CREDENTIAL_FROM_QUERY && (is_method(req, H2O_STRLIT("GET")) || is_method(req, H2O_STRLIT("HEAD"))) &&
        req->upgrade.base == NULL && gw_error_is_navigation(req)) {
        /* without cookie secrets there is no cookie to give: the query is accepted in place */
        if (gw_cookie_keys_count(p->conf->cookie_keys) != 0) {
            if (grant->kind == GW_GRANT_LINK)
                redirect_with_link_cookie(p, grant);
            else
                redirect_with_cookie(p, sbx);
            return CREDENTIAL_ANSWERED;
        }
    }
    return CREDENTIAL_OK; /* a query credential is accepted in place, removed before forwarding */
}

/* 1 when the request may go on to a private port, with the grant filled;
 * otherwise answers it. */
static int authenticate(pending_t *p, const gw_sandbox_t *sbx, gw_grant_t *grant)
{
    h2o_req_t *req = p->req;
    const gw_config_t *conf = p->conf->config;
    gw_error_why_t why = GW_WHY_DEFAULT;
    int clear;

    switch (check_credential(p, sbx, grant, &why, &clear)) {
    case CREDENTIAL_OK:
        return 1;
    case CREDENTIAL_ANSWERED:
        return 0;
    case CREDENTIAL_REFUSED:
        if (clear) {
            h2o_iovec_t c = gw_cookie_clear_header(&req->pool, cookie_name(conf), same_site(conf));
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_SET_COOKIE, NULL, c.base, c.len);
        }
        send_error_why(p, GW_ERR_INVALID_TOKEN, why);
        return 0;
    default:
        break;
    }
    send_error_why(p, GW_ERR_MISSING_TOKEN,
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
static int public_warning(pending_t *p, const gw_sandbox_t *sbx)
{
    h2o_req_t *req = p->req;
    const gw_config_t *conf = p->conf->config;
    gw_grant_t ignored = {.kind = GW_GRANT_PUBLIC};
    gw_error_why_t why;
    int clear;

    if (!conf->auth.public_warning)
        return 1;
    /* the Continue button's form: only for a host whose port is public (and exposed: the caller knows) */
    if (gw_warning_page_is_consent(p->path)) {
        gw_warning_page_consent(req, conf, p->conf->cookie_keys, &p->host, &p->warning);
        return 0;
    }
    if (!gw_warning_page_applies(req))
        return 1;
    switch (check_credential(p, sbx, &ignored, &why, &clear)) {
    case CREDENTIAL_OK:
        return 1;
    case CREDENTIAL_ANSWERED:
        return 0;
    default:
        break;
    }
    if (gw_warning_page_consented(req, p->conf->cookie_keys, &p->host, &p->warning))
        return 1;
    gw_warning_page_send(req, conf, p->conf->cookie_keys, &p->host, p->path, &p->warning);
    return 0;
}

/* The listener (config->listen[i]) that accepted `conn`, told by the `hosts`
 * its accept context gave it; -1 when unknown. */
static ssize_t listener_of(const gw_pipeline_conf_t *conf, const h2o_conn_t *conn)
{
    size_t i;

    for (i = 0; i != conf->config->num_listen; ++i)
        if (conn->hosts == conf->listener_hosts[i])
            return (ssize_t)i;
    return -1;
}

/* The port of the listener that accepted `conn` (X-Forwarded-Port), without a system call; 0 if unknown. */
static uint16_t listener_port(const gw_pipeline_conf_t *conf, const h2o_conn_t *conn)
{
    ssize_t i = listener_of(conf, conn);
    return i != -1 ? gw_netaddr_port(&conf->config->listen[i].addr) : 0;
}

/* 1 when `conn` came through a trusted plain listener (a load balancer: X-Forwarded-For names the client). */
static int listener_trusted(const gw_pipeline_conf_t *conf, const h2o_conn_t *conn)
{
    ssize_t i = listener_of(conf, conn);
    return i != -1 && conf->config->listen[i].trusted;
}

/* The client's address as text, for limits.max_connections_per_client:
 * behind a trusted listener (a load balancer) the last X-Forwarded-For
 * entry, the one the balancer appended, when it is an IP address; else the
 * socket's peer. Returns 0, or -1 when unknown (then not limited). */
static int client_address(pending_t *p, char *buf, size_t bufsize)
{
    h2o_req_t *req = p->req;
    struct sockaddr_storage ss;
    socklen_t len;
    ssize_t i = -1, last = -1;

    if (listener_trusted(p->conf, req->conn)) {
        while ((i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-forwarded-for"), i)) != -1)
            last = i;
        if (last != -1) {
            h2o_iovec_t v = req->headers.entries[last].value;
            const char *end = v.base + v.len, *start;
            unsigned char bin[sizeof(struct in6_addr)];
            while (end != v.base && (end[-1] == ' ' || end[-1] == '\t'))
                --end;
            for (start = end; start != v.base && start[-1] != ',' && start[-1] != ' ' && start[-1] != '\t'; --start)
                ;
            if ((size_t)(end - start) < bufsize && end != start) {
                memcpy(buf, start, end - start);
                buf[end - start] = '\0';
                if (inet_pton(AF_INET, buf, bin) == 1 || inet_pton(AF_INET6, buf, bin) == 1)
                    return 0;
            }
        }
    }
    if (req->conn->callbacks->get_peername == NULL || (len = req->conn->callbacks->get_peername(req->conn, (void *)&ss)) == 0)
        return -1;
    return gw_netaddr_peer_text((void *)&ss, len, buf, bufsize) < 0 ? -1 : 0;
}

static void hold(pending_t *p, gw_sandbox_t *sbx);
static void forget_refused_addrs(gw_hashtab_t *t);

/* upstream_forbidden, saying which: no addr, not an IP literal, or outside
 * upstream.allowed_networks; the operator reads the record's addr and why in
 * the log, once per (sandbox, lifecycle, addr) in each worker. */
static void refuse_addr(pending_t *p, const gw_sandbox_t *sbx)
{
    gw_error_why_t why = !sbx->has_addr_field ? GW_WHY_ADDR_MISSING : !sbx->has_addr ? GW_WHY_ADDR_NOT_IP : GW_WHY_DEFAULT;
    gw_hashtab_t *memo = &p->pc->refused_addrs;
    size_t id_len = strlen(sbx->id), addr_len = sbx->has_addr_field ? strlen(sbx->addr_text) : 0;
    size_t key_len = id_len + 1 + sbx->lifecycle.len + 1 + addr_len + 1;
    refused_addr_t *r = malloc(sizeof(*r) + key_len);

    if (r == NULL)
        h2o_fatal("no memory");
    /* "<id>\n<lifecycle>\n<addr><1 when the field is there>": a new addr in the same lifecycle is said too */
    memcpy(r->key, sbx->id, id_len);
    r->key[id_len] = '\n';
    memcpy(r->key + id_len + 1, sbx->lifecycle.base, sbx->lifecycle.len);
    r->key[id_len + 1 + sbx->lifecycle.len] = '\n';
    memcpy(r->key + id_len + 2 + sbx->lifecycle.len, sbx->addr_text, addr_len);
    r->key[key_len - 1] = sbx->has_addr_field ? '1' : '0';
    if (gw_hashtab_find(memo, r->key, key_len) != NULL) {
        free(r);
    } else {
        if (gw_hashtab_size(memo) >= MAX_REFUSED_ADDRS)
            forget_refused_addrs(memo);
        gw_hashtab_insert(memo, &r->node, r->key, key_len);
        fprintf(stderr, "pipeline: sandbox %s: addr %s%s%s refused: %s\n", sbx->id, sbx->has_addr_field ? "\"" : "",
                sbx->has_addr_field ? sbx->addr_text : "(absent)", sbx->has_addr_field ? "\"" : "",
                why == GW_WHY_ADDR_MISSING  ? "the record has no addr field"
                : why == GW_WHY_ADDR_NOT_IP ? "not an IP literal (host names are never resolved)"
                                            : "outside upstream.allowed_networks");
    }
    send_error_why(p, GW_ERR_UPSTREAM_FORBIDDEN, why);
}

/* The port's host mode: host:<n>, else upstream.host_header. */
static int uses_localhost(const gw_config_t *conf, const gw_sandbox_t *sbx, uint16_t port)
{
    switch (gw_sandbox_port_host(sbx, port)) {
    case GW_PORT_HOST_PRESERVE:
        return 0;
    case GW_PORT_HOST_LOCALHOST:
        return 1;
    default:
        return conf->upstream.host_header == GW_HOST_HEADER_LOCALHOST;
    }
}

/* A raw TCP port (proto tcp) takes only its tunnel's handshake, checked
 * after the credential as any request: else 400 not_http_port (answered). */
static int tcp_port_allows(pending_t *p, const gw_sandbox_t *sbx)
{
    if (!gw_sandbox_port_is_tcp(sbx, p->host.port) || gw_tcp_tunnel_is_handshake(p->req, p->path))
        return 1;
    send_error(p, GW_ERR_NOT_HTTP_PORT, NULL);
    return 0;
}

/* What the route says about the request: answered, held, or proxied. Runs
 * again with the fresh record when a held request's sandbox has woken. */
static void decide(pending_t *p, gw_route_status_t status, gw_sandbox_t *sbx)
{
    const gw_config_t *conf = p->conf->config;
    char detail[128];

    switch (status) {
    case GW_ROUTE_FOUND:
        break;
    case GW_ROUTE_NOT_FOUND:
        send_error(p, GW_ERR_SANDBOX_NOT_FOUND, NULL);
        return;
    default:
        send_error(p, GW_ERR_ROUTING_UNAVAILABLE, NULL);
        return;
    }

    /* status == GW_ROUTE_FOUND, sbx != NULL */
    gw_grant_t grant = {.record = sbx, .port = p->host.port, .kind = GW_GRANT_PUBLIC};
    switch (gw_sandbox_port_access(sbx, p->host.port)) {
    case GW_PORT_PUBLIC:
        if (!public_warning(p, sbx))
            return;
        break;
    case GW_PORT_PRIVATE:
        if (is_cors_preflight(p->req)) {
            grant.kind = GW_GRANT_PREFLIGHT;
        } else if (!authenticate(p, sbx, &grant)) {
            return;
        }
        break;
    default:
        send_error(p, GW_ERR_PORT_NOT_EXPOSED, NULL);
        return;
    }

    if (!tcp_port_allows(p, sbx))
        return;
    if (sbx->state != GW_SANDBOX_RUNNING) {
        /* after the credential: scanners never wake sandboxes */
        if (gw_wake_applies(sbx)) {
            hold(p, sbx);
            return;
        }
        snprintf(detail, sizeof(detail), "The sandbox is %s.", gw_sandbox_state_name(sbx->state));
        send_error(p, GW_ERR_SANDBOX_NOT_RUNNING, detail);
        return;
    }

    /* A wrong or poisoned addr must never reach the gateway host's own services. */
    if (!sbx->has_addr ||
        !gw_cidr_list_contains(conf->upstream.allowed_networks, conf->upstream.num_allowed_networks, (void *)&sbx->addr.ss)) {
        refuse_addr(p, sbx);
        return;
    }

    gw_proxy_target_t target = {.addr = sbx->addr,
                                .lifecycle = sbx->lifecycle,
                                .sandbox_id = sbx->id,
                                .port = p->host.port,
                                .path = p->path,
                                .cors_preflight = is_cors_preflight(p->req),
                                .localhost = uses_localhost(conf, sbx, p->host.port),
                                .no_activity = header_is(p->req, H2O_STRLIT("x-lizard-no-activity"), H2O_STRLIT("1")),
                                .grant = grant,
                                .tcp = gw_sandbox_port_is_tcp(sbx, p->host.port)};
    if (target.addr.ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&target.addr.ss)->sin_port = htons(p->host.port);
    else
        ((struct sockaddr_in6 *)&target.addr.ss)->sin6_port = htons(p->host.port);
    /* one client address cannot take every slot of a sandbox, nor one
     * sandbox every socket of the gateway */
    char client[INET6_ADDRSTRLEN];
    if (client_address(p, client, sizeof(client)) == 0) {
        if (!gw_conn_limit_acquire(p->conf->client_reqs, p->thread->worker, client)) {
            send_error(p, GW_ERR_TOO_MANY_CONNECTIONS, NULL);
            return;
        }
        target.client_limit = p->conf->client_reqs;
        target.client_addr = client;
    }
    if (!gw_conn_limit_acquire(p->conf->conn_limit, p->thread->worker, sbx->id)) {
        if (target.client_limit != NULL)
            gw_conn_limit_release(target.client_limit, p->thread->worker, client);
        send_error(p, GW_ERR_TOO_MANY_CONNECTIONS, NULL);
        return;
    }
    target.conn_limit = p->conf->conn_limit;
    target.limit_worker = p->thread->worker;
    target.client_port = listener_port(p->conf, p->req->conn);

    /* the proxy's byte counts carry only the sandbox id: the meter keeps its project */
    gw_meter_set_project(p->thread->meter, sbx->id, sbx->project, h2o_now(p->req->conn->ctx->loop));
    gw_proxy_forward(p->thread->proxy, p->req, &target);
}

static void on_route(void *data, gw_route_status_t status, gw_sandbox_t *sbx)
{
    pending_t *p = data;

    p->lookup = NULL;
    strip_credentials(p);
    p->path = safe_target(&p->req->pool, p->path);
    decide(p, status, sbx);
}

/* The sandbox woke (or will not, or took too long). */
static void on_woken(void *data, gw_wake_result_t result, gw_sandbox_t *sbx)
{
    pending_t *p = data;
    char detail[128];

    p->waiter = NULL;
    gw_hangup_unwatch(p->thread->hangup, &p->hangup);
    switch (result) {
    case GW_WAKE_SETTLED:
        /* the fresh record decides everything again: the credential, the port, the state */
        decide(p, GW_ROUTE_FOUND, sbx);
        break;
    case GW_WAKE_NOT_FOUND:
        decide(p, GW_ROUTE_NOT_FOUND, NULL);
        break;
    default:
        snprintf(detail, sizeof(detail), "It did not wake within %llu ms.",
                 (unsigned long long)p->conf->config->routing.resume_timeout_ms);
        send_error(p, GW_ERR_SANDBOX_NOT_RUNNING, detail);
        break;
    }
}

/* The HTTP/1 client closed while its request was held: the hold goes now,
 * and the answer (which nobody reads) lets h2o close the connection. */
static void on_hangup(gw_hangup_watch_t *watch)
{
    pending_t *p = H2O_STRUCT_FROM_MEMBER(pending_t, hangup, watch);

    gw_wake_cancel(p->waiter, 1);
    p->waiter = NULL;
    send_error(p, GW_ERR_SANDBOX_NOT_RUNNING, "The client went away while the sandbox was waking.");
}

/* Holds the request until its sandbox wakes (CONTRACT.md, "Waking a paused
 * sandbox"); no connection slot and no upstream connection meanwhile. Its
 * body (read whole by h2o before the handler ran) counts against
 * limits.max_held_request_bytes: past it the request is refused at once,
 * 503 with Retry-After (the sandbox is asked to wake all the same, so the
 * retry finds it running), rather than held with more memory. */
static void hold(pending_t *p, gw_sandbox_t *sbx)
{
    gw_wake_hold_result_t refused;

    if ((p->waiter = gw_wake_hold(p->thread->wake, sbx, p->req->entity.len, on_woken, p, &refused)) == NULL) {
        if (refused == GW_WAKE_OVER_BYTES)
            send_error(p, GW_ERR_SANDBOX_NOT_RUNNING,
                       "It is waking up; the gateway holds no more request bodies meanwhile. Retry shortly.");
        else
            send_error(p, GW_ERR_TOO_MANY_CONNECTIONS, "Too many requests are waiting for this sandbox to wake.");
        return;
    }
    p->hangup.cb = on_hangup;
    gw_hangup_watch(p->thread->hangup, &p->hangup, p->req);
}

/* 1 when the request came without a Host/:authority (h2o then substitutes the
 * hostconf's own name). */
static int lacks_authority(h2o_req_t *req)
{
    return req->authority.base == req->hostconf->authority.hostport.base;
}

/* The gateway is not a forward proxy: CONNECT is refused before anything
 * else, and a method that is not a token never goes further (an HTTP/2
 * :method can hold spaces). 1 when the request may go on, 0 when answered. */
static int allowed_method(h2o_req_t *req)
{
    if (is_method(req, H2O_STRLIT("CONNECT"))) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, H2O_STRLIT(GW_REQUEST_ALLOWED_METHODS));
        gw_request_line_refuse(req, 405, "Method Not Allowed", "CONNECT is not forwarded: this is a web server, not a proxy");
        return 0;
    }
    if (!gw_request_method_is_token(req->method)) {
        gw_request_line_refuse(req, 400, "Bad Request", "The method is not a token");
        return 0;
    }
    return 1;
}

/* The request-target: origin-form, "*" for OPTIONS, or (HTTP/1.x only)
 * absolute-form naming the Host header's own host, which becomes the
 * origin-form in req->path so that everything after (credentials, the
 * redirect, the upstream request line) sees only that. 1 when the request may
 * go on, 0 when answered. */
static int origin_form_target(h2o_req_t *req)
{
    h2o_iovec_t authority, origin;

    switch (gw_request_target_parse(&req->pool, req->method, req->path, &authority, &origin)) {
    case GW_TARGET_ORIGIN:
    case GW_TARGET_ASTERISK:
        return 1;
    case GW_TARGET_ABSOLUTE:
        if (req->version >= 0x200)
            break; /* an HTTP/2 :path is never absolute (RFC 9113 8.3.1) */
        /* RFC 9112 3.2.2 makes the target's host win over Host; a hop in
         * front that routed or authorized by Host would disagree: refuse */
        authority = gw_host_strip_port(authority);
        h2o_iovec_t host = gw_host_strip_port(req->authority);
        if (!h2o_lcstris(authority.base, authority.len, host.base, host.len)) {
            gw_error_send(req, GW_ERR_BAD_HOST, NULL, 0, "The request target names another host than the Host header.");
            return 0;
        }
        req->path = origin;
        return 1;
    default:
        break;
    }
    gw_request_line_refuse(req, 400, "Bad Request", "The request target is not a path");
    return 0;
}

/* Counts the request, checks its request line and parses its host: 1 with
 * *host filled, or 0 when the request has been answered (a refused request
 * line, bad_host, unknown_host). */
static int preview_host(h2o_req_t *req, const gw_pipeline_conf_t *pconf, gw_metrics_worker_t *metrics, gw_host_t *host)
{
    const gw_config_t *conf = pconf->config;

    GW_COUNTER_ADD(&metrics->requests, 1);
    if (!allowed_method(req))
        return 0;
    if (lacks_authority(req)) {
        gw_error_send(req, GW_ERR_BAD_HOST, NULL, 0, "The request has no Host header.");
        return 0;
    }
    if (!origin_form_target(req))
        return 0;
    switch (gw_host_parse(req->authority, conf->domains, conf->num_domains, host)) {
    case GW_HOST_OK:
        return 1;
    case GW_HOST_UNKNOWN:
        gw_error_send(req, GW_ERR_UNKNOWN_HOST, NULL, 0, NULL);
        return 0;
    default:
        gw_error_send(req, GW_ERR_BAD_HOST, NULL, 0, NULL);
        return 0;
    }
}

static int on_req(h2o_handler_t *_self, h2o_req_t *req)
{
    gw_pipeline_t *self = (void *)_self;
    pipeline_context_t *pc = h2o_context_get_handler_context(req->conn->ctx, _self);
    gw_host_t host;

    if (!preview_host(req, &self->conf, pc->metrics, &host))
        return 0;

    pending_t *p = h2o_mem_alloc_shared(&req->pool, sizeof(*p), on_pending_dispose);
    *p = (pending_t){.req = req, .conf = &self->conf, .thread = &pc->thread, .metrics = pc->metrics, .pc = pc, .host = host};
    GW_COUNTER_ADD(&pc->metrics->in_flight, 1);
    GW_COUNTER_ADD(&pc->metrics->route_lookups, 1);
    if ((p->lookup = gw_route_store_lookup(pc->thread.routes, host.sandbox_id, on_route, p)) == NULL) {
        /* the lookup did not start, so on_route will never run: answered here */
        send_error(p, GW_ERR_ROUTING_UNAVAILABLE, NULL);
    }
    return 0;
}

/* Plain listener: preview requests go to https on the same host and path. */
static int on_req_redirect(h2o_handler_t *_self, h2o_req_t *req)
{
    redirect_handler_t *self = (void *)_self;
    gw_host_t host;

    if (!preview_host(req, &self->conf, h2o_context_get_handler_context(req->conn->ctx, _self), &host))
        return 0;

    /* The host is a valid preview name (so it is safe to reflect): the same
     * host, lowercased, with the https port ("OPTIONS *" goes to the root). */
    h2o_iovec_t url = gw_redirect_url(&req->pool, gw_host_strip_port(req->authority), self->conf.https_port, req->path);
    gw_redirect_send(req, 308, "Permanent Redirect", url);
    return 0;
}

static void on_context_init(h2o_handler_t *_self, h2o_context_t *ctx)
{
    gw_pipeline_t *self = (void *)_self;
    pipeline_context_t *pc = h2o_mem_alloc(sizeof(*pc));

    *pc = (pipeline_context_t){.metrics = gw_metrics_worker_of(self->conf.metrics, ctx)};
    gw_hashtab_init(&pc->refused_addrs);
    h2o_context_set_handler_context(ctx, _self, pc);
}

static void forget_refused_addrs(gw_hashtab_t *t)
{
    gw_hashtab_node_t *n, *next;

    for (n = gw_hashtab_first(t); n != NULL; n = next) {
        next = gw_hashtab_next(t, n);
        gw_hashtab_remove(t, n);
        free(H2O_STRUCT_FROM_MEMBER(refused_addr_t, node, n));
    }
}

static void on_context_dispose(h2o_handler_t *self, h2o_context_t *ctx)
{
    pipeline_context_t *pc = h2o_context_get_handler_context(ctx, self);

    forget_refused_addrs(&pc->refused_addrs);
    gw_hashtab_dispose(&pc->refused_addrs);
    free(pc);
}

gw_pipeline_t *gw_pipeline_register(h2o_pathconf_t *pathconf, const gw_pipeline_conf_t *conf)
{
    gw_pipeline_t *self = (void *)h2o_create_handler(pathconf, sizeof(*self));

    self->super.on_context_init = on_context_init;
    self->super.on_context_dispose = on_context_dispose;
    self->super.on_req = on_req;
    self->conf = *conf;
    return self;
}

void gw_pipeline_attach(gw_pipeline_t *p, h2o_context_t *ctx, const gw_pipeline_thread_t *thread)
{
    pipeline_context_t *pc = h2o_context_get_handler_context(ctx, &p->super);
    pc->thread = *thread;
}

/* The redirect handler's per-context state is its worker's counters (nothing to free). */
static void on_redirect_context_init(h2o_handler_t *_self, h2o_context_t *ctx)
{
    redirect_handler_t *self = (void *)_self;

    h2o_context_set_handler_context(ctx, _self, gw_metrics_worker_of(self->conf.metrics, ctx));
}

void gw_pipeline_register_redirect(h2o_pathconf_t *pathconf, const gw_pipeline_conf_t *conf)
{
    redirect_handler_t *self = (void *)h2o_create_handler(pathconf, sizeof(*self));

    self->super.on_context_init = on_redirect_context_init;
    self->super.on_req = on_req_redirect;
    self->conf = *conf;
}
