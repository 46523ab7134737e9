/*
 * The rewriting of header values between a browser on the preview origin and
 * an app that believes it is at http://localhost:<n>, and the Set-Cookie
 * rules of every mode. Pure: values in, values out (from a pool only when
 * they change).
 */
#include <string.h>
#include <strings.h>
#include "common/engine.h"
#include "common/numfmt.h"
#include "upstream/address_view.h"

#define LOCALHOST_SCHEME_HOST "http://localhost"

static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static h2o_iovec_t trim(const char *s, const char *end)
{
    while (s != end && is_ws(*s))
        ++s;
    while (end != s && is_ws(end[-1]))
        --end;
    return h2o_iovec_init(s, (size_t)(end - s));
}

/* 1 when s[0..len) equals lc (lowercase) with ASCII case ignored. */
static int ci_eq(const char *s, size_t len, const char *lc, size_t lclen)
{
    return len == lclen && h2o_lcstris(s, len, lc, lclen);
}

static int ci_prefix(const char *s, size_t len, const char *lc, size_t lclen)
{
    return len >= lclen && h2o_lcstris(s, lclen, lc, lclen);
}

/* 1 when a URL may continue after its origin with this byte (or ends). */
static int ends_origin(const char *s, size_t len, size_t at)
{
    return at == len || s[at] == '/' || s[at] == '?' || s[at] == '#';
}

/* --- setting up ----------------------------------------------------------- */

/* Host names, IP literals and a port: nothing that needs escaping in a URL. */
static int authority_chars_ok(h2o_iovec_t a)
{
    size_t i;

    for (i = 0; i != a.len; ++i) {
        char c = a.base[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':' ||
              c == '[' || c == ']'))
            return 0;
    }
    return a.len != 0;
}

void gw_address_view_init(gw_address_view_t *v, h2o_mem_pool_t *pool, h2o_iovec_t authority, uint16_t localhost_port,
                          const gw_cookie_rules_t *cookies)
{
    static const char https[] = "https://";
    char *buf;
    size_t n;

    memset(v, 0, sizeof(*v));
    v->cookies = cookies;
    if ((v->localhost_port = localhost_port) == 0)
        return;

    n = sizeof(LOCALHOST_SCHEME_HOST) - 1;
    buf = gw_pool_alloc(pool, n + 1 + GW_NUMFMT_DEC_SIZE);
    memcpy(buf, LOCALHOST_SCHEME_HOST ":", n + 1);
    v->localhost_origin = h2o_iovec_init(buf, n + 1 + gw_numfmt_dec(buf + n + 1, localhost_port));

    /* the origin a browser puts in Origin: the Host it sent, whose port it
     * leaves out when it is https's own */
    if (authority.len > 4 && memcmp(authority.base + authority.len - 4, ":443", 4) == 0)
        authority.len -= 4;
    if (!authority_chars_ok(authority))
        return;
    n = sizeof(https) - 1;
    buf = gw_pool_alloc(pool, n + authority.len);
    memcpy(buf, https, n);
    memcpy(buf + n, authority.base, authority.len);
    h2o_strtolower(buf + n, authority.len);
    v->preview_origin = h2o_iovec_init(buf, n + authority.len);
}

/* --- the request -------------------------------------------------------------- */

size_t gw_address_view_request_origin(const gw_address_view_t *v, h2o_iovec_t value, int whole)
{
    size_t n = v->preview_origin.len;

    if (v->localhost_port == 0 || n == 0 || value.len < n || !h2o_lcstris(value.base, n, v->preview_origin.base, n))
        return 0;
    if (whole ? value.len != n : !ends_origin(value.base, value.len, n))
        return 0;
    return n;
}

/* The bytes of an Origin or Referer header to replace by localhost_origin. */
static size_t request_cut(const gw_address_view_t *v, const h2o_header_t *h)
{
    if (h->name == &H2O_TOKEN_REFERER->buf)
        return gw_address_view_request_origin(v, h->value, 0);
    /* by name (libh2o 2.2.5 had no token for Origin); h2o's parsers lowercase names */
    if (h2o_memis(h->name->base, h->name->len, H2O_STRLIT("origin")))
        return gw_address_view_request_origin(v, h->value, 1);
    return 0;
}

const h2o_headers_t *gw_address_view_request_headers(const gw_address_view_t *v, h2o_mem_pool_t *pool, const h2o_headers_t *headers)
{
    h2o_headers_t *copy = NULL;
    size_t i, cut;

    for (i = 0; i != headers->size; ++i) {
        if ((cut = request_cut(v, headers->entries + i)) == 0)
            continue;
        if (copy == NULL) {
            copy = gw_pool_alloc(pool, sizeof(*copy));
            copy->entries = gw_pool_alloc(pool, sizeof(copy->entries[0]) * headers->size);
            memcpy(copy->entries, headers->entries, sizeof(copy->entries[0]) * headers->size);
            copy->size = copy->capacity = headers->size;
        }
        h2o_iovec_t old = headers->entries[i].value;
        copy->entries[i].value = h2o_concat(pool, v->localhost_origin, h2o_iovec_init(old.base + cut, old.len - cut));
    }
    return copy != NULL ? copy : headers;
}

/* --- the response ------------------------------------------------------------- */

/* The length of the app's own origin (http://localhost:<n>, http://127.0.0.1:<n>
 * or http://[::1]:<n>; without ":<n>" too when n is 80) at the start of a URL,
 * followed by the end, '/', '?' or '#'; 0: another URL. */
static size_t loopback_origin(const gw_address_view_t *v, const char *s, size_t len)
{
    static const h2o_iovec_t hosts[] = {
        {H2O_STRLIT("http://localhost")}, {H2O_STRLIT("http://127.0.0.1")}, {H2O_STRLIT("http://[::1]")}};
    char port[GW_NUMFMT_DEC_SIZE];
    size_t port_len = gw_numfmt_dec(port, v->localhost_port), i, n;

    for (i = 0; i != sizeof(hosts) / sizeof(hosts[0]); ++i) {
        if (!ci_prefix(s, len, hosts[i].base, hosts[i].len))
            continue;
        n = hosts[i].len;
        if (n + 1 + port_len <= len && s[n] == ':' && memcmp(s + n + 1, port, port_len) == 0 &&
            ends_origin(s, len, n + 1 + port_len))
            return n + 1 + port_len;
        if (v->localhost_port == 80 && ends_origin(s, len, n))
            return n;
        return 0;
    }
    return 0;
}

/* value with its bytes [at, at + cut) replaced by the preview origin. */
static h2o_iovec_t splice_origin(const gw_address_view_t *v, h2o_mem_pool_t *pool, h2o_iovec_t value, size_t at, size_t cut)
{
    size_t len = value.len - cut + v->preview_origin.len;
    char *buf = gw_pool_alloc(pool, len);

    memcpy(buf, value.base, at);
    memcpy(buf + at, v->preview_origin.base, v->preview_origin.len);
    memcpy(buf + at + v->preview_origin.len, value.base + at + cut, value.len - at - cut);
    return h2o_iovec_init(buf, len);
}

/* Location, Content-Location: an absolute URL on the app's own origin. */
static void rewrite_url(const gw_address_view_t *v, h2o_mem_pool_t *pool, h2o_iovec_t *value)
{
    size_t n = loopback_origin(v, value->base, value->len);
    if (n != 0)
        *value = splice_origin(v, pool, *value, 0, n);
}

/* Refresh: "<time>[; url=<URL>]" (HTML's shared declarative refresh steps:
 * the separator may be ',' too, "url=" may be missing, the URL may be quoted). */
static void rewrite_refresh(const gw_address_view_t *v, h2o_mem_pool_t *pool, h2o_iovec_t *value)
{
    const char *s = value->base;
    size_t len = value->len, i = 0, n;

    while (i != len && is_ws(s[i]))
        ++i;
    while (i != len && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.'))
        ++i;
    while (i != len && is_ws(s[i]))
        ++i;
    if (i == len || (s[i] != ';' && s[i] != ','))
        return;
    ++i;
    while (i != len && is_ws(s[i]))
        ++i;
    if (ci_prefix(s + i, len - i, H2O_STRLIT("url"))) {
        size_t j = i + 3;
        while (j != len && is_ws(s[j]))
            ++j;
        if (j != len && s[j] == '=') {
            i = j + 1;
            while (i != len && is_ws(s[i]))
                ++i;
        }
    }
    if (i != len && (s[i] == '\'' || s[i] == '"'))
        ++i;
    if ((n = loopback_origin(v, s + i, len - i)) != 0)
        *value = splice_origin(v, pool, *value, i, n);
}

static void rewrite_allow_origin(const gw_address_view_t *v, h2o_iovec_t *value)
{
    size_t n = loopback_origin(v, value->base, value->len);
    if (n != 0 && n == value->len)
        *value = v->preview_origin;
}

/* 1 when `name` (a cookie's name) is one of the gateway's. */
static int reserved_cookie(const gw_cookie_rules_t *rules, h2o_iovec_t name)
{
    static const char *const prefixes[] = GW_ADDRESS_VIEW_RESERVED_COOKIE_PREFIXES;
    size_t i;

    if (name.len == 0)
        return 0;
    if (rules->access_cookie != NULL && name.len == strlen(rules->access_cookie) &&
        strncasecmp(name.base, rules->access_cookie, name.len) == 0)
        return 1;
    for (i = 0; i != sizeof(prefixes) / sizeof(prefixes[0]); ++i)
        if (name.len >= strlen(prefixes[i]) && strncasecmp(name.base, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* 1 when d ends with "." + lc (lc lowercase), case ignored. */
static int ci_label_suffix(const char *d, size_t dlen, const char *lc, size_t lclen)
{
    return dlen > lclen && d[dlen - lclen - 1] == '.' && h2o_lcstris(d + dlen - lclen, lclen, lc, lclen);
}

/* 1 when a Domain attribute's value must go: it covers a preview domain (is
 * one, a parent of one, or a name under one), or, in localhost mode, it is
 * the app's loopback name. */
static int domain_removed(const gw_address_view_t *v, h2o_iovec_t d)
{
    size_t i;

    if (d.len >= 2 && (d.base[0] == '"' || d.base[0] == '\'') && d.base[d.len - 1] == d.base[0]) {
        ++d.base;
        d.len -= 2;
    }
    if (d.len != 0 && d.base[0] == '.') {
        ++d.base;
        --d.len;
    }
    if (d.len != 0 && d.base[d.len - 1] == '.')
        --d.len;
    if (d.len == 0)
        return 0; /* ignored by browsers (RFC 6265 5.2.3): host-only already */
    if (v->localhost_port != 0 && (ci_eq(d.base, d.len, H2O_STRLIT("localhost")) || ci_eq(d.base, d.len, H2O_STRLIT("127.0.0.1")) ||
                                   ci_eq(d.base, d.len, H2O_STRLIT("[::1]")) || ci_eq(d.base, d.len, H2O_STRLIT("::1"))))
        return 1;
    for (i = 0; i != v->cookies->num_domains; ++i) {
        const char *pd = v->cookies->domains[i];
        size_t pdlen = strlen(pd);
        if (ci_eq(d.base, d.len, pd, pdlen) || ci_label_suffix(d.base, d.len, pd, pdlen))
            return 1;
        /* a parent of the preview domain: pd ends with "." + d */
        if (pdlen > d.len && pd[pdlen - d.len - 1] == '.' && h2o_lcstris(d.base, d.len, pd + pdlen - d.len, d.len))
            return 1;
    }
    return 0;
}

/* Set-Cookie (RFC 6265 5.2): 0 when it sets a gateway cookie; else the
 * Domain attributes that must go are cut out, the rest kept byte for byte. */
static int rewrite_set_cookie(const gw_address_view_t *v, h2o_mem_pool_t *pool, h2o_iovec_t *value)
{
    const char *s = value->base, *end = s + value->len, *semi, *eq, *p;
    char *out = NULL;
    size_t out_len = 0;
    h2o_iovec_t name;

    /* the name-value pair; without '=' browsers take it all as the value of
     * a nameless cookie, which they send as that text alone */
    if ((semi = memchr(s, ';', value->len)) == NULL)
        semi = end;
    if ((eq = memchr(s, '=', (size_t)(semi - s))) != NULL) {
        name = trim(s, eq);
        if (name.len == 0)
            name = trim(eq + 1, semi);
    } else {
        name = trim(s, semi);
    }
    if (reserved_cookie(v->cookies, name))
        return 0;

    /* the attributes: each segment runs from its ';' to the next one */
    for (p = semi; p != end;) {
        const char *next = memchr(p + 1, ';', (size_t)(end - p - 1)), *aeq;
        h2o_iovec_t aname, aval;
        if (next == NULL)
            next = end;
        if ((aeq = memchr(p + 1, '=', (size_t)(next - p - 1))) != NULL) {
            aname = trim(p + 1, aeq);
            aval = trim(aeq + 1, next);
        } else {
            aname = trim(p + 1, next);
            aval = h2o_iovec_init(next, 0);
        }
        if (ci_eq(aname.base, aname.len, H2O_STRLIT("domain")) && domain_removed(v, aval)) {
            if (out == NULL) {
                /* the result is never longer than the value */
                out = gw_pool_alloc(pool, value->len);
                out_len = (size_t)(p - s);
                memcpy(out, s, out_len);
            }
        } else if (out != NULL) {
            memcpy(out + out_len, p, (size_t)(next - p));
            out_len += (size_t)(next - p);
        }
        p = next;
    }
    if (out != NULL)
        *value = h2o_iovec_init(out, out_len);
    return 1;
}

int gw_address_view_response_header(const gw_address_view_t *v, h2o_mem_pool_t *pool, const h2o_token_t *token, h2o_iovec_t *value)
{
    if (token == H2O_TOKEN_SET_COOKIE)
        return v->cookies != NULL ? rewrite_set_cookie(v, pool, value) : 1;
    if (v->localhost_port == 0 || v->preview_origin.len == 0 || token == NULL)
        return 1;
    if (token == H2O_TOKEN_LOCATION || token == H2O_TOKEN_CONTENT_LOCATION) {
        rewrite_url(v, pool, value);
    } else if (token == H2O_TOKEN_REFRESH) {
        rewrite_refresh(v, pool, value);
    } else if (token == H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN) {
        rewrite_allow_origin(v, value);
    }
    return 1;
}
