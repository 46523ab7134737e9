/*
 * upstream/http1_head.c: what the app receives in the request head
 * (hop-by-hop headers and the gateway's own headers never forwarded,
 * X-Forwarded-* set by the gateway, Host as configured, one Cookie), and
 * which response heads the gateway trusts, how it frames their bodies and
 * which of their headers reach the client.
 */
#include <check.h>
#include <string.h>
#include <strings.h>
#include "common/engine.h"
#include "upstream/http1_head.h"
#include "../bytes.h"

static h2o_mem_pool_t pool;
static h2o_headers_t headers;

static void setup(void)
{
    h2o_mem_init_pool(&pool);
    memset(&headers, 0, sizeof(headers));
}

static void teardown(void)
{
    h2o_mem_clear_pool(&pool);
}

static h2o_iovec_t iov(const char *s)
{
    return h2o_iovec_init(s, strlen(s));
}

/* a request header as h2o's parsers store it: lowercase name (a token when
 * h2o knows it), the client's spelling in orig_name */
static void add(const char *orig_name, const char *value)
{
    h2o_iovec_t lc = h2o_strdup(&pool, orig_name, SIZE_MAX);
    h2o_strtolower(lc.base, lc.len);
    h2o_add_header_by_str(&pool, &headers, lc.base, lc.len, 1, orig_name, value, strlen(value));
}

static gw_http1_request_t request(const char *method)
{
    gw_http1_request_t r = {.method = iov(method),
                            .path = iov("/app?x=1"),
                            .authority = iov("3000-sbx1.lizard.app"),
                            .scheme = iov("https"),
                            .headers = &headers,
                            .client_addr = iov("203.0.113.9"),
                            .client_port = 443};
    return r;
}

static char *build(const gw_http1_request_t *r)
{
    h2o_iovec_t head = gw_http1_request_head(&pool, r);
    return h2o_strdup(&pool, head.base, head.len).base;
}

/* occurrences of a whole header line (case-insensitive) in a head */
static int count_lines(const char *head, const char *line)
{
    size_t len = strlen(line);
    int n = 0;
    const char *p = strstr(head, "\r\n");

    while (p != NULL && p[2] != '\0') {
        const char *eol = strstr(p + 2, "\r\n");
        if (eol == NULL)
            break;
        if ((size_t)(eol - (p + 2)) == len && strncasecmp(p + 2, line, len) == 0)
            ++n;
        p = eol;
    }
    return n;
}

/* occurrences of a header name (case-insensitive) in a head */
static int count_name(const char *head, const char *name)
{
    size_t len = strlen(name);
    int n = 0;
    const char *p = strstr(head, "\r\n");

    while (p != NULL && p[2] != '\0') {
        if (strncasecmp(p + 2, name, len) == 0 && p[2 + len] == ':')
            ++n;
        p = strstr(p + 2, "\r\n");
    }
    return n;
}

START_TEST(test_request_line_and_end_to_end_headers)
{
    add("Accept", "text/html");
    add("X-Custom", "kept");
    gw_http1_request_t r = request("GET");
    char *head = build(&r);

    static const char start[] = "GET /app?x=1 HTTP/1.1\r\nhost: 3000-sbx1.lizard.app\r\n";
    ck_assert_msg(strncmp(head, start, sizeof(start) - 1) == 0, "%s", head);
    /* the client's spelling of a name is kept */
    ck_assert_int_eq(count_lines(head, "Accept: text/html"), 1);
    ck_assert_ptr_nonnull(strstr(head, "\r\nX-Custom: kept\r\n"));
    ck_assert_int_eq(count_lines(head, "connection: keep-alive"), 1);
    /* no body: none announced */
    ck_assert_int_eq(count_name(head, "content-length"), 0);
    ck_assert_msg(strcmp(head + strlen(head) - 4, "\r\n\r\n") == 0, "the head ends with an empty line");
}
END_TEST

START_TEST(test_hop_by_hop_headers_are_not_forwarded)
{
    add("Connection", "keep-alive, X-Private-Hop");
    add("Keep-Alive", "timeout=5");
    add("TE", "trailers");
    add("Transfer-Encoding", "chunked");
    add("Upgrade", "h2c");
    add("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA");
    add("Proxy-Connection", "keep-alive");
    add("Trailer", "X-Checksum");
    add("X-Private-Hop", "listed in Connection");
    add("Expect", "100-continue");
    add("Content-Length", "999");
    add("X-Kept", "1");
    gw_http1_request_t r = request("GET");
    char *head = build(&r);

    static const char *dropped[] = {"keep-alive",       "te",      "transfer-encoding", "upgrade", "http2-settings",
                                    "proxy-connection", "trailer", "x-private-hop",     "expect",  "content-length"};
    for (size_t i = 0; i != sizeof(dropped) / sizeof(dropped[0]); ++i)
        ck_assert_msg(count_name(head, dropped[i]) == 0, "%s forwarded:\n%s", dropped[i], head);
    /* the gateway's own Connection only */
    ck_assert_int_eq(count_name(head, "connection"), 1);
    ck_assert_int_eq(count_lines(head, "connection: keep-alive"), 1);
    ck_assert_msg(count_lines(head, "X-Kept: 1") == 1, "%s", head);
}
END_TEST

START_TEST(test_forwarded_headers_are_the_gateways)
{
    add("X-Forwarded-For", "10.6.6.6");
    add("X-Forwarded-Host", "evil.example");
    add("X-Forwarded-Proto", "http");
    add("X-Forwarded-Port", "1");
    add("X-Forwarded-Prefix", "/spoof");
    add("Forwarded", "for=10.6.6.6");
    gw_http1_request_t r = request("GET");
    char *head = build(&r);

    ck_assert_int_eq(count_name(head, "x-forwarded-for"), 1);
    ck_assert_int_eq(count_lines(head, "x-forwarded-for: 203.0.113.9"), 1);
    ck_assert_int_eq(count_lines(head, "x-forwarded-proto: https"), 1);
    ck_assert_int_eq(count_lines(head, "x-forwarded-host: 3000-sbx1.lizard.app"), 1);
    ck_assert_int_eq(count_lines(head, "x-forwarded-port: 443"), 1);
    ck_assert_int_eq(count_name(head, "x-forwarded-prefix"), 0);
    ck_assert_int_eq(count_name(head, "forwarded"), 0);
    ck_assert_ptr_null(strstr(head, "10.6.6.6"));
    ck_assert_ptr_null(strstr(head, "evil.example"));

    /* unknown address and port: not sent rather than made up */
    r.client_addr = h2o_iovec_init(NULL, 0);
    r.client_port = -1;
    head = build(&r);
    ck_assert_int_eq(count_name(head, "x-forwarded-for"), 0);
    ck_assert_int_eq(count_name(head, "x-forwarded-port"), 0);
    ck_assert_int_eq(count_lines(head, "x-forwarded-proto: https"), 1);
}
END_TEST

START_TEST(test_lizard_headers_are_not_forwarded)
{
    add("X-Lizard-Access-Token", "secret-token-value");
    add("x-lizard-anything", "internal");
    add("X-Lizardish", "not ours: kept");
    gw_http1_request_t r = request("GET");
    char *head = build(&r);

    ck_assert_ptr_null(strstr(head, "secret-token-value"));
    ck_assert_int_eq(count_name(head, "x-lizard-access-token"), 0);
    ck_assert_int_eq(count_name(head, "x-lizard-anything"), 0);
    ck_assert_int_eq(count_lines(head, "X-Lizardish: not ours: kept"), 1);
}
END_TEST

/* nginx's defaults: a name with an underscore (Transfer_Encoding reads as
 * Transfer-Encoding to CGI-style servers) and the client's X-Real-IP never
 * reach the app */
START_TEST(test_underscores_and_real_ip_are_not_forwarded)
{
    add("Transfer_Encoding", "chunked");
    add("X_Lizard_Access_Token", "secret-token-value");
    add("x_forwarded_for", "198.51.100.1");
    add("X-Real-IP", "198.51.100.2");
    add("x-real-ip", "198.51.100.3");
    add("X-Real-IP-Not", "kept");
    add("X-Dashes-Only", "kept");
    gw_http1_request_t r = request("POST");
    char *head = build(&r);

    ck_assert_ptr_null(strchr(head, '_'));
    ck_assert_ptr_null(strstr(head, "198.51.100."));
    ck_assert_ptr_null(strstr(head, "secret-token-value"));
    ck_assert_int_eq(count_name(head, "x-real-ip"), 0);
    ck_assert_int_eq(count_name(head, "transfer-encoding"), 0);
    ck_assert_int_eq(count_lines(head, "X-Real-IP-Not: kept"), 1);
    ck_assert_int_eq(count_lines(head, "X-Dashes-Only: kept"), 1);
}
END_TEST

START_TEST(test_host_preserved_or_localhost)
{
    add("Host", "ignored.example");
    gw_http1_request_t r = request("GET");
    char *head = build(&r);

    ck_assert_int_eq(count_name(head, "host"), 1);
    ck_assert_int_eq(count_lines(head, "host: 3000-sbx1.lizard.app"), 1);

    /* upstream.host_header "localhost" (dev servers that check Host) */
    r.localhost_port = 5173;
    head = build(&r);
    ck_assert_int_eq(count_name(head, "host"), 1);
    ck_assert_int_eq(count_lines(head, "host: localhost:5173"), 1);
    /* the app can still tell the public name */
    ck_assert_int_eq(count_lines(head, "x-forwarded-host: 3000-sbx1.lizard.app"), 1);
}
END_TEST

START_TEST(test_cookies_become_one_header)
{
    /* HTTP/2 clients send one field per cookie (RFC 9113 8.2.3) */
    add("cookie", "a=1");
    add("Accept", "*/*");
    add("cookie", "b=2");
    gw_http1_request_t r = request("GET");
    char *head = build(&r);

    ck_assert_int_eq(count_name(head, "cookie"), 1);
    ck_assert_int_eq(count_lines(head, "cookie: a=1; b=2"), 1);
}
END_TEST

START_TEST(test_content_length)
{
    gw_http1_request_t r = request("POST");
    char *head;

    r.body = iov("hello");
    head = build(&r);
    ck_assert_int_eq(count_lines(head, "content-length: 5"), 1);

    /* POST and PUT without a body say 0 (some servers answer 411 otherwise) */
    r.body = h2o_iovec_init(NULL, 0);
    head = build(&r);
    ck_assert_int_eq(count_lines(head, "content-length: 0"), 1);
    r.method = iov("PUT");
    head = build(&r);
    ck_assert_int_eq(count_lines(head, "content-length: 0"), 1);
    r.method = iov("DELETE");
    head = build(&r);
    ck_assert_int_eq(count_name(head, "content-length"), 0);
}
END_TEST

/* A body that streams (upstream/request_body.h): the client's declared
 * length, else chunked; never both, and not the bytes in hand's length. */
START_TEST(test_streaming_body_framing)
{
    gw_http1_request_t r = request("POST");
    char *head;

    r.body = iov("first bytes");
    r.body_streams = 1;
    r.content_length = 3000000;
    head = build(&r);
    ck_assert_int_eq(count_lines(head, "content-length: 3000000"), 1);
    ck_assert_int_eq(count_name(head, "content-length"), 1);
    ck_assert_int_eq(count_name(head, "transfer-encoding"), 0);

    r.content_length = SIZE_MAX;
    head = build(&r);
    ck_assert_int_eq(count_lines(head, "transfer-encoding: chunked"), 1);
    ck_assert_int_eq(count_name(head, "content-length"), 0);
}
END_TEST

START_TEST(test_websocket_upgrade)
{
    add("Connection", "Upgrade");
    add("Upgrade", "websocket");
    add("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
    add("Sec-WebSocket-Version", "13");
    gw_http1_request_t r = request("GET");
    r.websocket = 1;
    char *head = build(&r);

    ck_assert_int_eq(count_name(head, "connection"), 1);
    ck_assert_int_eq(count_lines(head, "connection: upgrade"), 1);
    ck_assert_int_eq(count_name(head, "upgrade"), 1);
    ck_assert_int_eq(count_lines(head, "upgrade: websocket"), 1);
    ck_assert_int_eq(count_lines(head, "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="), 1);
    ck_assert_int_eq(count_lines(head, "Sec-WebSocket-Version: 13"), 1);
}
END_TEST

/* --- responses ------------------------------------------------------------ */

static gw_http1_head_result_t parse(const char *text, gw_http1_response_t *res)
{
    return gw_http1_response_parse(text, strlen(text), res);
}

START_TEST(test_response_parse)
{
    gw_http1_response_t res;
    const char *ok = "HTTP/1.1 404 Not Here\r\nContent-Length: 3\r\n\r\nabc";

    ck_assert_int_eq(parse(ok, &res), GW_HTTP1_HEAD_COMPLETE);
    ck_assert_int_eq(res.status, 404);
    ck_assert_int_eq(res.minor_version, 1);
    ck_assert(h2o_memis(res.reason.base, res.reason.len, H2O_STRLIT("Not Here")));
    ck_assert_uint_eq(res.size, strlen(ok) - 3);
    ck_assert_uint_eq(res.num_headers, 1);

    ck_assert_int_eq(parse("HTTP/1.1 200 OK\r\nContent-Le", &res), GW_HTTP1_HEAD_PARTIAL);
    /* interim heads are parsed; the caller skips them */
    ck_assert_int_eq(parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", &res), GW_HTTP1_HEAD_COMPLETE);
    ck_assert_int_eq(res.status, 100);

    ck_assert_int_eq(parse("SSH-2.0-OpenSSH_9.2\r\n\r\n", &res), GW_HTTP1_HEAD_INVALID);
    ck_assert_int_eq(parse("HTTP/1.1 099 Low\r\n\r\n", &res), GW_HTTP1_HEAD_INVALID);
    ck_assert_int_eq(parse("HTTP/1.1 600 High\r\n\r\n", &res), GW_HTTP1_HEAD_INVALID);
}
END_TEST

START_TEST(test_response_head_size_bound)
{
    gw_http1_response_t res;
    size_t big = GW_HTTP1_MAX_RESPONSE_HEAD_BYTES + 100;
    char *buf = gw_pool_alloc(&pool, big + 64);
    size_t n = 0;

    n += (size_t)snprintf(buf, 64, "HTTP/1.1 200 OK\r\nX-Big: ");
    memset(buf + n, 'a', big - n);
    n = big;
    /* unfinished and already over the bound */
    ck_assert_int_eq(gw_http1_response_parse(buf, n, &res), GW_HTTP1_HEAD_TOO_LARGE);
    /* finished in one read, still over it */
    memcpy(buf + n, "\r\n\r\n", 4);
    ck_assert_int_eq(gw_http1_response_parse(buf, n + 4, &res), GW_HTTP1_HEAD_TOO_LARGE);
}
END_TEST

static int framing(const char *text, gw_http1_body_t *body)
{
    gw_http1_response_t res;
    ck_assert_int_eq(parse(text, &res), GW_HTTP1_HEAD_COMPLETE);
    return gw_http1_response_framing(&res, body, NULL);
}

START_TEST(test_response_framing)
{
    gw_http1_body_t b;

    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", &b), 0);
    ck_assert_int_eq(b.framing, GW_HTTP1_LENGTH);
    ck_assert_uint_eq(b.content_length, 10);
    ck_assert_int_eq(b.keepalive, 1);

    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &b), 0);
    ck_assert_int_eq(b.framing, GW_HTTP1_CHUNKED);
    ck_assert_uint_eq(b.content_length, SIZE_MAX);
    ck_assert_int_eq(b.keepalive, 1);

    /* chunked wins over a length, and the connection is not reused (RFC 9112 6.3) */
    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", &b), 0);
    ck_assert_int_eq(b.framing, GW_HTTP1_CHUNKED);
    ck_assert_int_eq(b.keepalive, 0);

    /* no length: the body ends with the connection */
    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\n\r\n", &b), 0);
    ck_assert_int_eq(b.framing, GW_HTTP1_UNTIL_CLOSE);
    ck_assert_int_eq(b.keepalive, 0);

    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", &b), 0);
    ck_assert_int_eq(b.keepalive, 0);
    ck_assert_int_eq(framing("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", &b), 0);
    ck_assert_int_eq(b.keepalive, 0);

    /* the same length twice is one length */
    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\n", &b), 0);
    ck_assert_uint_eq(b.content_length, 4);
}
END_TEST

START_TEST(test_untrusted_response_heads)
{
    gw_http1_body_t b;

    /* obs-fold (RFC 9112 5.2): a gateway may answer 502 */
    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n", &b), -1);
    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n", &b), -1);
    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", &b), -1);
    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &b), -1);
    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\n", &b), 0);
}
END_TEST

START_TEST(test_body_decode)
{
    gw_http1_body_t b;
    char buf[64];
    size_t len;

    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", &b), 0);
    len = 3;
    ck_assert_int_eq(gw_http1_body_decode(&b, memcpy(buf, "abc", 3), &len), 0);
    ck_assert_uint_eq(len, 3);
    /* more than announced: the excess is dropped, and the connection */
    len = 4;
    ck_assert_int_eq(gw_http1_body_decode(&b, memcpy(buf, "deXX", 4), &len), 1);
    ck_assert_uint_eq(len, 2);
    ck_assert_int_eq(b.keepalive, 0);

    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &b), 0);
    len = strlen("5\r\nhello\r\n");
    memcpy(buf, "5\r\nhello\r\n", len);
    ck_assert_int_eq(gw_http1_body_decode(&b, buf, &len), 0);
    ck_assert(h2o_memis(buf, len, H2O_STRLIT("hello")));
    len = strlen("0\r\n\r\n");
    memcpy(buf, "0\r\n\r\n", len);
    ck_assert_int_eq(gw_http1_body_decode(&b, buf, &len), 1);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(b.keepalive, 1);

    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &b), 0);
    len = strlen("zz\r\nhello\r\n");
    memcpy(buf, "zz\r\nhello\r\n", len);
    ck_assert_int_eq(gw_http1_body_decode(&b, buf, &len), -1);
    ck_assert_uint_eq(len, 0);
}
END_TEST

/* Decodes a chunked body in pieces: each of the cut points (sorted, at most
 * 2) ends one call. Returns the decoder's last result (1 complete, 0 more to
 * come, -1 broken) and the decoded body in out (NUL-terminated). */
static int decode_chunked_split(const char *text, size_t cut1, size_t cut2, char *out, size_t outsize)
{
    gw_http1_body_t b;
    char buf[256];
    size_t len = strlen(text), cuts[3] = {cut1, cut2, len}, at = 0, outlen = 0, i;
    int ret = 0;

    ck_assert_uint_lt(len, sizeof(buf));
    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &b), 0);
    for (i = 0; i != 3 && ret == 0; ++i) {
        size_t n = cuts[i] - at;
        memcpy(buf, text + at, n);
        ret = gw_http1_body_decode(&b, buf, &n);
        ck_assert_uint_le(outlen + n, outsize - 1);
        memcpy(out + outlen, buf, n);
        outlen += n;
        at = cuts[i];
    }
    out[outlen] = '\0';
    return ret;
}

/* Every body decoded in every split into one, two and three pieces (the
 * decoder keeps its state across reads: one byte at a time is among them)
 * gives the same result. */
static void check_chunked(const char *text, int want, const char *want_body)
{
    size_t len = strlen(text), i, j;
    char out[256];

    for (i = 0; i <= len; ++i) {
        for (j = i; j <= len; ++j) {
            int ret = decode_chunked_split(text, i, j, out, sizeof(out));
            ck_assert_msg(ret == want, "\"%s\" cut at %zu, %zu: %d, want %d", text, i, j, ret, want);
            if (want == 1)
                ck_assert_msg(strcmp(out, want_body) == 0, "\"%s\" cut at %zu, %zu: body \"%s\"", text, i, j, out);
        }
    }
}

/* h2o patch 0030: chunked framing as RFC 9112 7.1 writes it, from a
 * sandbox as from a client (the same picohttpparser function). */
START_TEST(test_body_decode_strict_chunks)
{
    check_chunked("5\r\nhello\r\n0\r\n\r\n", 1, "hello");
    check_chunked("5;a=b\r\nhello\r\n00A ; ext=\"q\"\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n", 1, "hello0123456789");
    check_chunked("000000000000000F\r\n0123456789abcde\r\n0\r\n\r\n", 1, "0123456789abcde");
    check_chunked("5\r\nhel", 0, NULL);
    /* "0x80" is not the last chunk, "5zz" is not 5 */
    check_chunked("0x80\r\n\r\n", -1, NULL);
    check_chunked("5zz\r\nhello\r\n0\r\n\r\n", -1, NULL);
    check_chunked("5 \r\nhello\r\n0\r\n\r\n", -1, NULL);
    check_chunked(" 5\r\nhello\r\n0\r\n\r\n", -1, NULL);
    check_chunked("+5\r\nhello\r\n0\r\n\r\n", -1, NULL);
    check_chunked("5;a\x01\r\nhello\r\n0\r\n\r\n", -1, NULL);
    /* at most 16 digits, and below 2^63 */
    check_chunked("00000000000000005\r\nhello\r\n0\r\n\r\n", -1, NULL);
    check_chunked("8000000000000000\r\nhello\r\n0\r\n\r\n", -1, NULL);
    check_chunked("7fffffffffffffff\r\nhello", 0, NULL);
    /* CR LF, never a bare CR or LF or several CRs */
    check_chunked("5\nhello\r\n0\r\n\r\n", -1, NULL);
    check_chunked("5\rhello\r\n0\r\n\r\n", -1, NULL);
    check_chunked("5\r\nhello\n0\r\n\r\n", -1, NULL);
    check_chunked("5\r\nhello\r\r\n0\r\n\r\n", -1, NULL);
    check_chunked("5\r\nhelloXY0\r\n\r\n", -1, NULL);
    check_chunked("5\r\nhello\r\n0\r\n\n", -1, NULL);
    check_chunked("5\r\nhello\r\n0\r\nX-T: 1\n\r\n", -1, NULL);
    check_chunked("5\r\nhello\r\n0\r\nX-T: \x01\r\n\r\n", -1, NULL);
}
END_TEST

/* A sandbox that flushes one byte per chunk: 40,000 chunks (200 KB of
 * framing for 40 KB of data) in reads of 4 KiB are one body, never -1
 * (master's picohttpparser guard is off for responses: upstream/http1_head.h). */
START_TEST(test_body_decode_tiny_chunks)
{
    gw_http1_body_t b;
    char buf[4096];
    size_t total = 0, i, k, n;

    ck_assert_int_eq(framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", &b), 0);
    for (i = 0; i != 40000; i += k) {
        size_t j;
        k = 40000 - i < sizeof(buf) / 6 ? 40000 - i : sizeof(buf) / 6;
        for (j = 0; j != k; ++j)
            memcpy(buf + j * 6, "1\r\nx\r\n", 6);
        n = k * 6;
        ck_assert_int_eq(gw_http1_body_decode(&b, buf, &n), 0);
        ck_assert_uint_eq(n, k);
        total += n;
    }
    n = 5;
    ck_assert_int_eq(gw_http1_body_decode(&b, memcpy(buf, "0\r\n\r\n", 5), &n), 1);
    ck_assert_uint_eq(total, 40000);
}
END_TEST

/* Connection lists split once (conn_list_t): names in any case, over
 * several fields, and more than the 16 kept split (then searched in the
 * field values), in a request and in a response */
START_TEST(test_connection_lists_many_names)
{
    char list[512] = "keep-alive";
    size_t i;

    for (i = 0; i != 20; ++i)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), ", X-N%zu", i);
    add("Connection", list);
    add("Connection", "X-Second-Field");
    add("X-N0", "a");
    add("X-N19", "b"); /* the 21st name: past the split ones */
    add("x-second-field", "c");
    add("X-Kept", "1");
    gw_http1_request_t r = request("GET");
    char *head = build(&r);
    ck_assert_msg(count_name(head, "x-n0") == 0 && count_name(head, "x-n19") == 0, "%s", head);
    ck_assert_msg(count_name(head, "x-second-field") == 0, "%s", head);
    ck_assert_msg(count_lines(head, "X-Kept: 1") == 1, "%s", head);

    gw_http1_response_t res;
    h2o_headers_t out = {NULL, 0, 0};
    const char *few = "HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: X-HOP-A,x-hop-b\r\n"
                      "X-Hop-A: 1\r\nX-HOP-B: 2\r\nX-App: 3\r\nContent-Length: 0\r\n\r\n";
    ck_assert_int_eq(parse(few, &res), GW_HTTP1_HEAD_COMPLETE);
    gw_http1_response_headers(&pool, &out, &res, 0, NULL);
    ck_assert_uint_eq(out.size, 1);
    ck_assert_int_ne(h2o_find_header_by_str(&out, H2O_STRLIT("x-app"), -1), -1);

    char many[1024];
    snprintf(many, sizeof(many), "HTTP/1.1 200 OK\r\nConnection: %s\r\nX-N19: 1\r\nX-N3: 2\r\nX-App: 3\r\n\r\n", list);
    memset(&out, 0, sizeof(out));
    ck_assert_int_eq(parse(many, &res), GW_HTTP1_HEAD_COMPLETE);
    gw_http1_response_headers(&pool, &out, &res, 0, NULL);
    ck_assert_uint_eq(out.size, 1);
    ck_assert_int_ne(h2o_find_header_by_str(&out, H2O_STRLIT("x-app"), -1), -1);
}
END_TEST

START_TEST(test_response_headers_reaching_the_client)
{
    gw_http1_response_t res;
    h2o_headers_t out = {NULL, 0, 0};
    const char *text = "HTTP/1.1 200 OK\r\n"
                       "Connection: keep-alive, X-Hop\r\n"
                       "Keep-Alive: timeout=5\r\n"
                       "Proxy-Connection: keep-alive\r\n"
                       "Trailer: X-Sum\r\n"
                       "Upgrade: h2c\r\n"
                       "X-Hop: listed\r\n"
                       "Content-Length: 2\r\n"
                       "Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
                       "Server: app/1.0\r\n"
                       "Set-Cookie: a=1\r\n"
                       "X-App: Kept\r\n"
                       "\r\n";
    size_t i;

    ck_assert_int_eq(parse(text, &res), GW_HTTP1_HEAD_COMPLETE);
    gw_http1_response_headers(&pool, &out, &res, 0, NULL);
    ck_assert_uint_eq(out.size, 3);
    ck_assert_int_ne(h2o_find_header(&out, H2O_TOKEN_SERVER, -1), -1);
    ck_assert_int_ne(h2o_find_header(&out, H2O_TOKEN_SET_COOKIE, -1), -1);
    i = (size_t)h2o_find_header_by_str(&out, H2O_STRLIT("x-app"), -1);
    ck_assert(h2o_memis(out.entries[i].value.base, out.entries[i].value.len, H2O_STRLIT("Kept")));
    ck_assert_str_eq(out.entries[i].orig_name, "X-App");

    /* with a server name configured, h2o writes Server */
    memset(&out, 0, sizeof(out));
    gw_http1_response_headers(&pool, &out, &res, 1, NULL);
    ck_assert_uint_eq(out.size, 2);
    ck_assert_int_eq(h2o_find_header(&out, H2O_TOKEN_SERVER, -1), -1);
}
END_TEST

START_TEST(test_response_headers_through_a_view)
{
    static char *domains[] = {"lizard.app"};
    static const gw_cookie_rules_t rules = {domains, 1, "__Host-lizard_access"};
    gw_address_view_t view;
    gw_http1_response_t res;
    h2o_headers_t out = {NULL, 0, 0};
    const char *text = "HTTP/1.1 302 Found\r\n"
                       "location: http://localhost:5000/next\r\n"
                       "Set-Cookie: __Host-lizard_access=forged; Path=/\r\n"
                       "Set-Cookie: s=1; Domain=localhost; Path=/\r\n"
                       "Set-Cookie: t=2; Domain=lizard.app\r\n"
                       "Access-Control-Allow-Origin: http://localhost:5000\r\n"
                       "Content-Length: 0\r\n"
                       "\r\n";
    ssize_t i = -1;

    ck_assert_int_eq(parse(text, &res), GW_HTTP1_HEAD_COMPLETE);
    gw_address_view_init(&view, &pool, h2o_iovec_init(H2O_STRLIT("3000-sbx1.lizard.app")), 5000, &rules);
    gw_http1_response_headers(&pool, &out, &res, 0, &view);
    ck_assert_uint_eq(out.size, 4);
    i = h2o_find_header(&out, H2O_TOKEN_LOCATION, -1);
    ck_assert(h2o_memis(out.entries[i].value.base, out.entries[i].value.len, H2O_STRLIT("https://3000-sbx1.lizard.app/next")));
    ck_assert_str_eq(out.entries[i].orig_name, "location");
    i = h2o_find_header(&out, H2O_TOKEN_SET_COOKIE, -1);
    ck_assert(h2o_memis(out.entries[i].value.base, out.entries[i].value.len, H2O_STRLIT("s=1; Path=/")));
    i = h2o_find_header(&out, H2O_TOKEN_SET_COOKIE, i);
    ck_assert(h2o_memis(out.entries[i].value.base, out.entries[i].value.len, H2O_STRLIT("t=2")));
    i = h2o_find_header(&out, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, -1);
    ck_assert(h2o_memis(out.entries[i].value.base, out.entries[i].value.len, H2O_STRLIT("https://3000-sbx1.lizard.app")));

    /* preserve mode: only the cookie rules */
    memset(&out, 0, sizeof(out));
    gw_address_view_init(&view, &pool, h2o_iovec_init(H2O_STRLIT("3000-sbx1.lizard.app")), 0, &rules);
    gw_http1_response_headers(&pool, &out, &res, 0, &view);
    ck_assert_uint_eq(out.size, 4);
    i = h2o_find_header(&out, H2O_TOKEN_LOCATION, -1);
    ck_assert(h2o_memis(out.entries[i].value.base, out.entries[i].value.len, H2O_STRLIT("http://localhost:5000/next")));
    i = h2o_find_header(&out, H2O_TOKEN_SET_COOKIE, -1);
    ck_assert(h2o_memis(out.entries[i].value.base, out.entries[i].value.len, H2O_STRLIT("s=1; Domain=localhost; Path=/")));
    i = h2o_find_header(&out, H2O_TOKEN_SET_COOKIE, i);
    ck_assert(h2o_memis(out.entries[i].value.base, out.entries[i].value.len, H2O_STRLIT("t=2")));
}
END_TEST

/* --- attacker bytes --------------------------------------------------------- */

/* A parse of `len` bytes read into an exact-size buffer (ASan sees any read
 * past them), its strings kept as offsets so that two parses compare. */
typedef struct {
    gw_http1_head_result_t result;
    int minor_version, status;
    size_t size, num_headers, reason[2], names[GW_HTTP1_MAX_RESPONSE_HEADERS][2], values[GW_HTTP1_MAX_RESPONSE_HEADERS][2];
} head_view_t;

static head_view_t parse_exact(const char *text, size_t len)
{
    char *buf = calloc(1, len);
    gw_http1_response_t res;
    head_view_t v;
    size_t i;

    memcpy(buf, text, len);
    memset(&v, 0, sizeof(v));
    v.result = gw_http1_response_parse(buf, len, &res);
    if (v.result == GW_HTTP1_HEAD_COMPLETE) {
        ck_assert_uint_le(res.size, len);
        v.minor_version = res.minor_version;
        v.status = res.status;
        v.size = res.size;
        v.num_headers = res.num_headers;
        v.reason[0] = (size_t)(res.reason.base - buf);
        v.reason[1] = res.reason.len;
        ck_assert_uint_le(v.reason[0] + v.reason[1], res.size);
        for (i = 0; i != res.num_headers; ++i) {
            v.names[i][0] = (size_t)(res.headers[i].name - buf);
            v.names[i][1] = res.headers[i].name_len;
            v.values[i][0] = (size_t)(res.headers[i].value - buf);
            v.values[i][1] = res.headers[i].value_len;
            ck_assert_uint_le(v.values[i][0] + v.values[i][1], res.size);
        }
    }
    free(buf);
    return v;
}

static void assert_same_head(const head_view_t *a, const head_view_t *b)
{
    size_t i;

    ck_assert_int_eq(a->result, b->result);
    ck_assert_int_eq(a->minor_version, b->minor_version);
    ck_assert_int_eq(a->status, b->status);
    ck_assert_uint_eq(a->size, b->size);
    ck_assert_uint_eq(a->num_headers, b->num_headers);
    ck_assert_int_eq(memcmp(a->reason, b->reason, sizeof(a->reason)), 0);
    for (i = 0; i != a->num_headers; ++i) {
        ck_assert_int_eq(memcmp(a->names[i], b->names[i], sizeof(a->names[i])), 0);
        ck_assert_int_eq(memcmp(a->values[i], b->values[i], sizeof(a->values[i])), 0);
    }
}

/* What the proxy does with a head arriving in reads (upstream/proxy.c):
 * parse what has arrived so far after each read. Every cut before the
 * head's end must leave it partial; the read that completes it must give
 * what one read gives. */
static void check_reads(const char *text, size_t len, const size_t *cuts, size_t num_cuts, const head_view_t *whole)
{
    size_t i;

    for (i = 0; i != num_cuts; ++i) {
        head_view_t v = parse_exact(text, cuts[i]);
        if (cuts[i] < whole->size)
            ck_assert_msg(v.result == GW_HTTP1_HEAD_PARTIAL, "cut at %zu of %zu: %d", cuts[i], len, (int)v.result);
        else
            assert_same_head(&v, whole);
    }
    head_view_t last = parse_exact(text, len);
    assert_same_head(&last, whole);
}

START_TEST(test_response_head_in_every_split)
{
    static const char *heads[] = {
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nSet-Cookie: a=b\r\nContent-Length: 5\r\n\r\nhello",
        "HTTP/1.0 404 \r\nX:\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello",
        "HTTP/1.1 204 No Content\nServer: x\n\n",
    };
    size_t h, i;

    for (h = 0; h != sizeof(heads) / sizeof(heads[0]); ++h) {
        size_t len = strlen(heads[h]);
        head_view_t whole = parse_exact(heads[h], len);
        ck_assert_int_eq(whole.result, GW_HTTP1_HEAD_COMPLETE);
        /* The parser keeps nothing between reads: after each one it parses
         * all that has arrived (upstream/proxy.c). So a split into any
         * number of reads is a sequence of these prefixes, one byte at a
         * time being all of them: every split is covered. */
        for (i = 1; i < len; ++i)
            check_reads(heads[h], len, &i, 1, &whole);
        /* and the reads of two splits spelled out */
        {
            size_t cuts[3] = {1, whole.size - 1, whole.size};
            check_reads(heads[h], len, cuts, 3, &whole);
        }
    }
}
END_TEST

static void parse_any(const char *buf, size_t len, void *data)
{
    gw_http1_response_t res;
    gw_http1_body_t body;

    (void)data;
    if (gw_http1_response_parse(buf, len, &res) == GW_HTTP1_HEAD_COMPLETE) {
        ck_assert_uint_le(res.size, len);
        ck_assert(res.status >= 100 && res.status <= 599);
        (void)gw_http1_response_framing(&res, &body, NULL);
    }
}

START_TEST(test_response_head_mutations)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close, x\r\nContent-Length: 5\r\n\r\n";

    gw_bytes_each_prefix(head, sizeof(head) - 1, parse_any, NULL);
    gw_bytes_each_mutation(head, sizeof(head) - 1, parse_any, NULL);
}
END_TEST

/* bad_upstream_response quotes the app's first bytes: escaped, at most 64, bounded by the buffer */
START_TEST(test_quote)
{
    char buf[512], small[24];
    static const char h2_settings[] = "\x00\x00\x12\x04\x00\x00\x00\x00\x00";
    char many[100];

    ck_assert_uint_eq(gw_http1_quote(buf, sizeof(buf), H2O_STRLIT("Unauthorized\r\n")), strlen(buf));
    ck_assert_str_eq(buf, " It sent: \"Unauthorized\\r\\n\"");
    gw_http1_quote(buf, sizeof(buf), h2_settings, sizeof(h2_settings) - 1);
    ck_assert_str_eq(buf, " It sent: \"\\x00\\x00\\x12\\x04\\x00\\x00\\x00\\x00\\x00\"");
    gw_http1_quote(buf, sizeof(buf), H2O_STRLIT("a\"b\\c\xff"));
    ck_assert_str_eq(buf, " It sent: \"a\\\"b\\\\c\\xff\"");
    memset(many, 'x', sizeof(many));
    gw_http1_quote(buf, sizeof(buf), many, sizeof(many));
    ck_assert_uint_eq(strlen(buf), strlen(" It sent: \"") + 64 + strlen("...\""));
    /* a small buffer: cut, still closed and terminated */
    ck_assert_uint_eq(gw_http1_quote(small, sizeof(small), many, sizeof(many)), strlen(small));
    ck_assert_uint_lt(strlen(small), sizeof(small));
    ck_assert(strcmp(small + strlen(small) - 4, "...\"") == 0);
    ck_assert_uint_eq(gw_http1_quote(small, 8, many, sizeof(many)), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http1_head");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_request_line_and_end_to_end_headers);
    tcase_add_test(tc, test_hop_by_hop_headers_are_not_forwarded);
    tcase_add_test(tc, test_connection_lists_many_names);
    tcase_add_test(tc, test_forwarded_headers_are_the_gateways);
    tcase_add_test(tc, test_lizard_headers_are_not_forwarded);
    tcase_add_test(tc, test_underscores_and_real_ip_are_not_forwarded);
    tcase_add_test(tc, test_host_preserved_or_localhost);
    tcase_add_test(tc, test_cookies_become_one_header);
    tcase_add_test(tc, test_content_length);
    tcase_add_test(tc, test_streaming_body_framing);
    tcase_add_test(tc, test_websocket_upgrade);
    tcase_add_test(tc, test_response_parse);
    tcase_add_test(tc, test_response_head_size_bound);
    tcase_add_test(tc, test_response_framing);
    tcase_add_test(tc, test_untrusted_response_heads);
    tcase_add_test(tc, test_body_decode);
    tcase_add_test(tc, test_body_decode_strict_chunks);
    tcase_add_test(tc, test_body_decode_tiny_chunks);
    tcase_add_test(tc, test_response_headers_reaching_the_client);
    tcase_add_test(tc, test_response_headers_through_a_view);
    tcase_add_test(tc, test_quote);
    suite_add_tcase(s, tc);
    TCase *bytes = tcase_create("bytes");
    /* thousands of parses each, under ASan on a loaded machine: not a time bound, just room */
    tcase_set_timeout(bytes, 120);
    tcase_add_checked_fixture(bytes, setup, teardown);
    tcase_add_test(bytes, test_response_head_in_every_split);
    tcase_add_test(bytes, test_response_head_mutations);
    suite_add_tcase(s, bytes);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
