/*
 * The HTTP/1.1 messages exchanged with a sandbox, as pure functions (no
 * event loop, no socket): the request head sent upstream, and the checks and
 * framing of the response head and body read back.
 */
#ifndef GW_UPSTREAM_HTTP1_HEAD_H
#define GW_UPSTREAM_HTTP1_HEAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <h2o.h>
#include "upstream/address_view.h"

/* h2o's own (vendored, on the include path) */
#include <picohttpparser.h>
/* h2o's picohttpparser fails a chunked body once 100 KiB of framing carried under a quarter of payload (PR #3338). It
 * stays on for client request bodies; a sandbox's response is decoded without it (an app that flushes a byte at a
 * time is served, not cut: docs/security.md). Reset before each decode, so only one read carrying 100 KiB of such
 * framing could still trip it. */
#define GW_PHR_CHUNKED_GUARD_OFF(d) ((d)->_total_read = 0, (d)->_total_overhead = 0)

/* An upstream response head larger than this is refused (502). */
#define GW_HTTP1_MAX_RESPONSE_HEAD_BYTES (64 * 1024)
#define GW_HTTP1_MAX_RESPONSE_HEADERS 100

/* What the request head is built from. */
typedef struct st_gw_http1_request_t {
    h2o_iovec_t method;
    h2o_iovec_t path;             /* origin-form target, credentials already removed */
    h2o_iovec_t authority;        /* the client's Host (or :authority): forwarded as Host, and as X-Forwarded-Host */
    h2o_iovec_t scheme;           /* "https" or "http": X-Forwarded-Proto */
    const h2o_headers_t *headers; /* the client's headers */
    h2o_iovec_t body;             /* base NULL: the request has no body (or it streams) */
    int body_streams;             /* the body streams (upstream/request_body.h): content_length, else chunked */
    size_t content_length;        /* with body_streams: the client's declared length; SIZE_MAX: none */
    h2o_iovec_t client_addr;      /* X-Forwarded-For; len 0: unknown, not sent */
    int32_t client_port;          /* the port the client connected to (X-Forwarded-Port); <= 0: not sent */
    uint16_t localhost_port;      /* not 0: Host is "localhost:<port>" instead of authority (upstream.host_header) */
    int websocket;                /* asks for the WebSocket upgrade instead of keep-alive */
} gw_http1_request_t;

/* The request head, from pool. Hop-by-hop headers (and those the client's
 * Connection lists), Host, Content-Length, Expect, Forwarded, X-Forwarded-*,
 * X-Real-IP, X-Lizard-* and any name with an underscore of the client are
 * not forwarded; cookies go in one Cookie
 * header; Host, X-Forwarded-*, Content-Length (with a body, and for POST and
 * PUT; Transfer-Encoding: chunked for a streaming body of unknown length)
 * and Connection are the gateway's. The request line is written as
 * given: the caller has checked it (upstream/request_line.h). */
h2o_iovec_t gw_http1_request_head(h2o_mem_pool_t *pool, const gw_http1_request_t *r);

typedef enum {
    GW_HTTP1_HEAD_COMPLETE = 0,
    GW_HTTP1_HEAD_PARTIAL,   /* more bytes are needed */
    GW_HTTP1_HEAD_INVALID,   /* not an HTTP/1.x response head */
    GW_HTTP1_HEAD_TOO_LARGE, /* over GW_HTTP1_MAX_RESPONSE_HEAD_BYTES */
} gw_http1_head_result_t;

/* A response head; its strings point into the bytes it was parsed from. */
typedef struct st_gw_http1_response_t {
    int minor_version;
    int status; /* 100 to 599 */
    h2o_iovec_t reason;
    struct phr_header headers[GW_HTTP1_MAX_RESPONSE_HEADERS];
    size_t num_headers;
    size_t size; /* bytes of the head */
} gw_http1_response_t;

/* Parses the head at the start of buf (an interim 1xx head too: the caller
 * skips those). */
gw_http1_head_result_t gw_http1_response_parse(const char *buf, size_t len, gw_http1_response_t *res);

typedef enum { GW_HTTP1_LENGTH = 0, GW_HTTP1_CHUNKED, GW_HTTP1_UNTIL_CLOSE } gw_http1_framing_t;

/* How a response body ends, and whether the connection may serve another
 * request after it. */
typedef struct st_gw_http1_body_t {
    gw_http1_framing_t framing;
    size_t content_length; /* as announced; SIZE_MAX: none (or chunked) */
    size_t bytes_left;     /* GW_HTTP1_LENGTH */
    int keepalive;
    struct phr_chunked_decoder chunked;
} gw_http1_body_t;

/* Reads what a final response head says about its body and the connection
 * into *body. Returns 0, or -1 when the head cannot be trusted: an obs-fold
 * line (RFC 9112 5.2 lets a gateway answer 502), a transfer coding other
 * than chunked, or two different Content-Length values; then *why (when
 * why is not NULL) is a static sentence saying which, for the 502. */
int gw_http1_response_framing(const gw_http1_response_t *res, gw_http1_body_t *body, const char **why);

/* Decodes in place the *len bytes of body at buf that just arrived, and sets
 * *len to the body bytes they hold (framing removed, bytes past the end
 * dropped: then body->keepalive is 0). Returns 1 when the body is complete,
 * 0 when more is to come, -1 when the framing is broken (*len is then 0). */
int gw_http1_body_decode(gw_http1_body_t *body, char *buf, size_t *len);

/* Copies the end-to-end headers of res into out (strings from pool, names
 * lowercased, the original case kept as orig_name): hop-by-hop headers and
 * those res's Connection lists are dropped, and so are Content-Length and
 * Date (h2o writes its own) and, when drop_server, Server. With a view,
 * Set-Cookie and (localhost mode) the headers naming the app's own address
 * are rewritten or dropped as gw_address_view_response_header says; NULL:
 * none is. */
void gw_http1_response_headers(h2o_mem_pool_t *pool, h2o_headers_t *out, const gw_http1_response_t *res, int drop_server,
                               const gw_address_view_t *view);

/* A CORS preflight cannot carry the token, so the app's answer does not
 * list the token header; when the app's answer (in req->res) allows the
 * request's origin, x-lizard-access-token is added to
 * Access-Control-Allow-Headers. */
void gw_http1_allow_token_header(h2o_req_t *req);

/* At most this many bytes of an answer are quoted by gw_http1_quote. */
#define GW_HTTP1_QUOTE_BYTES 64

/* Writes ` It sent: "<the first GW_HTTP1_QUOTE_BYTES of bytes, escaped>"`
 * (with "..." when there were more) into buf, NUL-terminated: for the
 * message of a bad_upstream_response. Returns the length, 0 (nothing
 * written) when bufsize is too small for any of it. */
size_t gw_http1_quote(char *buf, size_t bufsize, const char *bytes, size_t len);

#endif
