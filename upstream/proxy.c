/*
 * The upstream path, in place of libh2o 2.2.5's proxy (which reads a slow
 * client's response into memory and temp files without bound): one HTTP/1.1
 * exchange per request over a pooled keep-alive connection, the response
 * streamed with at most limits.response_buffer_bytes held, WebSocket
 * upgrades handed to a tunnel.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <h2o.h>
#include <h2o/http1.h>
#include <h2o/http2.h>
#include <h2o/http2_internal.h>
#include "khash.h"
#include "gateway/errors.h"
#include "upstream/proxy.h"
#include "gateway/request_line.h"
#include "upstream/tunnel.h"
#include "upstream/upstream_pool.h"

/* picohttpparser is built into libh2o and exported by it, but Debian does
 * not install its header; these match deps/picohttpparser/picohttpparser.h
 * of h2o 2.2.5. */
struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
struct phr_chunked_decoder {
    size_t bytes_left_in_chunk;
    char consume_trailer;
    char _hex_count;
    char _state;
};
int phr_parse_response(const char *buf, size_t len, int *minor_version, int *status, const char **msg, size_t *msg_len,
                       struct phr_header *headers, size_t *num_headers, size_t last_len);
ssize_t phr_decode_chunked(struct phr_chunked_decoder *decoder, char *buf, size_t *bufsz);

/* An upstream response head larger than this is refused (502). */
#define MAX_RESPONSE_HEAD_BYTES (64 * 1024)
#define MAX_RESPONSE_HEADERS 100
/* The request body goes upstream in slices of this size, so that a slow
 * upload is told apart from a stalled one (each slice restarts the timer). */
#define REQUEST_BODY_SLICE (256 * 1024)
/* At most this much of the response is handed to h2o per h2o_send: it bounds
 * the copy a TLS socket makes while encrypting. */
#define SEND_CHUNK_BYTES (128 * 1024)
/* What is handed to h2o for an HTTP/2 stream without flow-control credit:
 * it goes out when the client opens its window (h2o then calls proceed). */
#define STALLED_SEND_BYTES (16 * 1024)
/* Bounds of the upstream sockets' kernel receive buffer (see gw_proxy_new). */
#define MIN_UPSTREAM_RCVBUF (4 * 1024)
#define MAX_UPSTREAM_RCVBUF (2 * 1024 * 1024)
/* config.c refuses more (see GW_MAX_RESPONSE_BUFFER_BYTES); kept as a bound here too */
#define MAX_HELD_BYTES GW_MAX_RESPONSE_BUFFER_BYTES

#define DETAIL_CLOSED "It accepted the connection but closed it without answering."
#define DETAIL_NOT_HTTP "The app answered something that is not HTTP/1.x."
#define DETAIL_CLOSED_IN_HEAD "The app closed the connection in the middle of its response head."
#define DETAIL_HEAD_TOO_LARGE "The app's response head is larger than 64 KiB."
#define DETAIL_CONNECT_TIMEOUT "Connecting to it timed out."
#define DETAIL_FIRST_BYTE_TIMEOUT "It accepted the request but did not start answering in time."

/* response bytes held per client connection (h2o_conn_t *), entries with 0 removed */
KHASH_MAP_INIT_INT64(gw_conn_held, size_t)

typedef struct st_opt_timeout_t {
    int enabled;
    h2o_timeout_t timeout;
} opt_timeout_t;

struct st_gw_proxy_t {
    h2o_context_t *ctx;
    const gw_config_t *config;
    gw_upstream_pool_t *pool;
    opt_timeout_t connect_timeout;
    opt_timeout_t first_byte_timeout;
    opt_timeout_t io_timeout; /* upstream.idle_timeout_ms, while a body is read */
    opt_timeout_t websocket_timeout;
    opt_timeout_t client_stall_timeout; /* limits.client_stall_timeout_ms, while an h2o_send waits for proceed */
    int rcvbuf;                         /* SO_RCVBUF of upstream sockets */
    size_t read_pause_at;               /* response bytes held at which the upstream is no longer read */
    h2o_linklist_t websockets;          /* of websocket_t */
    /* memory budgets: what every response of this worker holds, and per
     * client connection; the exchanges with a send in flight toward the
     * client, the longest-waiting first (the first reset over a budget) */
    size_t held;
    khash_t(gw_conn_held) * conn_held;
    h2o_linklist_t waiting; /* of exchange_t.waiting */
    gw_proxy_bytes_t total;
    gw_proxy_bytes_cb bytes_cb;
    void *bytes_cb_data;
    gw_proxy_counters_t *counters; /* NULL: not counted */
    gw_revocation_t *revocation;   /* NULL: exchanges and tunnels are not revocable */
};

#define COUNT(p, field, n)                                                                                                         \
    do {                                                                                                                           \
        if ((p)->counters != NULL)                                                                                                 \
            atomic_fetch_add_explicit(&(p)->counters->field, (n), memory_order_relaxed);                                           \
    } while (0)

typedef enum en_exchange_state_t {
    EX_CONNECTING = 0, /* a fresh connection is being established */
    EX_AWAIT_HEAD,     /* the request is being written and/or the response head read */
    EX_BODY,           /* the response has started; the body streams */
    EX_OVER            /* answered, failed, upgraded, or the client went away */
} exchange_state_t;

typedef enum en_body_framing_t { FRAMING_LENGTH = 0, FRAMING_CHUNKED, FRAMING_UNTIL_CLOSE } body_framing_t;

/* Per-request state, in req->pool (h2o_mem_alloc_shared): under HTTP/2 the
 * request may be disposed at any moment, and dispose detaches everything. */
typedef struct st_exchange_t {
    h2o_generator_t super; /* first: h2o hands it back to proceed/stop */
    gw_proxy_t *proxy;
    h2o_req_t *req;
    exchange_state_t state;

    /* the target, copied into req->pool */
    char *sandbox_id;
    h2o_iovec_t lifecycle;
    uint16_t port;
    gw_netaddr_t addr;
    h2o_iovec_t path;
    uint16_t client_port; /* 0: unknown, ask the socket */

    unsigned is_head : 1;
    unsigned is_idempotent : 1;
    unsigned is_websocket : 1;
    unsigned reused : 1;  /* sock came from the pool */
    unsigned retried : 1; /* one retry on a fresh connection has been made */
    unsigned cors_preflight : 1;
    unsigned cut : 1;             /* reset_exchange ran: what it still holds goes when h2o closes the connection */
    gw_conn_limit_t *slot;        /* the sandbox's connection slot, given back at dispose; NULL: none */
    gw_conn_limit_t *client_slot; /* the client address's slot (client_addr), given back with slot; NULL: none */
    char *client_addr;
    gw_revocable_t revocable; /* grant.record retained; NULL: not revocable */

    h2o_socket_t *sock; /* NULL once released, closed or handed over */
    h2o_timeout_entry_t timer;
    h2o_timeout_entry_t stall_timer; /* linked while a send toward the client is in flight */
    h2o_linklist_t waiting;          /* in proxy->waiting while a send toward the client is in flight */
    size_t held;                     /* response bytes of this exchange counted in proxy->held */

    struct {
        h2o_iovec_t head;
        size_t body_written;
        size_t body_inflight;
        unsigned head_written : 1;
        unsigned done : 1;   /* everything written, or the write failed */
        unsigned failed : 1; /* a write failed: the connection is not reusable */
    } up_req;

    struct {
        unsigned got_byte : 1;  /* any byte of a response arrived on this connection */
        unsigned keepalive : 1; /* the connection may serve another request afterwards */
        unsigned read_paused : 1;
        unsigned body_error : 1;
        unsigned sending : 1;        /* an h2o_send is in flight; waiting for proceed */
        unsigned started : 1;        /* h2o_send has been called once (the head is out) */
        unsigned encode_chunked : 1; /* HTTP/1.1 client, length unknown: chunked here, not by h2o's filter */
        size_t unbilled;             /* bytes of the h2o_send in flight: billed when h2o reports them written (proceed) */
        body_framing_t framing;
        size_t bytes_left; /* FRAMING_LENGTH */
        struct phr_chunked_decoder chunked;
    } res;

    /* body bytes not yet handed to h2o once the upstream is released */
    h2o_buffer_t *rest;
    h2o_doublebuffer_t sending;
    char chunk_head[sizeof("ffffffffffffffff\r\n")];
} exchange_t;

/* A WebSocket exchange after the upgrade; outlives its request. */
typedef struct st_websocket_t {
    h2o_linklist_t link; /* in proxy->websockets */
    gw_proxy_t *proxy;
    char *sandbox_id;
    gw_tunnel_t *tunnel;
    gw_conn_limit_t *slot;        /* the connection slot the tunnel holds, NULL: none */
    gw_conn_limit_t *client_slot; /* the client address's slot the tunnel holds, NULL: none */
    char *client_addr;
    size_t head_bytes;        /* of the 101, billed once it is written */
    gw_revocable_t revocable; /* taken over from the exchange */
} websocket_t;

static void on_head_read(h2o_socket_t *sock, const char *err);
static void on_body_read(h2o_socket_t *sock, const char *err);
static void on_io_timeout(h2o_timeout_entry_t *entry);
static void connect_fresh(exchange_t *ex);

/* --- small helpers ------------------------------------------------------- */

static void opt_timeout_init(h2o_loop_t *loop, opt_timeout_t *t, uint64_t ms)
{
    t->enabled = ms != 0;
    if (t->enabled)
        h2o_timeout_init(loop, &t->timeout, ms);
}

static void opt_timeout_dispose(h2o_loop_t *loop, opt_timeout_t *t)
{
    if (t->enabled)
        h2o_timeout_dispose(loop, &t->timeout);
}

static void clear_timer(exchange_t *ex)
{
    if (h2o_timeout_is_linked(&ex->timer))
        h2o_timeout_unlink(&ex->timer);
}

static void set_timer(exchange_t *ex, opt_timeout_t *t, h2o_timeout_cb cb)
{
    clear_timer(ex);
    if (!t->enabled)
        return;
    ex->timer.cb = cb;
    h2o_timeout_link(ex->proxy->ctx->loop, &t->timeout, &ex->timer);
}

static void add_bytes(gw_proxy_t *p, const char *sandbox_id, uint64_t egress, uint64_t ingress)
{
    gw_proxy_bytes_t delta = {egress, ingress};

    if (egress == 0 && ingress == 0)
        return;
    p->total.egress += egress;
    p->total.ingress += ingress;
    COUNT(p, egress_bytes, egress);
    COUNT(p, ingress_bytes, ingress);
    if (p->bytes_cb != NULL)
        p->bytes_cb(p->bytes_cb_data, sandbox_id, &delta);
}

/* Brings ex->held (and the worker's and the connection's sums) up to date
 * with the response bytes the exchange holds now. */
static void account(exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    size_t now = ex->cut ? 0 : ex->rest->size + ex->sending.buf->size + (ex->sock != NULL ? ex->sock->input->size : 0);
    uint64_t key = (uint64_t)(uintptr_t)ex->req->conn;
    khiter_t it;
    int ret;

    if (now == ex->held)
        return;
    p->held = p->held - ex->held + now;
    it = kh_put(gw_conn_held, p->conn_held, key, &ret);
    if (ret != 0)
        kh_val(p->conn_held, it) = 0;
    kh_val(p->conn_held, it) = kh_val(p->conn_held, it) - ex->held + now;
    if (kh_val(p->conn_held, it) == 0)
        kh_del(gw_conn_held, p->conn_held, it);
    ex->held = now;
}

static size_t conn_held(gw_proxy_t *p, h2o_conn_t *conn)
{
    khiter_t it = kh_get(gw_conn_held, p->conn_held, (uint64_t)(uintptr_t)conn);
    return it == kh_end(p->conn_held) ? 0 : kh_val(p->conn_held, it);
}

/* Gives back the sandbox's and the client address's slots, once. */
static void release_slots(exchange_t *ex)
{
    if (ex->slot != NULL) {
        gw_conn_limit_release(ex->slot, ex->sandbox_id);
        ex->slot = NULL;
    }
    if (ex->client_slot != NULL) {
        gw_conn_limit_release(ex->client_slot, ex->client_addr);
        ex->client_slot = NULL;
    }
}

static gw_upstream_key_t pool_key(exchange_t *ex)
{
    gw_upstream_key_t key = {ex->sandbox_id, ex->lifecycle, ex->port, &ex->addr};
    return key;
}

static int name_is(const h2o_iovec_t *name, const char *lc, size_t lclen)
{
    return h2o_lcstris(name->base, name->len, lc, lclen);
}

static int name_has_prefix(const h2o_iovec_t *name, const char *lc, size_t lclen)
{
    return name->len >= lclen && h2o_lcstris(name->base, lclen, lc, lclen);
}

/* 1 when `name` is listed in any of the Connection header values. */
static int listed_in_connection(const h2o_iovec_t *values, size_t n, const char *name, size_t len)
{
    char lc[128];
    size_t i;

    /* h2o_contains_token lowercases the haystack only */
    if (len > sizeof(lc))
        return 0;
    memcpy(lc, name, len);
    h2o_strtolower(lc, len);
    for (i = 0; i != n; ++i)
        if (h2o_contains_token(values[i].base, values[i].len, lc, len, ','))
            return 1;
    return 0;
}

/* Upper bound of the HTTP/1 head h2o writes for the response (metering). */
static size_t response_head_size(h2o_req_t *req)
{
    size_t n = sizeof("HTTP/1.1 200 \r\n") - 1 + strlen(req->res.reason) + 2, i;
    for (i = 0; i != req->res.headers.size; ++i)
        n += req->res.headers.entries[i].name->len + req->res.headers.entries[i].value.len + 4;
    return n;
}

/* Size of the request as the client sent it, approximated as HTTP/1.1 (metering). */
static size_t request_size(h2o_req_t *req)
{
    size_t n = req->method.len + 1 + req->path.len + sizeof(" HTTP/1.1\r\nhost: \r\n") - 1 + req->authority.len + 2, i;
    for (i = 0; i != req->headers.size; ++i)
        n += req->headers.entries[i].name->len + req->headers.entries[i].value.len + 4;
    return n + req->entity.len;
}

/* --- the request to the upstream ---------------------------------------- */

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

/* The client's address as text; IPv4-mapped IPv6 addresses as IPv4.
 * Returns the length, or 0 when unknown. */
static size_t client_address(h2o_req_t *req, char *buf, size_t bufsize)
{
    struct sockaddr_storage ss;
    socklen_t len;

    if (req->conn->callbacks->get_peername == NULL || (len = req->conn->callbacks->get_peername(req->conn, (void *)&ss)) == 0)
        return 0;
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *sin6 = (void *)&ss;
        if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
            if (inet_ntop(AF_INET, &sin6->sin6_addr.s6_addr[12], buf, bufsize) == NULL)
                return 0;
            return strlen(buf);
        }
    }
    if (bufsize < NI_MAXHOST)
        return 0;
    size_t n = h2o_socket_getnumerichost((void *)&ss, len, buf);
    return n == SIZE_MAX ? 0 : n;
}

/* The port the client connected to, or -1. */
static int32_t local_port(h2o_req_t *req)
{
    struct sockaddr_storage ss;

    if (req->conn->callbacks->get_sockname == NULL || req->conn->callbacks->get_sockname(req->conn, (void *)&ss) == 0)
        return -1;
    return h2o_socket_getport((void *)&ss);
}

static int request_header_is_forwarded(const h2o_header_t *h, const h2o_iovec_t *conn_values, size_t num_conn_values)
{
    const h2o_iovec_t *name = h->name;

    if (h2o_iovec_is_token(name)) {
        const h2o_token_t *t = H2O_STRUCT_FROM_MEMBER(h2o_token_t, buf, name);
        if (t == H2O_TOKEN_CONNECTION || t == H2O_TOKEN_KEEP_ALIVE || t == H2O_TOKEN_TE || t == H2O_TOKEN_TRANSFER_ENCODING ||
            t == H2O_TOKEN_UPGRADE || t == H2O_TOKEN_HTTP2_SETTINGS || t == H2O_TOKEN_HOST || t == H2O_TOKEN_CONTENT_LENGTH ||
            t == H2O_TOKEN_EXPECT || t == H2O_TOKEN_COOKIE)
            return 0;
    }
    if (name_is(name, H2O_STRLIT("proxy-connection")) || name_is(name, H2O_STRLIT("trailer")) ||
        name_is(name, H2O_STRLIT("forwarded")) || name_has_prefix(name, H2O_STRLIT("x-forwarded-")) ||
        name_has_prefix(name, H2O_STRLIT("x-lizard-")))
        return 0;
    return !listed_in_connection(conn_values, num_conn_values, name->base, name->len);
}

static h2o_iovec_t build_request_head(exchange_t *ex)
{
    h2o_req_t *req = ex->req;
    const gw_config_t *config = ex->proxy->config;
    h2o_iovec_t *conn_values = h2o_mem_alloc_pool(&req->pool, sizeof(*conn_values) * (req->headers.size + 1));
    size_t num_conn_values = 0, cookie_len = 0, num_cookies = 0, i;
    char client_ip[NI_MAXHOST], host_buf[sizeof("localhost:65535")], num_buf[32];
    size_t client_ip_len = client_address(req, client_ip, sizeof(client_ip));
    int32_t port = ex->client_port != 0 ? ex->client_port : local_port(req);
    h2o_iovec_t host;
    head_buf_t hb = {NULL, 0, 0};

    for (i = 0; i != req->headers.size; ++i)
        if (req->headers.entries[i].name == &H2O_TOKEN_CONNECTION->buf)
            conn_values[num_conn_values++] = req->headers.entries[i].value;

    if (config->upstream.host_header == GW_HOST_HEADER_LOCALHOST) {
        int n = snprintf(host_buf, sizeof(host_buf), "localhost:%u", (unsigned)ex->port);
        host = h2o_iovec_init(host_buf, (size_t)n);
    } else {
        host = req->authority;
    }

    /* pass 1: the size */
    hb.capacity = req->method.len + 1 + ex->path.len + sizeof(" HTTP/1.1\r\n") - 1;
    hb.capacity += sizeof("host: \r\n") - 1 + host.len;
    for (i = 0; i != req->headers.size; ++i) {
        const h2o_header_t *h = req->headers.entries + i;
        if (h->name == &H2O_TOKEN_COOKIE->buf) {
            cookie_len += h->value.len + 2;
            ++num_cookies;
        } else if (request_header_is_forwarded(h, conn_values, num_conn_values)) {
            hb.capacity += h->name->len + h->value.len + 4;
        }
    }
    hb.capacity += sizeof("cookie: \r\n") - 1 + cookie_len;
    hb.capacity += sizeof("x-forwarded-for: \r\n") - 1 + client_ip_len;
    hb.capacity += sizeof("x-forwarded-proto: \r\n") - 1 + req->scheme->name.len;
    hb.capacity += sizeof("x-forwarded-host: \r\n") - 1 + req->authority.len;
    hb.capacity += sizeof("x-forwarded-port: 65535\r\n") - 1;
    hb.capacity += sizeof("content-length: 18446744073709551615\r\n") - 1;
    hb.capacity += sizeof("connection: upgrade\r\nupgrade: websocket\r\n\r\n") - 1;
    hb.base = h2o_mem_alloc_pool(&req->pool, hb.capacity);

    /* pass 2: the text */
    hb_append(&hb, req->method.base, req->method.len);
    HB_LIT(&hb, " ");
    hb_append(&hb, ex->path.base, ex->path.len);
    HB_LIT(&hb, " HTTP/1.1\r\n");
    hb_header(&hb, H2O_STRLIT("host"), host.base, host.len);
    for (i = 0; i != req->headers.size; ++i) {
        const h2o_header_t *h = req->headers.entries + i;
        if (h->name != &H2O_TOKEN_COOKIE->buf && request_header_is_forwarded(h, conn_values, num_conn_values))
            hb_header(&hb, h->orig_name != NULL ? h->orig_name : h->name->base, h->name->len, h->value.base, h->value.len);
    }
    if (num_cookies != 0) {
        /* HTTP/2 splits cookies into fields; HTTP/1 wants one (RFC 6265 5.4) */
        size_t seen = 0;
        HB_LIT(&hb, "cookie: ");
        for (i = 0; i != req->headers.size; ++i) {
            const h2o_header_t *h = req->headers.entries + i;
            if (h->name != &H2O_TOKEN_COOKIE->buf)
                continue;
            if (seen++ != 0)
                HB_LIT(&hb, "; ");
            hb_append(&hb, h->value.base, h->value.len);
        }
        HB_LIT(&hb, "\r\n");
    }
    if (client_ip_len != 0)
        hb_header(&hb, H2O_STRLIT("x-forwarded-for"), client_ip, client_ip_len);
    hb_header(&hb, H2O_STRLIT("x-forwarded-proto"), req->scheme->name.base, req->scheme->name.len);
    hb_header(&hb, H2O_STRLIT("x-forwarded-host"), req->authority.base, req->authority.len);
    if (port > 0) {
        int n = snprintf(num_buf, sizeof(num_buf), "%d", (int)port);
        hb_header(&hb, H2O_STRLIT("x-forwarded-port"), num_buf, (size_t)n);
    }
    if (req->entity.base != NULL || h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")) ||
        h2o_memis(req->method.base, req->method.len, H2O_STRLIT("PUT"))) {
        /* POST and PUT without a body still say so: some servers answer 411 otherwise */
        int n = snprintf(num_buf, sizeof(num_buf), "%zu", req->entity.base != NULL ? req->entity.len : (size_t)0);
        hb_header(&hb, H2O_STRLIT("content-length"), num_buf, (size_t)n);
    }
    if (ex->is_websocket) {
        HB_LIT(&hb, "connection: upgrade\r\nupgrade: websocket\r\n");
    } else {
        HB_LIT(&hb, "connection: keep-alive\r\n");
    }
    HB_LIT(&hb, "\r\n");

    return h2o_iovec_init(hb.base, hb.len);
}

/* --- ending an exchange --------------------------------------------------- */

/* Closes the upstream connection, if any, and stops the timer. */
static void detach_upstream(exchange_t *ex)
{
    clear_timer(ex);
    if (ex->sock != NULL) {
        h2o_socket_close(ex->sock);
        ex->sock = NULL;
    }
}

/* Answers with a gateway error. Must be the caller's last use of ex: the
 * response may complete, and dispose the request, at any time after. */
static void fail(exchange_t *ex, gw_error_code_t code, const char *detail)
{
    detach_upstream(ex);
    ex->state = EX_OVER;
    gw_error_send(ex->req, code, ex->sandbox_id, ex->port, detail);
}

/* No response byte came on this connection: retry once on a fresh
 * connection if the connection was a pooled one (it may have been closed by
 * the app while idle) and the method allows it; otherwise answer 502. */
static void on_no_response(exchange_t *ex, const char *detail)
{
    if (ex->reused && !ex->retried && ex->is_idempotent) {
        detach_upstream(ex);
        ex->retried = 1;
        COUNT(ex->proxy, retries, 1);
        ex->up_req.body_written = 0;
        ex->up_req.body_inflight = 0;
        ex->up_req.head_written = 0;
        ex->up_req.done = 0;
        ex->up_req.failed = 0;
        ex->res.got_byte = 0;
        connect_fresh(ex);
        return;
    }
    fail(ex, GW_ERR_PORT_NOT_OPEN, detail);
}

/* The response body is over (complete, or not): the connection goes back
 * to the pool when it can serve another request, else it is closed. Body
 * bytes not yet sent stay with the exchange. */
static void release_upstream(exchange_t *ex, int complete)
{
    h2o_socket_t *sock = ex->sock;
    h2o_buffer_t *empty = ex->rest;

    clear_timer(ex);
    ex->sock = NULL;
    /* ex->rest is empty: the upstream is released once */
    ex->rest = sock->input;
    sock->input = empty;
    if (complete && ex->res.keepalive && ex->up_req.done && !ex->up_req.failed && !ex->is_websocket) {
        gw_upstream_key_t key = pool_key(ex);
        h2o_socket_read_stop(sock);
        gw_upstream_pool_put(ex->proxy->pool, &key, sock);
    } else {
        h2o_socket_close(sock);
    }
}

/* --- streaming the response ----------------------------------------------- */

/* h2o's chunked encoder (an ostream filter) turns an empty in-progress
 * send into a deferred proceed without writing the head, so a server-sent
 * event stream would show nothing until its first event. Encoding here
 * sends the head at once. */
static void send_chunked(exchange_t *ex, h2o_iovec_t data, h2o_send_state_t state)
{
    h2o_iovec_t bufs[3];
    size_t n = 0;

    ex->req->bytes_sent += data.len;
    if (data.len != 0) {
        int len = snprintf(ex->chunk_head, sizeof(ex->chunk_head), "%zx\r\n", data.len);
        bufs[n++] = h2o_iovec_init(ex->chunk_head, (size_t)len);
        bufs[n++] = data;
        if (state == H2O_SEND_STATE_FINAL) {
            bufs[n++] = h2o_iovec_init(H2O_STRLIT("\r\n0\r\n\r\n"));
        } else if (state == H2O_SEND_STATE_IN_PROGRESS) {
            bufs[n++] = h2o_iovec_init(H2O_STRLIT("\r\n"));
        }
        /* on error the chunk stays open and the connection closes: the
         * client sees a truncated body */
    } else if (state == H2O_SEND_STATE_FINAL) {
        bufs[n++] = h2o_iovec_init(H2O_STRLIT("0\r\n\r\n"));
    }
    h2o_send(ex->req, bufs, n, state);
}

/* How much of the response one h2o_send may carry. Under HTTP/2 a send is
 * cut to the flow-control credit the client has given (stream and
 * connection), so that what h2o is handed is written at once and confirmed
 * by proceed: a stream the client stalls holds at most one small send that
 * is never billed. *credit is 0 when that small send is beyond the credit. */
static size_t send_limit(exchange_t *ex, int *credit)
{
    h2o_req_t *req = ex->req;
    h2o_http2_stream_t *stream;
    h2o_http2_conn_t *conn;
    ssize_t window, conn_window;

    *credit = 1;
    if (req->version < 0x200)
        return SEND_CHUNK_BYTES;
    /* every HTTP/2 request of h2o 2.2.5 lives in an h2o_http2_stream_t */
    stream = H2O_STRUCT_FROM_MEMBER(h2o_http2_stream_t, req, req);
    conn = (h2o_http2_conn_t *)req->conn;
    window = h2o_http2_window_get_window(&stream->output_window);
    conn_window = h2o_http2_window_get_window(&conn->_write.window);
    if (conn_window < window)
        window = conn_window;
    if (window <= 0) {
        *credit = 0;
        return STALLED_SEND_BYTES;
    }
    return (size_t)window < SEND_CHUNK_BYTES ? (size_t)window : SEND_CHUNK_BYTES;
}

/* Hands what is buffered to h2o. Bytes are billed when h2o reports them
 * written (on_proceed). With the upstream released and everything left in
 * this send, it is the final send: h2o calls no proceed after it, so it is
 * billed as it is handed over, and under HTTP/2 it carries body bytes only
 * within the client's credit (then h2o writes them at once; h2o 2.2.5 holds
 * even an empty END_STREAM while the window is shut). The final send may
 * dispose the request, so it is the caller's last use of ex. */
static void do_send(exchange_t *ex)
{
    h2o_buffer_t **receiving = ex->sock != NULL ? &ex->sock->input : &ex->rest;
    h2o_send_state_t state;
    h2o_iovec_t vec;
    int credit;

    assert(!ex->res.sending);
    vec = h2o_doublebuffer_prepare(&ex->sending, receiving, send_limit(ex, &credit));
    if (ex->sock == NULL && vec.len == ex->sending.buf->size && (*receiving)->size == 0 && (vec.len == 0 || credit)) {
        state = ex->res.body_error ? H2O_SEND_STATE_ERROR : H2O_SEND_STATE_FINAL;
        ex->state = EX_OVER;
        if (state == H2O_SEND_STATE_FINAL)
            add_bytes(ex->proxy, ex->sandbox_id, vec.len + (ex->res.started ? 0 : response_head_size(ex->req)), 0);
    } else {
        /* an empty send is only for getting the head out (server-sent
         * events: the head comes long before the first event) */
        if (vec.len == 0 && ex->res.started)
            return;
        state = H2O_SEND_STATE_IN_PROGRESS;
        ex->res.sending = 1;
        if (ex->proxy->client_stall_timeout.enabled)
            h2o_timeout_link(ex->proxy->ctx->loop, &ex->proxy->client_stall_timeout.timeout, &ex->stall_timer);
        h2o_linklist_insert(&ex->proxy->waiting, &ex->waiting);
        ex->res.unbilled = vec.len + (ex->res.started ? 0 : response_head_size(ex->req));
    }
    ex->res.started = 1;
    if (ex->res.encode_chunked) {
        send_chunked(ex, vec, state);
    } else {
        h2o_send(ex->req, &vec, vec.len != 0 ? 1 : 0, state);
    }
}

/* Back-pressure: the upstream is read only while less than read_pause_at of
 * this response is held (received and not yet confirmed sent by h2o). */
static void update_reading(exchange_t *ex)
{
    size_t held = ex->sock->input->size + ex->sending.buf->size;

    if (held >= ex->proxy->read_pause_at) {
        if (!ex->res.read_paused) {
            h2o_socket_read_stop(ex->sock);
            /* waiting for the client is not the app's idleness */
            clear_timer(ex);
            ex->res.read_paused = 1;
        }
    } else if (ex->res.read_paused) {
        ex->res.read_paused = 0;
        h2o_socket_read_start(ex->sock, on_body_read);
        set_timer(ex, &ex->proxy->io_timeout, on_io_timeout);
    }
}

static void on_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    exchange_t *ex = (void *)generator;

    (void)req;
    ex->res.sending = 0;
    if (h2o_timeout_is_linked(&ex->stall_timer))
        h2o_timeout_unlink(&ex->stall_timer);
    if (h2o_linklist_is_linked(&ex->waiting))
        h2o_linklist_unlink(&ex->waiting);
    /* h2o wrote the send to the client socket: these bytes are delivered */
    add_bytes(ex->proxy, ex->sandbox_id, ex->res.unbilled, 0);
    ex->res.unbilled = 0;
    if (ex->sending.bytes_inflight != 0)
        h2o_doublebuffer_consume(&ex->sending);
    if (ex->sock != NULL)
        update_reading(ex);
    account(ex);
    do_send(ex);
}

static void on_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    exchange_t *ex = (void *)generator;

    /* the client went away mid-response: the upstream connection is in an
     * unknown place of its response, so it cannot be reused */
    (void)req;
    if (h2o_timeout_is_linked(&ex->stall_timer))
        h2o_timeout_unlink(&ex->stall_timer);
    if (h2o_linklist_is_linked(&ex->waiting))
        h2o_linklist_unlink(&ex->waiting);
    detach_upstream(ex);
    ex->state = EX_OVER;
}

/* A response its client does not take: the upstream connection and the
 * sandbox's connection slot are given back now, what is held of the body is
 * dropped, and the response is cut (HTTP/2: RST_STREAM CANCEL; HTTP/1: the
 * connection is reset). The request is disposed by h2o, now or a little
 * later; last use of ex. */
static void reset_exchange(exchange_t *ex)
{
    h2o_req_t *req = ex->req;

    if (h2o_timeout_is_linked(&ex->stall_timer))
        h2o_timeout_unlink(&ex->stall_timer);
    if (h2o_linklist_is_linked(&ex->waiting))
        h2o_linklist_unlink(&ex->waiting);
    detach_upstream(ex);
    h2o_buffer_dispose(&ex->rest);
    h2o_buffer_init(&ex->rest, &h2o_socket_buffer_prototype);
    ex->cut = 1;
    account(ex);
    ex->state = EX_OVER;
    release_slots(ex);
    if (req->version >= 0x200) {
        h2o_http2_stream_t *stream = H2O_STRUCT_FROM_MEMBER(h2o_http2_stream_t, req, req);
        h2o_http2_conn_t *conn = (h2o_http2_conn_t *)req->conn;
        if (conn->state < H2O_HTTP2_CONN_STATE_IS_CLOSING) {
            h2o_http2_encode_rst_stream_frame(&conn->_write.buf, stream->stream_id, -H2O_HTTP2_ERROR_CANCEL);
            h2o_http2_conn_request_write(conn);
        }
        h2o_http2_stream_reset(conn, stream);
    } else {
        /* the write in flight fails (EPIPE) and h2o closes the connection;
         * no linger: what the kernel holds for the client is dropped */
        h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
        struct linger lg = {1, 0};
        if (sock != NULL) {
            setsockopt(h2o_socket_get_fd(sock), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            shutdown(h2o_socket_get_fd(sock), SHUT_RDWR);
        }
    }
}

/* The client took no byte of the send in flight for
 * limits.client_stall_timeout_ms. */
static void on_client_stall(h2o_timeout_entry_t *entry)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, stall_timer, entry);
    COUNT(ex->proxy, client_stalls, 1);
    reset_exchange(ex);
}

/* Over limits.max_connection_buffer_bytes (for ex's client connection) or
 * limits.max_worker_buffer_bytes: the responses waiting longest for their
 * client are reset until both hold. A response whose client takes it is
 * the last to go; its own bound is response_buffer_bytes. Returns 1 when ex
 * itself was reset (then it must not be used again). */
static int enforce_budgets(exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    h2o_conn_t *conn = ex->req->conn;
    size_t conn_max = p->config->limits.max_connection_buffer_bytes;
    size_t worker_max = p->config->limits.max_worker_buffer_bytes;
    h2o_linklist_t *node, *next;

    for (node = p->waiting.next; node != &p->waiting && (p->held > worker_max || conn_held(p, conn) > conn_max); node = next) {
        exchange_t *victim = H2O_STRUCT_FROM_MEMBER(exchange_t, waiting, node);
        next = node->next;
        if (victim->held == 0)
            continue;
        if (p->held <= worker_max && victim->req->conn != conn)
            continue; /* only the connection's budget is exceeded */
        COUNT(p, budget_resets, 1);
        if (victim == ex) {
            reset_exchange(ex);
            return 1;
        }
        /* the victim may be disposed now; `next` is not (a request owns no
         * other), and it is still linked unless it was ex */
        reset_exchange(victim);
    }
    return 0;
}

/* Decodes, in place, the last `newbytes` bytes of the upstream input.
 * Returns 1 when the body is complete, 0 when more is to come, -1 when the
 * framing is broken. */
static int decode_body(exchange_t *ex, size_t newbytes)
{
    h2o_buffer_t *in = ex->sock->input;

    switch (ex->res.framing) {
    case FRAMING_LENGTH:
        if (newbytes < ex->res.bytes_left) {
            ex->res.bytes_left -= newbytes;
            return 0;
        }
        if (newbytes > ex->res.bytes_left) {
            /* more than announced: drop the excess, and the connection */
            in->size -= newbytes - ex->res.bytes_left;
            ex->res.keepalive = 0;
        }
        ex->res.bytes_left = 0;
        return 1;
    case FRAMING_CHUNKED: {
        size_t decoded = newbytes;
        ssize_t ret;
        if (newbytes == 0)
            return 0;
        ret = phr_decode_chunked(&ex->res.chunked, in->bytes + in->size - newbytes, &decoded);
        if (ret == -1) {
            in->size -= newbytes;
            return -1;
        }
        in->size -= newbytes - decoded;
        if (ret == -2)
            return 0;
        if (ret > 0)
            ex->res.keepalive = 0; /* bytes after the last chunk */
        return 1;
    }
    case FRAMING_UNTIL_CLOSE:
        return 0;
    }
    return -1;
}

static void on_io_timeout(h2o_timeout_entry_t *entry)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, timer, entry);

    /* mid-body: the client gets a truncated response (HTTP/1: the
     * connection closes; HTTP/2: RST_STREAM) */
    ex->res.body_error = 1;
    release_upstream(ex, 0);
    if (!ex->res.sending)
        do_send(ex);
}

/* `newbytes` more bytes of body are at the end of the upstream input, or
 * the upstream said `err`. */
static void on_body_bytes(exchange_t *ex, size_t newbytes, const char *err)
{
    int ret;

    if (err != NULL) {
        /* a chunked body cut short is an error too, unlike h2o 2.2.5's
         * proxy: the client sees the truncation the app caused */
        ret = ex->res.framing == FRAMING_UNTIL_CLOSE ? 1 : -1;
        ex->res.keepalive = 0;
    } else {
        set_timer(ex, &ex->proxy->io_timeout, on_io_timeout);
        ret = decode_body(ex, newbytes);
    }
    if (ret < 0)
        ex->res.body_error = 1;
    if (ret != 0) {
        release_upstream(ex, ret > 0);
    } else {
        update_reading(ex);
    }
    account(ex);
    if (enforce_budgets(ex))
        return;
    if (!ex->res.sending)
        do_send(ex);
}

static void on_body_read(h2o_socket_t *sock, const char *err)
{
    on_body_bytes(sock->data, sock->bytes_read, err);
}

/* --- the response head ---------------------------------------------------- */

typedef struct st_response_head_t {
    int minor_version;
    int status;
    h2o_iovec_t reason;
    struct phr_header headers[MAX_RESPONSE_HEADERS];
    size_t num_headers;
    size_t size;
} response_head_t;

static int phr_name_is(const struct phr_header *h, const char *lc, size_t lclen)
{
    return h2o_lcstris(h->name, h->name_len, lc, lclen);
}

/* Reads what the headers say about framing and the connection. Returns 0,
 * or -1 when the head cannot be trusted. */
static int read_framing(exchange_t *ex, const response_head_t *head, size_t *content_length)
{
    int chunked = 0;
    size_t i;

    *content_length = SIZE_MAX;
    ex->res.keepalive = head->minor_version >= 1;
    for (i = 0; i != head->num_headers; ++i) {
        const struct phr_header *h = head->headers + i;
        /* picohttpparser gives an obs-fold continuation line no name: RFC 9112 5.2 lets a gateway answer 502 */
        if (h->name_len == 0)
            return -1;
        if (phr_name_is(h, H2O_STRLIT("connection"))) {
            if (h2o_contains_token(h->value, h->value_len, H2O_STRLIT("close"), ','))
                ex->res.keepalive = 0;
            else if (h2o_contains_token(h->value, h->value_len, H2O_STRLIT("keep-alive"), ','))
                ex->res.keepalive = head->minor_version >= 1 || ex->res.keepalive;
        } else if (phr_name_is(h, H2O_STRLIT("transfer-encoding"))) {
            if (h2o_lcstris(h->value, h->value_len, H2O_STRLIT("chunked"))) {
                chunked = 1;
            } else if (!h2o_lcstris(h->value, h->value_len, H2O_STRLIT("identity"))) {
                return -1;
            }
        } else if (phr_name_is(h, H2O_STRLIT("content-length"))) {
            size_t v = h2o_strtosize(h->value, h->value_len);
            if (v == SIZE_MAX || (*content_length != SIZE_MAX && *content_length != v))
                return -1;
            *content_length = v;
        }
    }
    if (chunked) {
        if (*content_length != SIZE_MAX) {
            /* RFC 7230 3.3.3: chunked wins, and the connection must close */
            *content_length = SIZE_MAX;
            ex->res.keepalive = 0;
        }
        ex->res.framing = FRAMING_CHUNKED;
    } else if (*content_length != SIZE_MAX) {
        ex->res.framing = FRAMING_LENGTH;
        ex->res.bytes_left = *content_length;
    } else {
        ex->res.framing = FRAMING_UNTIL_CLOSE;
        ex->res.keepalive = 0;
    }
    return 0;
}

/* Copies the end-to-end headers into req->res.headers. */
/* A preflight cannot carry the token, so the app's answer does not list the
 * token header; when the app allows the origin, the gateway does. */
static void allow_token_header(h2o_req_t *req)
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

static void copy_response_headers(exchange_t *ex, const response_head_t *head)
{
    h2o_req_t *req = ex->req;
    h2o_iovec_t conn_values[MAX_RESPONSE_HEADERS];
    size_t num_conn_values = 0, i;
    int drop_server = req->conn->ctx->globalconf->server_name.len != 0;

    for (i = 0; i != head->num_headers; ++i)
        if (phr_name_is(head->headers + i, H2O_STRLIT("connection")))
            conn_values[num_conn_values++] = h2o_iovec_init(head->headers[i].value, head->headers[i].value_len);

    for (i = 0; i != head->num_headers; ++i) {
        const struct phr_header *h = head->headers + i;
        h2o_iovec_t lc = h2o_strdup(&req->pool, h->name, h->name_len);
        h2o_iovec_t value = h2o_strdup(&req->pool, h->value, h->value_len);
        const h2o_token_t *token;

        h2o_strtolower(lc.base, lc.len);
        if ((token = h2o_lookup_token(lc.base, lc.len)) != NULL) {
            /* h2o writes its own Date (and Server, when configured) */
            if (token == H2O_TOKEN_CONNECTION || token == H2O_TOKEN_KEEP_ALIVE || token == H2O_TOKEN_TE ||
                token == H2O_TOKEN_TRANSFER_ENCODING || token == H2O_TOKEN_UPGRADE || token == H2O_TOKEN_HTTP2_SETTINGS ||
                token == H2O_TOKEN_CONTENT_LENGTH || token == H2O_TOKEN_DATE || (token == H2O_TOKEN_SERVER && drop_server))
                continue;
            if (listed_in_connection(conn_values, num_conn_values, lc.base, lc.len))
                continue;
            h2o_add_header(&req->pool, &req->res.headers, token, h->name, value.base, value.len);
        } else {
            if (name_is(&lc, H2O_STRLIT("proxy-connection")) || name_is(&lc, H2O_STRLIT("trailer")) ||
                listed_in_connection(conn_values, num_conn_values, lc.base, lc.len))
                continue;
            h2o_add_header_by_str(&req->pool, &req->res.headers, lc.base, lc.len, 0, h->name, value.base, value.len);
        }
    }
}

static const gw_tunnel_callbacks_t websocket_callbacks;

static void on_websocket_bytes(void *data, uint64_t to_client, uint64_t to_upstream)
{
    websocket_t *ws = data;
    add_bytes(ws->proxy, ws->sandbox_id, to_client, to_upstream);
}

static void on_websocket_close(void *data)
{
    websocket_t *ws = data;
    if (ws->revocable.grant.record != NULL) {
        if (ws->proxy->revocation != NULL)
            gw_revocation_remove(ws->proxy->revocation, &ws->revocable);
        gw_sandbox_release(ws->revocable.grant.record);
    }
    COUNT(ws->proxy, websockets_open, -1);
    if (ws->slot != NULL)
        gw_conn_limit_release(ws->slot, ws->sandbox_id);
    if (ws->client_slot != NULL)
        gw_conn_limit_release(ws->client_slot, ws->client_addr);
    free(ws->client_addr);
    h2o_linklist_unlink(&ws->link);
    free(ws->sandbox_id);
    free(ws);
}

static const gw_tunnel_callbacks_t websocket_callbacks = {on_websocket_bytes, on_websocket_close};

/* A publish revoked what let the tunnel in: both sockets close (no close
 * frame: the relay may be in the middle of one). */
static void on_websocket_revoke(gw_revocable_t *item, gw_error_code_t code)
{
    websocket_t *ws = H2O_STRUCT_FROM_MEMBER(websocket_t, revocable, item);
    (void)code;
    gw_tunnel_close(ws->tunnel);
}

static void on_upgrade_complete(void *data, h2o_socket_t *client, size_t reqsize)
{
    websocket_t *ws = data;

    /* the request is gone by now; the tunnel owns both sockets */
    if (client == NULL) {
        gw_tunnel_close(ws->tunnel);
        return;
    }
    h2o_buffer_consume(&client->input, reqsize);
    /* h2o calls back once the 101 is written to the client */
    add_bytes(ws->proxy, ws->sandbox_id, ws->head_bytes, 0);
    /* bounds what one read of the client pulls in, as for upstreams */
    setsockopt(h2o_socket_get_fd(client), SOL_SOCKET, SO_RCVBUF, &ws->proxy->rcvbuf, sizeof(ws->proxy->rcvbuf));
    if (ws->revocable.grant.record != NULL && ws->proxy->revocation != NULL)
        gw_revocation_add(ws->proxy->revocation, &ws->revocable);
    gw_tunnel_start(ws->tunnel, client);
}

/* The app switched protocols: answer 101 to the client and tunnel. Last use
 * of ex. */
static void start_websocket(exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    websocket_t *ws = h2o_mem_alloc(sizeof(*ws));
    h2o_socket_t *sock = ex->sock;

    memset(ws, 0, sizeof(*ws));
    h2o_add_header(&ex->req->pool, &ex->req->res.headers, H2O_TOKEN_UPGRADE, NULL, H2O_STRLIT("websocket"));
    clear_timer(ex);
    ex->sock = NULL;
    ex->state = EX_OVER;

    ws->proxy = p;
    ws->sandbox_id = h2o_strdup(NULL, ex->sandbox_id, SIZE_MAX).base;
    /* the tunnel outlives the request: it keeps the connection slot */
    ws->slot = ex->slot;
    ex->slot = NULL;
    if (ex->client_slot != NULL) {
        ws->client_slot = ex->client_slot;
        ws->client_addr = h2o_strdup(NULL, ex->client_addr, SIZE_MAX).base;
        ex->client_slot = NULL;
    }
    ws->tunnel = gw_tunnel_new(p->ctx->loop, sock, p->websocket_timeout.enabled ? &p->websocket_timeout.timeout : NULL,
                               &websocket_callbacks, ws);
    if (p->client_stall_timeout.enabled)
        gw_tunnel_set_stall_timeout(ws->tunnel, &p->client_stall_timeout.timeout);
    /* the exchange is no longer revocable; the tunnel is once it has both sockets */
    if (ex->revocable.grant.record != NULL) {
        if (p->revocation != NULL)
            gw_revocation_remove(p->revocation, &ex->revocable);
        ws->revocable.grant = ex->revocable.grant;
        ex->revocable.grant.record = NULL;
        ws->revocable.on_revoke = on_websocket_revoke;
    }
    h2o_linklist_insert(&p->websockets, &ws->link);
    COUNT(p, websockets_opened, 1);
    COUNT(p, websockets_open, 1);
    ws->head_bytes = response_head_size(ex->req) + sizeof("connection: upgrade\r\n") - 1;
    h2o_http1_upgrade(ex->req, NULL, 0, on_upgrade_complete, ws);
}

static void on_head(exchange_t *ex, response_head_t *head)
{
    h2o_req_t *req = ex->req;
    h2o_socket_t *sock = ex->sock;
    size_t content_length;
    int no_body;

    if (read_framing(ex, head, &content_length) != 0) {
        fail(ex, GW_ERR_PORT_NOT_OPEN, DETAIL_NOT_HTTP);
        return;
    }
    if (head->status == 101 && !(ex->is_websocket && ex->up_req.done && !ex->up_req.failed)) {
        /* switching protocols unasked (or before the request was out) */
        fail(ex, GW_ERR_PORT_NOT_OPEN, DETAIL_NOT_HTTP);
        return;
    }

    req->res.status = head->status;
    req->res.reason = h2o_strdup(&req->pool, head->reason.base, head->reason.len).base;
    copy_response_headers(ex, head);
    if (ex->cors_preflight)
        allow_token_header(ex->req);
    h2o_buffer_consume(&sock->input, head->size);

    if (head->status == 101) {
        start_websocket(ex);
        return;
    }

    no_body = ex->is_head || head->status == 204 || head->status == 304;
    if (content_length != SIZE_MAX && head->status != 204)
        req->res.content_length = content_length;

    if (!no_body && req->res.content_length == SIZE_MAX) {
        if (req->version == 0x101) {
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_TRANSFER_ENCODING, NULL, H2O_STRLIT("chunked"));
            /* req->bytes_sent counts body bytes, not the framing */
            req->bytes_counted_by_ostream = 1;
            ex->res.encode_chunked = 1;
        } else if (req->version < 0x101) {
            /* HTTP/1.0 client: the end of the body is the end of the connection */
            req->http1_is_persistent = 0;
        }
    }
    ex->state = EX_BODY;
    h2o_start_response(req, &ex->super);
    if (no_body) {
        if (sock->input->size != 0) {
            /* a body where there must be none: drop it, and the connection */
            h2o_buffer_consume(&sock->input, sock->input->size);
            ex->res.keepalive = 0;
        }
        release_upstream(ex, 1);
        do_send(ex);
        return;
    }

    ex->res.chunked.consume_trailer = 1;
    h2o_socket_read_start(sock, on_body_read);
    /* with the bytes that came with the head; this sends the head too */
    on_body_bytes(ex, sock->input->size, NULL);
}

static void on_first_byte_timeout(h2o_timeout_entry_t *entry)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, timer, entry);
    fail(ex, GW_ERR_UPSTREAM_TIMEOUT, DETAIL_FIRST_BYTE_TIMEOUT);
}

static void on_head_read(h2o_socket_t *sock, const char *err)
{
    exchange_t *ex = sock->data;
    response_head_t head;
    const char *reason;
    int rlen;

    if (err != NULL) {
        if (!ex->res.got_byte && sock->input->size == 0) {
            on_no_response(ex, DETAIL_CLOSED);
        } else {
            fail(ex, GW_ERR_PORT_NOT_OPEN, DETAIL_CLOSED_IN_HEAD);
        }
        return;
    }
    if (sock->input->size == 0)
        return;
    ex->res.got_byte = 1;

    while (1) {
        head.num_headers = MAX_RESPONSE_HEADERS;
        rlen = phr_parse_response(sock->input->bytes, sock->input->size, &head.minor_version, &head.status, &reason,
                                  &head.reason.len, head.headers, &head.num_headers, 0);
        if (rlen == -2) {
            if (sock->input->size > MAX_RESPONSE_HEAD_BYTES)
                fail(ex, GW_ERR_PORT_NOT_OPEN, DETAIL_HEAD_TOO_LARGE);
            return;
        }
        if (rlen < 0) {
            fail(ex, GW_ERR_PORT_NOT_OPEN, DETAIL_NOT_HTTP);
            return;
        }
        /* a whole head can arrive in one read: the bound holds for it too */
        if ((size_t)rlen > MAX_RESPONSE_HEAD_BYTES) {
            fail(ex, GW_ERR_PORT_NOT_OPEN, DETAIL_HEAD_TOO_LARGE);
            return;
        }
        if (head.status < 100 || head.status > 599) {
            fail(ex, GW_ERR_PORT_NOT_OPEN, DETAIL_NOT_HTTP);
            return;
        }
        if (head.status >= 200 || head.status == 101)
            break;
        /* 100 Continue, 102, 103: not forwarded */
        h2o_buffer_consume(&sock->input, (size_t)rlen);
        if (sock->input->size == 0)
            return;
    }
    head.reason.base = (char *)reason;
    head.size = (size_t)rlen;
    on_head(ex, &head);
}

/* --- connecting and sending the request ----------------------------------- */

static void write_request(exchange_t *ex);

static void on_request_written(h2o_socket_t *sock, const char *err)
{
    exchange_t *ex = sock->data;

    if (err != NULL) {
        /* the app may still answer (e.g. 413 before reading the body): the
         * read side decides; the connection is not reusable */
        ex->up_req.done = 1;
        ex->up_req.failed = 1;
        if (ex->state == EX_AWAIT_HEAD)
            set_timer(ex, &ex->proxy->first_byte_timeout, on_first_byte_timeout);
        return;
    }
    ex->up_req.body_written += ex->up_req.body_inflight;
    ex->up_req.body_inflight = 0;
    if (ex->state == EX_AWAIT_HEAD)
        set_timer(ex, &ex->proxy->first_byte_timeout, on_first_byte_timeout);
    if (ex->up_req.body_written < ex->req->entity.len) {
        write_request(ex);
    } else {
        ex->up_req.done = 1;
    }
}

static void write_request(exchange_t *ex)
{
    h2o_iovec_t bufs[2];
    size_t n = 0;

    if (!ex->up_req.head_written) {
        bufs[n++] = ex->up_req.head;
        ex->up_req.head_written = 1;
    }
    if (ex->req->entity.base != NULL && ex->up_req.body_written < ex->req->entity.len) {
        size_t left = ex->req->entity.len - ex->up_req.body_written;
        ex->up_req.body_inflight = left < REQUEST_BODY_SLICE ? left : REQUEST_BODY_SLICE;
        bufs[n++] = h2o_iovec_init(ex->req->entity.base + ex->up_req.body_written, ex->up_req.body_inflight);
    }
    h2o_socket_write(ex->sock, bufs, n, on_request_written);
}

/* The connection is up: send the request and wait for the head. */
static void start_request(exchange_t *ex)
{
    ex->state = EX_AWAIT_HEAD;
    set_timer(ex, &ex->proxy->first_byte_timeout, on_first_byte_timeout);
    write_request(ex);
    h2o_socket_read_start(ex->sock, on_head_read);
}

static void on_connect_timeout(h2o_timeout_entry_t *entry)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, timer, entry);
    fail(ex, GW_ERR_UPSTREAM_TIMEOUT, DETAIL_CONNECT_TIMEOUT);
}

static void on_connect(h2o_socket_t *sock, const char *err)
{
    exchange_t *ex = sock->data;

    if (err != NULL) {
        /* h2o folds every connect error into one string; refused is the
         * common one (nothing listens), unreachable the rare one */
        fail(ex, GW_ERR_PORT_NOT_OPEN, NULL);
        return;
    }
    start_request(ex);
}

static void connect_fresh(exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    h2o_socket_t *sock;

    ex->reused = 0;
    ex->state = EX_CONNECTING;
    COUNT(p, connects, 1);
    if ((sock = h2o_socket_connect(p->ctx->loop, (struct sockaddr *)&ex->addr.ss, ex->addr.len, on_connect)) == NULL) {
        fail(ex, GW_ERR_PORT_NOT_OPEN, NULL);
        return;
    }
    /* a small receive buffer bounds what one read event can pull in, so
     * that back-pressure holds (see gw_proxy_new) */
    setsockopt(h2o_socket_get_fd(sock), SOL_SOCKET, SO_RCVBUF, &p->rcvbuf, sizeof(p->rcvbuf));
    sock->data = ex;
    ex->sock = sock;
    set_timer(ex, &p->connect_timeout, on_connect_timeout);
}

static void on_exchange_dispose(void *_ex)
{
    exchange_t *ex = _ex;

    if (h2o_timeout_is_linked(&ex->stall_timer))
        h2o_timeout_unlink(&ex->stall_timer);
    if (h2o_linklist_is_linked(&ex->waiting))
        h2o_linklist_unlink(&ex->waiting);
    if (ex->revocable.grant.record != NULL) {
        if (ex->proxy->revocation != NULL)
            gw_revocation_remove(ex->proxy->revocation, &ex->revocable);
        gw_sandbox_release(ex->revocable.grant.record);
    }
    release_slots(ex);
    detach_upstream(ex);
    h2o_buffer_dispose(&ex->rest);
    h2o_doublebuffer_dispose(&ex->sending);
    h2o_buffer_init(&ex->rest, &h2o_socket_buffer_prototype);
    h2o_doublebuffer_init(&ex->sending, &h2o_socket_buffer_prototype);
    account(ex);
}

/* A publish revoked what let the request in. */
static void on_exchange_revoke(gw_revocable_t *item, gw_error_code_t code)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, revocable, item);

    switch (ex->state) {
    case EX_CONNECTING:
    case EX_AWAIT_HEAD:
        /* nothing sent yet: the answer a new request would get */
        fail(ex, code, NULL);
        break;
    case EX_BODY:
        /* cut like an upstream failure (HTTP/1: the connection closes; HTTP/2: RST_STREAM), and what is held
         * of the body is not sent either */
        ex->res.body_error = 1;
        if (ex->sock != NULL)
            release_upstream(ex, 0);
        h2o_buffer_consume(&ex->rest, ex->rest->size);
        account(ex);
        if (!ex->res.sending) {
            h2o_buffer_consume(&ex->sending.buf, ex->sending.buf->size);
            do_send(ex);
        }
        break;
    case EX_OVER:
        break;
    }
}

static int method_is_idempotent(h2o_iovec_t m)
{
    static const h2o_iovec_t idempotent[] = {{H2O_STRLIT("GET")}, {H2O_STRLIT("HEAD")},   {H2O_STRLIT("OPTIONS")},
                                             {H2O_STRLIT("PUT")}, {H2O_STRLIT("DELETE")}, {H2O_STRLIT("TRACE")}};
    size_t i;
    for (i = 0; i != sizeof(idempotent) / sizeof(idempotent[0]); ++i)
        if (h2o_memis(m.base, m.len, idempotent[i].base, idempotent[i].len))
            return 1;
    return 0;
}

/* --- public --------------------------------------------------------------- */

gw_proxy_t *gw_proxy_new(h2o_context_t *ctx, const gw_config_t *config)
{
    gw_proxy_t *p = h2o_mem_alloc(sizeof(*p));
    size_t limit = config->limits.response_buffer_bytes, rcvbuf;

    if (limit > MAX_HELD_BYTES)
        limit = MAX_HELD_BYTES;

    memset(p, 0, sizeof(*p));
    p->ctx = ctx;
    p->config = config;
    p->pool = gw_upstream_pool_new(ctx->loop, config->upstream.idle_timeout_ms, config->upstream.max_idle_per_pool);
    opt_timeout_init(ctx->loop, &p->connect_timeout, config->upstream.connect_timeout_ms);
    opt_timeout_init(ctx->loop, &p->first_byte_timeout, config->upstream.first_byte_timeout_ms);
    opt_timeout_init(ctx->loop, &p->io_timeout, config->upstream.idle_timeout_ms);
    opt_timeout_init(ctx->loop, &p->websocket_timeout, config->upstream.websocket_idle_timeout_ms);
    opt_timeout_init(ctx->loop, &p->client_stall_timeout, config->limits.client_stall_timeout_ms);
    h2o_linklist_init_anchor(&p->websockets);
    h2o_linklist_init_anchor(&p->waiting);
    p->conn_held = kh_init(gw_conn_held);

    /* One read event drains the socket's kernel receive queue (h2o reads
     * until EAGAIN), which autotuning grows to tcp_rmem[2] (tens of MB).
     * SO_RCVBUF caps that queue at about 2 * rcvbuf (the kernel doubles
     * the value), so reading is paused with 2 * rcvbuf of room left:
     * held < read_pause_at + 2 * rcvbuf <= limit. */
    rcvbuf = limit / 8;
    if (rcvbuf < MIN_UPSTREAM_RCVBUF)
        rcvbuf = MIN_UPSTREAM_RCVBUF;
    if (rcvbuf > MAX_UPSTREAM_RCVBUF)
        rcvbuf = MAX_UPSTREAM_RCVBUF;
    p->rcvbuf = (int)rcvbuf;
    p->read_pause_at = limit > 4 * rcvbuf ? limit - 2 * rcvbuf : limit / 2;
    if (p->read_pause_at == 0)
        p->read_pause_at = 1;
    return p;
}

void gw_proxy_free(gw_proxy_t *p)
{
    if (p == NULL)
        return;
    while (!h2o_linklist_is_empty(&p->websockets)) {
        websocket_t *ws = H2O_STRUCT_FROM_MEMBER(websocket_t, link, p->websockets.next);
        gw_tunnel_close(ws->tunnel);
    }
    gw_upstream_pool_free(p->pool);
    kh_destroy(gw_conn_held, p->conn_held);
    opt_timeout_dispose(p->ctx->loop, &p->connect_timeout);
    opt_timeout_dispose(p->ctx->loop, &p->first_byte_timeout);
    opt_timeout_dispose(p->ctx->loop, &p->io_timeout);
    opt_timeout_dispose(p->ctx->loop, &p->websocket_timeout);
    opt_timeout_dispose(p->ctx->loop, &p->client_stall_timeout);
    free(p);
}

void gw_proxy_forward(gw_proxy_t *p, h2o_req_t *req, const gw_proxy_target_t *target)
{
    exchange_t *ex = h2o_mem_alloc_shared(&req->pool, sizeof(*ex), on_exchange_dispose);
    gw_upstream_key_t key;
    h2o_socket_t *sock;

    memset(ex, 0, sizeof(*ex));
    ex->super.proceed = on_proceed;
    ex->stall_timer.cb = on_client_stall;
    ex->super.stop = on_stop;
    ex->proxy = p;
    ex->req = req;
    ex->sandbox_id = h2o_strdup(&req->pool, target->sandbox_id, SIZE_MAX).base;
    ex->lifecycle = h2o_strdup(&req->pool, target->lifecycle.base, target->lifecycle.len);
    ex->port = target->port;
    ex->addr = target->addr;
    ex->path = h2o_strdup(&req->pool, target->path.base, target->path.len);
    ex->client_port = target->client_port;
    ex->is_head = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
    ex->is_idempotent = method_is_idempotent(req->method);
    ex->cors_preflight = target->cors_preflight != 0;
    ex->slot = target->conn_limit;
    if (target->client_limit != NULL) {
        ex->client_slot = target->client_limit;
        ex->client_addr = h2o_strdup(&req->pool, target->client_addr, SIZE_MAX).base;
    }
    if (target->grant.record != NULL) {
        ex->revocable.grant = target->grant;
        gw_sandbox_retain(ex->revocable.grant.record);
        ex->revocable.on_revoke = on_exchange_revoke;
        if (p->revocation != NULL)
            gw_revocation_add(p->revocation, &ex->revocable);
    }
    ex->is_websocket = req->version < 0x200 && req->upgrade.base != NULL &&
                       h2o_lcstris(req->upgrade.base, req->upgrade.len, H2O_STRLIT("websocket"));
    h2o_buffer_init(&ex->rest, &h2o_socket_buffer_prototype);
    h2o_doublebuffer_init(&ex->sending, &h2o_socket_buffer_prototype);

    /* the last check before the line is written: whatever let it through, a
     * method or target with a space or a control would make two request
     * lines for the app */
    if (gw_request_line_check(req->method, ex->path) != 0) {
        detach_upstream(ex);
        ex->state = EX_OVER;
        gw_request_line_refuse(req, 400, "Bad Request", "The request line cannot be forwarded");
        return;
    }

    add_bytes(p, ex->sandbox_id, 0, request_size(req));

    /* the route came from Redis: never connect outside the allowed networks */
    if (!gw_cidr_list_contains(p->config->upstream.allowed_networks, p->config->upstream.num_allowed_networks,
                               (const struct sockaddr *)&ex->addr.ss)) {
        fail(ex, GW_ERR_UPSTREAM_FORBIDDEN, NULL);
        return;
    }

    ex->up_req.head = build_request_head(ex);
    key = pool_key(ex);
    if (!ex->is_websocket && (sock = gw_upstream_pool_take(p->pool, &key)) != NULL) {
        COUNT(p, reuses, 1);
        ex->reused = 1;
        ex->sock = sock;
        sock->data = ex;
        start_request(ex);
    } else {
        connect_fresh(ex);
    }
}

void gw_proxy_set_counters(gw_proxy_t *p, gw_proxy_counters_t *c)
{
    p->counters = c;
}

void gw_proxy_set_bytes_cb(gw_proxy_t *p, gw_proxy_bytes_cb cb, void *data)
{
    p->bytes_cb = cb;
    p->bytes_cb_data = data;
}

gw_proxy_bytes_t gw_proxy_bytes_total(const gw_proxy_t *p)
{
    return p->total;
}

void gw_proxy_set_revocation(gw_proxy_t *p, gw_revocation_t *r)
{
    p->revocation = r;
}

void gw_proxy_drop_pools(gw_proxy_t *p, const char *sandbox_id, const char *current_lifecycle)
{
    gw_upstream_pool_drop(p->pool, sandbox_id, current_lifecycle);
}
