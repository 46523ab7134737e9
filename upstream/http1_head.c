/*
 * HTTP/1.1 toward the sandbox, without I/O: the request head (pass 1 sizes
 * it, pass 2 writes it, both from the same rules), and the response head's
 * checks, framing and end-to-end headers.
 */
#include <assert.h>
#include <string.h>
#include "common/engine.h"
#include "common/numfmt.h"
#include "upstream/http1_head.h"

int phr_parse_response(const char *buf, size_t len, int *minor_version, int *status, const char **msg, size_t *msg_len,
                       struct phr_header *headers, size_t *num_headers, size_t last_len);
ssize_t phr_decode_chunked(struct phr_chunked_decoder *decoder, char *buf, size_t *bufsz);

static int name_is(const char *name, size_t len, const char *lc, size_t lclen)
{
    return h2o_lcstris(name, len, lc, lclen);
}

static int name_has_prefix(const char *name, size_t len, const char *lc, size_t lclen)
{
    return len >= lclen && h2o_lcstris(name, lclen, lc, lclen);
}

/* The names a message's Connection header fields list (RFC 9110 7.6.1),
 * split once per head rather than once per header checked against them. */
#define CONN_NAMES_MAX 16
typedef struct st_conn_list_t {
    const h2o_iovec_t *values; /* the Connection field values */
    size_t num_values;
    h2o_iovec_t names[CONN_NAMES_MAX];
    size_t num_names; /* SIZE_MAX: more than CONN_NAMES_MAX, the values are searched instead */
} conn_list_t;

static void conn_list_init(conn_list_t *l, const h2o_iovec_t *values, size_t num_values)
{
    const char *token;
    size_t token_len, i;

    l->values = values;
    l->num_values = num_values;
    l->num_names = 0;
    for (i = 0; i != num_values; ++i) {
        h2o_iovec_t iter = values[i];
        while ((token = gw_next_token(&iter, ',', &token_len, NULL)) != NULL) {
            if (l->num_names == CONN_NAMES_MAX) {
                l->num_names = SIZE_MAX;
                return;
            }
            l->names[l->num_names++] = h2o_iovec_init(token, token_len);
        }
    }
}

/* 1 when `name` is listed in the Connection header fields. */
static int listed_in_connection(const conn_list_t *l, const char *name, size_t len)
{
    char lc[128];
    size_t i;

    if (l->num_values == 0 || len > sizeof(lc))
        return 0;
    /* h2o_lcstris and h2o_contains_token lowercase the listed names only */
    memcpy(lc, name, len);
    h2o_strtolower(lc, len);
    if (l->num_names == SIZE_MAX) {
        for (i = 0; i != l->num_values; ++i)
            if (h2o_contains_token(l->values[i].base, l->values[i].len, lc, len, ','))
                return 1;
        return 0;
    }
    for (i = 0; i != l->num_names; ++i)
        if (h2o_lcstris(l->names[i].base, l->names[i].len, lc, len))
            return 1;
    return 0;
}

/* Hop-by-hop in both directions (RFC 9110 7.6.1), besides those a
 * Connection header lists. */
static int is_hop_by_hop_token(const h2o_token_t *t)
{
    return t == H2O_TOKEN_CONNECTION || t == H2O_TOKEN_KEEP_ALIVE || t == H2O_TOKEN_TE || t == H2O_TOKEN_TRANSFER_ENCODING ||
           t == H2O_TOKEN_UPGRADE || t == H2O_TOKEN_HTTP2_SETTINGS;
}

static int is_hop_by_hop_name(const char *name, size_t len)
{
    return name_is(name, len, H2O_STRLIT("proxy-connection")) || name_is(name, len, H2O_STRLIT("trailer"));
}

/* --- the request head ------------------------------------------------------ */

typedef struct st_head_buf_t {
    char *base;
    size_t len;
    size_t capacity;
} head_buf_t;

static void hb_append(head_buf_t *hb, const char *s, size_t len)
{
    /* capacity was computed from the same inputs */
    assert(hb->len + len <= hb->capacity);
    memcpy(hb->base + hb->len, s, len);
    hb->len += len;
}

#define HB_LIT(hb, lit) hb_append((hb), (lit), sizeof(lit) - 1)

static void hb_header(head_buf_t *hb, const char *name, size_t name_len, const char *value, size_t value_len)
{
    hb_append(hb, name, name_len);
    HB_LIT(hb, ": ");
    hb_append(hb, value, value_len);
    HB_LIT(hb, "\r\n");
}

static int request_header_is_forwarded(const h2o_header_t *h, const conn_list_t *conn)
{
    const h2o_iovec_t *name = h->name;

    if (h2o_iovec_is_token(name)) {
        const h2o_token_t *t = H2O_STRUCT_FROM_MEMBER(h2o_token_t, buf, name);
        if (is_hop_by_hop_token(t) || t == H2O_TOKEN_HOST || t == H2O_TOKEN_CONTENT_LENGTH || t == H2O_TOKEN_EXPECT ||
            t == H2O_TOKEN_COOKIE)
            return 0;
    }
    if (is_hop_by_hop_name(name->base, name->len) || name_is(name->base, name->len, H2O_STRLIT("forwarded")) ||
        name_has_prefix(name->base, name->len, H2O_STRLIT("x-forwarded-")) ||
        name_has_prefix(name->base, name->len, H2O_STRLIT("x-lizard-")) || name_is(name->base, name->len, H2O_STRLIT("x-real-ip")))
        return 0;
    /* nginx's default (underscores_in_headers off): a server or a framework
     * that maps "_" and "-" alike (CGI, WSGI, PHP) would read
     * Transfer_Encoding as Transfer-Encoding, X_Lizard_... as X-Lizard-... */
    if (memchr(name->base, '_', name->len) != NULL)
        return 0;
    return !listed_in_connection(conn, name->base, name->len);
}

/* HTTP/2 splits cookies into fields; HTTP/1 wants one (RFC 6265 5.4). */
static void hb_cookies(head_buf_t *hb, const h2o_headers_t *headers)
{
    size_t seen = 0, i;

    HB_LIT(hb, "cookie: ");
    for (i = 0; i != headers->size; ++i) {
        const h2o_header_t *h = headers->entries + i;
        if (h->name != &H2O_TOKEN_COOKIE->buf)
            continue;
        if (seen++ != 0)
            HB_LIT(hb, "; ");
        hb_append(hb, h->value.base, h->value.len);
    }
    HB_LIT(hb, "\r\n");
}

h2o_iovec_t gw_http1_request_head(h2o_mem_pool_t *pool, const gw_http1_request_t *r)
{
    const h2o_headers_t *headers = r->headers;
    h2o_iovec_t *conn_values = gw_pool_alloc(pool, sizeof(*conn_values) * (headers->size + 1));
    size_t num_conn_values = 0, cookie_len = 0, num_cookies = 0, i;
    conn_list_t conn;
    char host_buf[sizeof("localhost:") - 1 + GW_NUMFMT_DEC_SIZE], num_buf[GW_NUMFMT_DEC_SIZE];
    h2o_iovec_t host = r->authority;
    head_buf_t hb = {NULL, 0, 0};

    for (i = 0; i != headers->size; ++i)
        if (headers->entries[i].name == &H2O_TOKEN_CONNECTION->buf)
            conn_values[num_conn_values++] = headers->entries[i].value;
    conn_list_init(&conn, conn_values, num_conn_values);

    if (r->localhost_port != 0) {
        size_t n = sizeof("localhost:") - 1;
        memcpy(host_buf, "localhost:", n);
        host = h2o_iovec_init(host_buf, n + gw_numfmt_dec(host_buf + n, r->localhost_port));
    }

    /* pass 1: the size */
    hb.capacity = r->method.len + 1 + r->path.len + sizeof(" HTTP/1.1\r\n") - 1;
    hb.capacity += sizeof("host: \r\n") - 1 + host.len;
    for (i = 0; i != headers->size; ++i) {
        const h2o_header_t *h = headers->entries + i;
        if (h->name == &H2O_TOKEN_COOKIE->buf) {
            cookie_len += h->value.len + 2;
            ++num_cookies;
        } else if (request_header_is_forwarded(h, &conn)) {
            hb.capacity += h->name->len + h->value.len + 4;
        }
    }
    hb.capacity += sizeof("cookie: \r\n") - 1 + cookie_len;
    hb.capacity += sizeof("x-forwarded-for: \r\n") - 1 + r->client_addr.len;
    hb.capacity += sizeof("x-forwarded-proto: \r\n") - 1 + r->scheme.len;
    hb.capacity += sizeof("x-forwarded-host: \r\n") - 1 + r->authority.len;
    hb.capacity += sizeof("x-forwarded-port: 65535\r\n") - 1;
    hb.capacity += sizeof("content-length: 18446744073709551615\r\n") - 1;
    hb.capacity += sizeof("connection: upgrade\r\nupgrade: websocket\r\n\r\n") - 1;
    hb.base = gw_pool_alloc(pool, hb.capacity);

    /* pass 2: the text */
    hb_append(&hb, r->method.base, r->method.len);
    HB_LIT(&hb, " ");
    hb_append(&hb, r->path.base, r->path.len);
    HB_LIT(&hb, " HTTP/1.1\r\n");
    hb_header(&hb, H2O_STRLIT("host"), host.base, host.len);
    for (i = 0; i != headers->size; ++i) {
        const h2o_header_t *h = headers->entries + i;
        if (h->name != &H2O_TOKEN_COOKIE->buf && request_header_is_forwarded(h, &conn))
            hb_header(&hb, h->orig_name != NULL ? h->orig_name : h->name->base, h->name->len, h->value.base, h->value.len);
    }
    if (num_cookies != 0)
        hb_cookies(&hb, headers);
    if (r->client_addr.len != 0)
        hb_header(&hb, H2O_STRLIT("x-forwarded-for"), r->client_addr.base, r->client_addr.len);
    hb_header(&hb, H2O_STRLIT("x-forwarded-proto"), r->scheme.base, r->scheme.len);
    hb_header(&hb, H2O_STRLIT("x-forwarded-host"), r->authority.base, r->authority.len);
    if (r->client_port > 0) {
        hb_header(&hb, H2O_STRLIT("x-forwarded-port"), num_buf, gw_numfmt_dec(num_buf, (uint64_t)r->client_port));
    }
    if (r->body_streams && r->content_length == SIZE_MAX) {
        HB_LIT(&hb, "transfer-encoding: chunked\r\n");
    } else if (r->body_streams) {
        hb_header(&hb, H2O_STRLIT("content-length"), num_buf, gw_numfmt_dec(num_buf, r->content_length));
    } else if (r->body.base != NULL || h2o_memis(r->method.base, r->method.len, H2O_STRLIT("POST")) ||
               h2o_memis(r->method.base, r->method.len, H2O_STRLIT("PUT"))) {
        /* POST and PUT without a body still say so: some servers answer 411 otherwise */
        hb_header(&hb, H2O_STRLIT("content-length"), num_buf, gw_numfmt_dec(num_buf, r->body.base != NULL ? r->body.len : 0));
    }
    if (r->websocket) {
        HB_LIT(&hb, "connection: upgrade\r\nupgrade: websocket\r\n");
    } else {
        HB_LIT(&hb, "connection: keep-alive\r\n");
    }
    HB_LIT(&hb, "\r\n");

    return h2o_iovec_init(hb.base, hb.len);
}

/* --- the response head ----------------------------------------------------- */

gw_http1_head_result_t gw_http1_response_parse(const char *buf, size_t len, gw_http1_response_t *res)
{
    const char *reason;
    int rlen;

    res->num_headers = GW_HTTP1_MAX_RESPONSE_HEADERS;
    rlen = phr_parse_response(buf, len, &res->minor_version, &res->status, &reason, &res->reason.len, res->headers,
                              &res->num_headers, 0);
    if (rlen == -2)
        return len > GW_HTTP1_MAX_RESPONSE_HEAD_BYTES ? GW_HTTP1_HEAD_TOO_LARGE : GW_HTTP1_HEAD_PARTIAL;
    if (rlen < 0)
        return GW_HTTP1_HEAD_INVALID;
    /* a whole head can arrive in one read: the bound holds for it too */
    if ((size_t)rlen > GW_HTTP1_MAX_RESPONSE_HEAD_BYTES)
        return GW_HTTP1_HEAD_TOO_LARGE;
    if (res->status < 100 || res->status > 599)
        return GW_HTTP1_HEAD_INVALID;
    res->reason.base = (char *)reason;
    res->size = (size_t)rlen;
    return GW_HTTP1_HEAD_COMPLETE;
}

static int header_is(const struct phr_header *h, const char *lc, size_t lclen)
{
    return h2o_lcstris(h->name, h->name_len, lc, lclen);
}

int gw_http1_response_framing(const gw_http1_response_t *res, gw_http1_body_t *body, const char **why)
{
    const char *dummy;
    int chunked = 0;
    size_t i;

    if (why == NULL)
        why = &dummy;
    memset(body, 0, sizeof(*body));
    body->content_length = SIZE_MAX;
    body->keepalive = res->minor_version >= 1;
    body->chunked.consume_trailer = 1;
    for (i = 0; i != res->num_headers; ++i) {
        const struct phr_header *h = res->headers + i;
        /* picohttpparser gives an obs-fold continuation line no name */
        if (h->name_len == 0) {
            *why = "Its response head has a folded (obs-fold) header line.";
            return -1;
        }
        if (header_is(h, H2O_STRLIT("connection"))) {
            if (h2o_contains_token(h->value, h->value_len, H2O_STRLIT("close"), ','))
                body->keepalive = 0;
        } else if (header_is(h, H2O_STRLIT("transfer-encoding"))) {
            if (h2o_lcstris(h->value, h->value_len, H2O_STRLIT("chunked"))) {
                chunked = 1;
            } else if (!h2o_lcstris(h->value, h->value_len, H2O_STRLIT("identity"))) {
                *why = "Its response has a Transfer-Encoding other than chunked.";
                return -1;
            }
        } else if (header_is(h, H2O_STRLIT("content-length"))) {
            size_t v = h2o_strtosize(h->value, h->value_len);
            if (v == SIZE_MAX) {
                *why = "Its response has a Content-Length that is not a number.";
                return -1;
            }
            if (body->content_length != SIZE_MAX && body->content_length != v) {
                *why = "Its response has two different Content-Length values.";
                return -1;
            }
            body->content_length = v;
        }
    }
    if (chunked) {
        if (body->content_length != SIZE_MAX) {
            /* RFC 7230 3.3.3: chunked wins, and the connection must close */
            body->content_length = SIZE_MAX;
            body->keepalive = 0;
        }
        body->framing = GW_HTTP1_CHUNKED;
    } else if (body->content_length != SIZE_MAX) {
        body->framing = GW_HTTP1_LENGTH;
        body->bytes_left = body->content_length;
    } else {
        body->framing = GW_HTTP1_UNTIL_CLOSE;
        body->keepalive = 0;
    }
    return 0;
}

int gw_http1_body_decode(gw_http1_body_t *body, char *buf, size_t *len)
{
    switch (body->framing) {
    case GW_HTTP1_LENGTH:
        if (*len < body->bytes_left) {
            body->bytes_left -= *len;
            return 0;
        }
        if (*len > body->bytes_left) {
            /* more than announced: drop the excess, and the connection */
            *len = body->bytes_left;
            body->keepalive = 0;
        }
        body->bytes_left = 0;
        return 1;
    case GW_HTTP1_CHUNKED: {
        ssize_t ret;
        if (*len == 0)
            return 0;
        GW_PHR_CHUNKED_GUARD_OFF(&body->chunked);
        if ((ret = phr_decode_chunked(&body->chunked, buf, len)) == -1) {
            *len = 0;
            return -1;
        }
        if (ret == -2)
            return 0;
        if (ret > 0)
            body->keepalive = 0; /* bytes after the last chunk */
        return 1;
    }
    case GW_HTTP1_UNTIL_CLOSE:
        return 0;
    }
    *len = 0;
    return -1;
}

void gw_http1_response_headers(h2o_mem_pool_t *pool, h2o_headers_t *out, const gw_http1_response_t *res, int drop_server,
                               const gw_address_view_t *view)
{
    h2o_iovec_t conn_values[GW_HTTP1_MAX_RESPONSE_HEADERS];
    size_t num_conn_values = 0, i;
    conn_list_t conn;

    for (i = 0; i != res->num_headers; ++i)
        if (header_is(res->headers + i, H2O_STRLIT("connection")))
            conn_values[num_conn_values++] = h2o_iovec_init(res->headers[i].value, res->headers[i].value_len);
    conn_list_init(&conn, conn_values, num_conn_values);

    for (i = 0; i != res->num_headers; ++i) {
        const struct phr_header *h = res->headers + i;
        h2o_iovec_t lc = h2o_strdup(pool, h->name, h->name_len);
        h2o_iovec_t value = h2o_strdup(pool, h->value, h->value_len);
        const h2o_token_t *token;

        h2o_strtolower(lc.base, lc.len);
        /* by name: h2o master has a token for Proxy-Connection, 2.2.5 has none */
        if (listed_in_connection(&conn, lc.base, lc.len) || is_hop_by_hop_name(lc.base, lc.len))
            continue;
        if ((token = h2o_lookup_token(lc.base, lc.len)) != NULL) {
            /* h2o writes its own Date (and Server, when configured) */
            if (is_hop_by_hop_token(token) || token == H2O_TOKEN_CONTENT_LENGTH || token == H2O_TOKEN_DATE ||
                (token == H2O_TOKEN_SERVER && drop_server))
                continue;
            /* every rewritten header is one h2o has a token for */
            if (view != NULL && (token == H2O_TOKEN_SET_COOKIE || view->localhost_port != 0) &&
                !gw_address_view_response_header(view, pool, token, &value))
                continue;
            h2o_add_header(pool, out, token, h->name, value.base, value.len);
        } else {
            h2o_add_header_by_str(pool, out, lc.base, lc.len, 0, h->name, value.base, value.len);
        }
    }
}

void gw_http1_allow_token_header(h2o_req_t *req)
{
    static const h2o_iovec_t token_header = {H2O_STRLIT("x-lizard-access-token")};
    ssize_t origin = h2o_find_header_by_str(&req->headers, H2O_STRLIT("origin"), -1);
    ssize_t allowed = h2o_find_header(&req->res.headers, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, -1);
    ssize_t headers;

    if (origin == -1 || allowed == -1)
        return;
    h2o_iovec_t allow = req->res.headers.entries[allowed].value;
    if (!h2o_memis(allow.base, allow.len, H2O_STRLIT("*")) &&
        !h2o_memis(allow.base, allow.len, req->headers.entries[origin].value.base, req->headers.entries[origin].value.len))
        return;
    if ((headers = h2o_find_header_by_str(&req->res.headers, H2O_STRLIT("access-control-allow-headers"), -1)) == -1) {
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-headers"), 0, NULL, token_header.base,
                              token_header.len);
        return;
    }
    h2o_iovec_t *value = &req->res.headers.entries[headers].value;
    if (h2o_contains_token(value->base, value->len, token_header.base, token_header.len, ','))
        return;
    *value = value->len == 0 ? token_header : h2o_concat(&req->pool, *value, h2o_iovec_init(H2O_STRLIT(", ")), token_header);
}

/* The escaped form of one byte of a quote: printable ASCII as is, '"' and
 * '\\' behind a backslash, CR LF TAB as \\r \\n \\t, others \\xNN. Returns the length written to out (at most 4). */
static size_t quote_byte(char *out, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";

    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
        out[0] = (char)c;
        return 1;
    }
    out[0] = '\\';
    switch (c) {
    case '"':
    case '\\':
        out[1] = (char)c;
        return 2;
    case '\r':
        out[1] = 'r';
        return 2;
    case '\n':
        out[1] = 'n';
        return 2;
    case '\t':
        out[1] = 't';
        return 2;
    default:
        out[1] = 'x';
        out[2] = hex[c >> 4];
        out[3] = hex[c & 15];
        return 4;
    }
}

size_t gw_http1_quote(char *buf, size_t bufsize, const char *bytes, size_t len)
{
    static const char lead[] = " It sent: \"", tail[] = "\"";
    size_t n = 0, i;
    char one[4];

    if (bufsize < sizeof(lead) + sizeof(tail) + 3 + 1)
        return 0;
    memcpy(buf, lead, sizeof(lead) - 1);
    n = sizeof(lead) - 1;
    for (i = 0; i != len && i != GW_HTTP1_QUOTE_BYTES; ++i) {
        size_t k = quote_byte(one, (unsigned char)bytes[i]);
        /* room for this byte, "..." and the closing quote */
        if (n + k + 3 + sizeof(tail) > bufsize)
            break;
        memcpy(buf + n, one, k);
        n += k;
    }
    if (i != len) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    memcpy(buf + n, tail, sizeof(tail));
    return n + sizeof(tail) - 1;
}
