/*
 * The upstream path, in place of libh2o 2.2.5's proxy (which reads a slow
 * client's response into memory and temp files without bound): one HTTP/1.1
 * exchange per request over a pooled keep-alive connection. This file
 * connects (or reuses), writes the request, reads the response head and
 * hands the body to response.c, an upgrade to websocket.c.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <h2o.h>
#include "common/engine.h"
#include "errors/errors.h"
#include "upstream/request_line.h"
#include "common/client_addr.h"
#include "common/keepalive.h"
#include "common/netaddr.h"
#include "upstream/exchange.h"
#include "upstream/ws_h2.h"

/* The request body goes upstream in slices of this size, so that a slow
 * upload is told apart from a stalled one (each slice restarts the timer). */
#define REQUEST_BODY_SLICE (256 * 1024)
/* How long a pool keeps the idle connections it holds past
 * upstream.max_idle_per_pool (h2o's proxy keeps all of its own this long): long
 * enough for steady load to take them again, so that a burst of responses
 * completing together does not close what the next requests need, short
 * enough that a burst's connections do not stay for upstream.idle_timeout_ms. */
#define POOL_SURPLUS_IDLE_MS 2000
/* An HTTP/1 exchange still going after this long has its client watched for
 * leaving (deadline.c): the sandbox sees a caller that left this much later
 * at most, and exchanges that end sooner cost no system call. */
#define CLIENT_WATCH_DELAY_MS 200
/* The tick of timeout:<n> silences (deadline.c); the loop has this timeout already. */
#define PORT_TICK_MS 1000
/* How often a client connection holding egress not yet known delivered asks
 * the kernel what its client acknowledged (upstream/delivery.h): the delay
 * of billing, at one ioctl per second per connection with traffic. */
#define DELIVERY_CHECK_MS 1000
/* Bounds of the upstream sockets' kernel receive buffer (see gw_proxy_new). */
#define MIN_UPSTREAM_RCVBUF (4 * 1024)
#define MAX_UPSTREAM_RCVBUF (2 * 1024 * 1024)

#define DETAIL_CLOSED "It accepted the connection but closed it without answering."
/* bad_upstream_response: what was wrong with the answer */
#define DETAIL_NOT_HTTP "Its status line or headers are not HTTP/1.x."
#define DETAIL_UNASKED_101 "It switched protocols (101) without being asked to."
#define DETAIL_BAD_ACCEPT "Its WebSocket handshake answer (Sec-WebSocket-Accept) does not match the key the gateway sent."
#define DETAIL_CLOSED_IN_HEAD "It closed the connection in the middle of its response head."
#define DETAIL_HEAD_TOO_LARGE "Its response head is larger than 64 KiB."
#define DETAIL_BAD_CHUNKED "Its chunked body is malformed (a chunk size or line end that RFC 9112 does not allow)."
#define DETAIL_CONNECT_TIMEOUT "Connecting to it timed out."

static void on_head_read(h2o_socket_t *sock, const char *err);
static void connect_fresh(gw_exchange_t *ex);

/* --- small helpers ------------------------------------------------------- */

void gw_exchange_clear_timer(gw_exchange_t *ex)
{
    if (gw_timer_is_linked(&ex->timer))
        gw_timer_unlink(&ex->timer);
}

void gw_exchange_set_timer(gw_exchange_t *ex, gw_opt_timeout_t *t, gw_timer_cb cb)
{
    gw_exchange_clear_timer(ex);
    if (!t->enabled)
        return;
    ex->timer.cb = cb;
    gw_timer_link(ex->proxy->ctx->loop, t->timeout, &ex->timer);
}

void gw_proxy_add_bytes(gw_proxy_t *p, const char *sandbox_id, int no_activity, uint64_t egress, uint64_t ingress)
{
    if (egress == 0 && ingress == 0)
        return;
    p->total.egress += egress;
    p->total.ingress += ingress;
    GW_PROXY_COUNT(p, egress_bytes, egress);
    GW_PROXY_COUNT(p, ingress_bytes, ingress);
    if (p->meter != NULL)
        gw_worker_meter_add(p->meter, sandbox_id, egress, ingress, no_activity);
}

void gw_proxy_add_egress(gw_proxy_t *p, h2o_socket_t *client, const char *sandbox_id, int no_activity, uint64_t egress, int written)
{
    if (client == NULL) {
        gw_proxy_add_bytes(p, sandbox_id, no_activity, egress, 0);
        return;
    }
    gw_deliveries_hold(p->deliveries, client, sandbox_id, no_activity, egress, written);
}

static void on_delivered(void *data, const char *sandbox_id, int no_activity, uint64_t egress)
{
    gw_proxy_add_bytes(data, sandbox_id, no_activity, egress, 0);
}

h2o_socket_t *gw_exchange_client_socket(gw_exchange_t *ex)
{
    return gw_conn_socket(ex->req->conn);
}

size_t gw_exchange_response_head_size(h2o_req_t *req)
{
    size_t n = sizeof("HTTP/1.1 200 \r\n") - 1 + strlen(req->res.reason) + 2, i;
    for (i = 0; i != req->res.headers.size; ++i)
        n += req->res.headers.entries[i].name->len + req->res.headers.entries[i].value.len + 4;
    return n;
}

/* Size of the request as the client sent it, approximated as HTTP/1.1 (metering); a
 * streaming body is billed as it is written (request_body.c), the rest now. */
static size_t request_size(h2o_req_t *req, int body_streams)
{
    size_t n = req->method.len + 1 + req->path.len + sizeof(" HTTP/1.1\r\nhost: \r\n") - 1 + req->authority.len + 2, i;
    for (i = 0; i != req->headers.size; ++i)
        n += req->headers.entries[i].name->len + req->headers.entries[i].value.len + 4;
    if (!body_streams) /* the trailers of a body that came whole arrived too (h2o's req->trailers; not forwarded to HTTP/1.1) */
        for (i = 0; i != req->trailers.size; ++i)
            n += req->trailers.entries[i].name->len + req->trailers.entries[i].value.len + 4;
    return n + (body_streams ? 0 : req->entity.len);
}

/* --- the request to the upstream ---------------------------------------- */

/* The client's address as text (common/client_addr.h). Returns the length,
 * or 0 when unknown. */
static size_t client_address(h2o_req_t *req, char *buf, size_t bufsize)
{
    int n = gw_client_addr_text(req->conn, buf, bufsize);
    return n < 0 ? 0 : (size_t)n;
}

/* The port the client connected to, or -1. */
static int32_t local_port(h2o_req_t *req)
{
    struct sockaddr_storage ss;

    if (req->conn->callbacks->get_sockname == NULL || req->conn->callbacks->get_sockname(req->conn, (void *)&ss) == 0)
        return -1;
    return h2o_socket_getport((void *)&ss);
}

static h2o_iovec_t build_request_head(gw_exchange_t *ex)
{
    h2o_req_t *req = ex->req;
    char client_ip[INET6_ADDRSTRLEN];
    gw_http1_request_t r = {.method = req->method,
                            .path = ex->path,
                            .authority = req->authority,
                            /* a localhost port: where the browser is (https, as the preview origin), even
                               behind a trusted plain listener (CONTRACT: "The sandbox's view of its address") */
                            .scheme = ex->localhost ? h2o_iovec_init(H2O_STRLIT("https")) : req->scheme->name,
                            .headers = ex->localhost ? gw_address_view_request_headers(&ex->view, &req->pool, &req->headers)
                                                     : &req->headers,
                            .body = gw_ws_h2_request_body(req),
                            .body_streams = ex->up_req.streaming,
                            .content_length = req->content_length,
                            .client_port = ex->client_port != 0 ? ex->client_port : local_port(req),
                            .localhost_port = ex->localhost ? ex->port : 0,
                            .websocket = ex->is_websocket};

    /* the pipeline's client (a trusted listener's X-Forwarded-For: the one limits and ingress rules saw), else the connection's */
    if (ex->client_addr != NULL)
        r.client_addr = h2o_iovec_init(ex->client_addr, strlen(ex->client_addr));
    else
        r.client_addr = h2o_iovec_init(client_ip, client_address(req, client_ip, sizeof(client_ip)));
    return gw_http1_request_head(&req->pool, &r);
}

/* --- ending an exchange --------------------------------------------------- */

void gw_exchange_detach_upstream(gw_exchange_t *ex)
{
    gw_splice_stop(ex);
    gw_exchange_clear_timer(ex);
    gw_exchange_unwatch_client(ex);
    if (ex->sock != NULL) {
        h2o_socket_close(ex->sock);
        ex->sock = NULL;
    }
}

/* Answers with a gateway error. Must be the caller's last use of ex: the
 * response may complete, and dispose the request, at any time after. */
static void fail_why(gw_exchange_t *ex, gw_error_code_t code, gw_error_why_t why, const char *detail)
{
    h2o_req_t *req = ex->req;
    /* a body still arriving keeps the request alive past the answer, which it follows (request_body.h) */
    int body_streams = gw_request_body_streams(req), in_hand = ex->up_req.in_hand || !ex->up_req.streaming;

    gw_exchange_detach_upstream(ex);
    ex->state = GW_EX_OVER;
    /* "listen on 0.0.0.0, not 127.0.0.1" is wrong advice when the gateway itself connects over loopback */
    if (code == GW_ERR_PORT_NOT_OPEN && gw_netaddr_is_loopback((const struct sockaddr *)&ex->addr.ss))
        why = GW_WHY_LOOPBACK_UPSTREAM;
    gw_error_send_why(req, code, why, ex->sandbox_id, ex->port, detail);
    if (body_streams)
        gw_request_body_end(req, in_hand);
}

void gw_exchange_fail(gw_exchange_t *ex, gw_error_code_t code, const char *detail)
{
    fail_why(ex, code, GW_WHY_DEFAULT, detail);
}

/* bad_upstream_response: what was wrong, and the first bytes the app sent
 * (at most GW_HTTP1_QUOTE_BYTES, escaped), so that "it speaks HTTP/2" or "it
 * wrote Unauthorized" is seen at once. */
static void fail_bad_answer(gw_exchange_t *ex, const char *why)
{
    char detail[512];
    size_t n = (size_t)snprintf(detail, sizeof(detail), "%s", why);

    if (ex->sock != NULL && ex->sock->input->size != 0 && n < sizeof(detail))
        gw_http1_quote(detail + n, sizeof(detail) - n, ex->sock->input->bytes, ex->sock->input->size);
    gw_exchange_fail(ex, GW_ERR_BAD_UPSTREAM_RESPONSE, detail);
}

/* No response byte came on this connection: retry once on a fresh
 * connection if the connection was a pooled one (it may have been closed by
 * the app while idle) and the method allows it; otherwise answer 502. */
static void on_no_response(gw_exchange_t *ex, const char *detail)
{
    if (ex->reused && !ex->retried && ex->is_idempotent) {
        gw_exchange_detach_upstream(ex);
        ex->retried = 1;
        GW_PROXY_COUNT(ex->proxy, retries, 1);
        ex->up_req.body_written = 0;
        ex->up_req.body_inflight = 0;
        ex->up_req.head_written = 0;
        ex->up_req.done = 0;
        ex->up_req.failed = 0;
        ex->res.got_byte = 0;
        gw_exchange_watch_client(ex); /* the detach stopped it */
        connect_fresh(ex);
        return;
    }
    gw_exchange_fail(ex, GW_ERR_PORT_NOT_OPEN, detail);
}

/* --- the response head ---------------------------------------------------- */

static void on_head(gw_exchange_t *ex, const gw_http1_response_t *head)
{
    h2o_req_t *req = ex->req;
    const char *why = DETAIL_NOT_HTTP;
    int no_body;

    if (gw_http1_response_framing(head, &ex->res.body, &why) != 0) {
        fail_bad_answer(ex, why);
        return;
    }
    if (head->status == 101 && !(ex->is_websocket && ex->up_req.done && !ex->up_req.failed)) {
        /* switching protocols unasked (or before the request was out) */
        fail_bad_answer(ex, DETAIL_UNASKED_101);
        return;
    }
    if (head->status == 101 && gw_ws_h2_is_extended_connect(req) && !gw_ws_h2_accept_matches(req, head)) {
        fail_bad_answer(ex, DETAIL_BAD_ACCEPT);
        return;
    }
    no_body = head->status != 101 && (ex->is_head || head->status == 204 || head->status == 304);
    if (head->status != 101 && !no_body) {
        /* the body bytes that came with the head are decoded before
         * anything of the response is set: broken framing there is still
         * a 502 of the gateway's own, with none of the app's headers */
        if (gw_exchange_decode_first(ex, head->size) != 0) {
            fail_bad_answer(ex, DETAIL_BAD_CHUNKED);
            return;
        }
    }

    req->res.status = head->status;
    req->res.reason = h2o_strdup(&req->pool, head->reason.base, head->reason.len).base;
    gw_http1_response_headers(&req->pool, &req->res.headers, head, req->conn->ctx->globalconf->server_name.len != 0, &ex->view);
    if (ex->cors_preflight)
        gw_http1_allow_token_header(ex->req);
    h2o_buffer_consume(&ex->sock->input, head->size);

    if (head->status == 101) {
        gw_exchange_upgrade(ex);
        return;
    }

    if (ex->res.body.content_length != SIZE_MAX && head->status != 204)
        req->res.content_length = ex->res.body.content_length;

    /* length unknown: an HTTP/1.1 client's body is chunked by h2o (which sends the head at once and counts only body
     * bytes in bytes_sent); an HTTP/1.0 client's ends with the connection */
    if (!no_body && req->res.content_length == SIZE_MAX && req->version < 0x101)
        req->http1_is_persistent = 0;
    gw_exchange_start_body(ex, no_body);
}

void gw_exchange_on_first_byte_timeout(gw_timer_t *entry)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, timer, entry);
    char detail[384];

    gw_exchange_silence_detail(ex, GW_SILENCE_FIRST_BYTE, detail, sizeof(detail));
    gw_cut_note(ex->req, GW_CUT_FIRST_BYTE_TIMEOUT);
    fail_why(ex, GW_ERR_UPSTREAM_TIMEOUT, GW_WHY_SILENCE_LIMIT, detail);
}

static void on_head_read(h2o_socket_t *sock, const char *err)
{
    gw_exchange_t *ex = sock->data;
    gw_http1_response_t head;

    if (err != NULL) {
        if (!ex->res.got_byte && sock->input->size == 0) {
            on_no_response(ex, DETAIL_CLOSED);
        } else {
            fail_bad_answer(ex, DETAIL_CLOSED_IN_HEAD);
        }
        return;
    }
    if (sock->input->size == 0)
        return;
    ex->res.got_byte = 1;

    while (1) {
        switch (gw_http1_response_parse(sock->input->bytes, sock->input->size, &head)) {
        case GW_HTTP1_HEAD_COMPLETE:
            break;
        case GW_HTTP1_HEAD_PARTIAL:
            return;
        case GW_HTTP1_HEAD_INVALID:
            fail_bad_answer(ex, DETAIL_NOT_HTTP);
            return;
        case GW_HTTP1_HEAD_TOO_LARGE:
            fail_bad_answer(ex, DETAIL_HEAD_TOO_LARGE);
            return;
        }
        if (head.status >= 200 || head.status == 101)
            break;
        /* 100 Continue, 102, 103: not forwarded */
        h2o_buffer_consume(&sock->input, head.size);
        if (sock->input->size == 0)
            return;
    }
    on_head(ex, &head);
}

/* --- connecting and sending the request ----------------------------------- */

static void write_request(gw_exchange_t *ex);

static void on_request_written(h2o_socket_t *sock, const char *err)
{
    gw_exchange_t *ex = sock->data;

    if (err != NULL) {
        /* the app may still answer (e.g. 413 before reading the body): the
         * read side decides; the connection is not reusable */
        ex->up_req.done = 1;
        ex->up_req.failed = 1;
        if (ex->state == GW_EX_AWAIT_HEAD)
            gw_exchange_set_silence(ex, GW_SILENCE_FIRST_BYTE, gw_exchange_on_first_byte_timeout);
        return;
    }
    ex->up_req.body_written += ex->up_req.body_inflight;
    ex->up_req.body_inflight = 0;
    if (ex->state == GW_EX_AWAIT_HEAD)
        gw_exchange_set_silence(ex, GW_SILENCE_FIRST_BYTE, gw_exchange_on_first_byte_timeout);
    if (ex->up_req.body_written < gw_ws_h2_request_body(ex->req).len) {
        write_request(ex);
    } else {
        ex->up_req.done = 1;
    }
}

static void write_request(gw_exchange_t *ex)
{
    h2o_iovec_t bufs[2];
    size_t n = 0;

    if (!ex->up_req.head_written) {
        bufs[n++] = ex->up_req.head;
        ex->up_req.head_written = 1;
    }
    if (gw_ws_h2_request_body(ex->req).base != NULL && ex->up_req.body_written < gw_ws_h2_request_body(ex->req).len) {
        size_t left = gw_ws_h2_request_body(ex->req).len - ex->up_req.body_written;
        ex->up_req.body_inflight = left < REQUEST_BODY_SLICE ? left : REQUEST_BODY_SLICE;
        bufs[n++] = h2o_iovec_init(ex->req->entity.base + ex->up_req.body_written, ex->up_req.body_inflight);
    }
    h2o_socket_write(ex->sock, bufs, n, on_request_written);
}

/* The connection is up: send the request and wait for the head. */
static void start_request(gw_exchange_t *ex)
{
    ex->state = GW_EX_AWAIT_HEAD;
    gw_exchange_set_silence(ex, GW_SILENCE_FIRST_BYTE, gw_exchange_on_first_byte_timeout);
    if (ex->up_req.streaming)
        gw_request_body_start(ex);
    else
        write_request(ex);
    h2o_socket_read_start(ex->sock, on_head_read);
}

static void on_connect_timeout(gw_timer_t *entry)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, timer, entry);
    gw_exchange_fail(ex, GW_ERR_UPSTREAM_TIMEOUT, DETAIL_CONNECT_TIMEOUT);
}

static void on_connect(h2o_socket_t *sock, const char *err)
{
    gw_exchange_t *ex = sock->data;

    if (err != NULL) {
        /* h2o folds every connect error into one string; refused is the
         * common one (nothing listens), unreachable the rare one */
        gw_exchange_fail(ex, GW_ERR_PORT_NOT_OPEN, NULL);
        return;
    }
    if (ex->is_tcp) {
        gw_exchange_tcp_open(ex);
        return;
    }
    start_request(ex);
}

static void connect_fresh(gw_exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    h2o_socket_t *sock;

    ex->reused = 0;
    ex->state = GW_EX_CONNECTING;
    GW_PROXY_COUNT(p, connects, 1);
    if ((sock = gw_socket_connect(p->ctx->loop, (struct sockaddr *)&ex->addr.ss, ex->addr.len, on_connect)) == NULL) {
        gw_exchange_fail(ex, GW_ERR_PORT_NOT_OPEN, NULL);
        return;
    }
    /* a small receive buffer bounds what one read event can pull in, so
     * that back-pressure holds (see gw_proxy_new) */
    setsockopt(h2o_socket_get_fd(sock), SOL_SOCKET, SO_RCVBUF, &p->rcvbuf, sizeof(p->rcvbuf));
    /* a call silent for minutes keeps its place in the NATs between (docs/long-calls.md, Long calls) */
    gw_tcp_keepalive_set(h2o_socket_get_fd(sock));
    sock->data = ex;
    ex->sock = sock;
    gw_exchange_set_timer(ex, &p->connect_timeout, on_connect_timeout);
}

static void on_exchange_dispose(void *_ex)
{
    gw_exchange_t *ex = _ex;

    gw_exchange_stop_waiting(ex);
    if (h2o_linklist_is_linked(&ex->link))
        h2o_linklist_unlink(&ex->link);
    if (ex->revocable.grant.record != NULL) {
        if (ex->proxy->revocation != NULL)
            gw_revocation_remove(ex->proxy->revocation, &ex->revocable);
        gw_sandbox_release(ex->revocable.grant.record);
    }
    gw_exchange_unwatch_client(ex);
    /* a request still at the app keeps its slots until the app is done with it (MadeYouReset across reconnections) */
    if (!gw_orphan_adopt(ex)) {
        gw_exchange_release_slots(ex);
        gw_exchange_detach_upstream(ex);
    }
    h2o_buffer_dispose(&ex->rest);
    h2o_doublebuffer_dispose(&ex->sending);
    if (ex->up_req.chunk != NULL)
        h2o_buffer_dispose(&ex->up_req.chunk);
    h2o_buffer_init(&ex->rest, &h2o_socket_buffer_prototype);
    h2o_doublebuffer_init(&ex->sending, &h2o_socket_buffer_prototype);
    gw_exchange_account(ex);
}

/* A publish revoked what let the request in. */
static void on_exchange_revoke(gw_revocable_t *item, gw_error_code_t code)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, revocable, item);

    switch (ex->state) {
    case GW_EX_CONNECTING:
    case GW_EX_AWAIT_HEAD:
        /* nothing sent yet: the answer a new request would get */
        gw_exchange_fail(ex, code, NULL);
        break;
    case GW_EX_BODY:
        gw_exchange_cut(ex, code == GW_ERR_EGRESS_QUOTA_EXCEEDED ? GW_CUT_EGRESS_QUOTA : GW_CUT_REVOKED);
        break;
    case GW_EX_OVER:
        break;
    }
}

/* --- public --------------------------------------------------------------- */

gw_proxy_t *gw_proxy_new(h2o_context_t *ctx, const gw_proxy_conf_t *conf)
{
    gw_proxy_t *p = h2o_mem_alloc(sizeof(*p));
    size_t limit = conf->response_buffer_bytes, rcvbuf;

    memset(p, 0, sizeof(*p));
    p->ctx = ctx;
    p->conf = *conf;
    gw_upstream_pool_conf_t pool_conf = {
        .idle_timeout_ms = conf->pool_idle_timeout_ms,
        .surplus_timeout_ms = conf->pool_idle_timeout_ms < POOL_SURPLUS_IDLE_MS ? conf->pool_idle_timeout_ms : POOL_SURPLUS_IDLE_MS,
        .max_idle_per_key = conf->max_idle_per_pool,
        .max_idle = conf->max_idle_per_worker};
    p->pool = gw_upstream_pool_new(ctx->loop, &pool_conf);
    gw_opt_timeout_init(ctx->loop, &p->connect_timeout, conf->connect_timeout_ms);
    gw_opt_timeout_init(ctx->loop, &p->first_byte_timeout, conf->first_byte_timeout_ms);
    gw_opt_timeout_init(ctx->loop, &p->io_timeout, conf->idle_timeout_ms);
    gw_opt_timeout_init(ctx->loop, &p->websocket_timeout, conf->websocket_idle_timeout_ms);
    gw_opt_timeout_init(ctx->loop, &p->websocket_ping, conf->websocket_ping_interval_ms);
    gw_opt_timeout_init(ctx->loop, &p->client_stall_timeout, conf->client_stall_timeout_ms);
    gw_opt_timeout_init(ctx->loop, &p->event_stream_timeout, conf->event_stream_idle_timeout_ms);
    gw_opt_timeout_init(ctx->loop, &p->port_tick, PORT_TICK_MS);
    gw_opt_timeout_init(ctx->loop, &p->watch_delay, CLIENT_WATCH_DELAY_MS);
    gw_opt_timeout_init(ctx->loop, &p->tunnel_close_wait, GW_TUNNEL_CLOSE_WAIT_MS);
    h2o_linklist_init_anchor(&p->websockets);
    h2o_linklist_init_anchor(&p->tcp_tunnels);
    h2o_linklist_init_anchor(&p->orphans);
    h2o_linklist_init_anchor(&p->waiting);
    h2o_linklist_init_anchor(&p->exchanges);
    p->deliveries = gw_deliveries_new(ctx->loop, DELIVERY_CHECK_MS, on_delivered, p);
    p->held = gw_held_new();
    p->h2c = gw_h2c_new(p);

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
    gw_proxy_close_websockets(p);
    gw_proxy_close_tcp_tunnels(p);
    gw_orphans_close(p, NULL, NULL);
    gw_h2c_free(p->h2c);
    gw_deliveries_free(p->deliveries);
    gw_upstream_pool_free(p->pool);
    gw_held_free(p->held);
    gw_opt_timeout_dispose(p->ctx->loop, &p->connect_timeout);
    gw_opt_timeout_dispose(p->ctx->loop, &p->first_byte_timeout);
    gw_opt_timeout_dispose(p->ctx->loop, &p->io_timeout);
    gw_opt_timeout_dispose(p->ctx->loop, &p->websocket_timeout);
    gw_opt_timeout_dispose(p->ctx->loop, &p->websocket_ping);
    gw_opt_timeout_dispose(p->ctx->loop, &p->client_stall_timeout);
    gw_opt_timeout_dispose(p->ctx->loop, &p->event_stream_timeout);
    gw_opt_timeout_dispose(p->ctx->loop, &p->port_tick);
    gw_opt_timeout_dispose(p->ctx->loop, &p->watch_delay);
    gw_opt_timeout_dispose(p->ctx->loop, &p->tunnel_close_wait);
    free(p);
}

void gw_proxy_forward(gw_proxy_t *p, h2o_req_t *req, const gw_proxy_target_t *target)
{
    gw_exchange_t *ex = h2o_mem_alloc_shared(&req->pool, sizeof(*ex), on_exchange_dispose);
    gw_upstream_key_t key;
    h2o_socket_t *sock;

    memset(ex, 0, sizeof(*ex));
    ex->super.proceed = gw_exchange_on_proceed;
    ex->stall_timer.cb = gw_exchange_on_client_stall;
    ex->super.stop = gw_exchange_on_stop;
    ex->proxy = p;
    ex->req = req;
    h2o_linklist_insert(&p->exchanges, &ex->link);
    ex->sandbox_id = h2o_strdup(&req->pool, target->sandbox_id, SIZE_MAX).base;
    ex->lifecycle = h2o_strdup(&req->pool, target->lifecycle.base, target->lifecycle.len);
    ex->port = target->port;
    ex->addr = target->addr;
    ex->path = h2o_strdup(&req->pool, target->path.base, target->path.len);
    ex->client_port = target->client_port;
    ex->no_activity = target->no_activity != 0;
    ex->is_head = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"));
    ex->is_idempotent = gw_request_method_is_idempotent(req->method);
    ex->cors_preflight = target->cors_preflight != 0;
    ex->localhost = target->localhost != 0;
    ex->timeout_ms = target->timeout_ms;
    gw_address_view_init(&ex->view, &req->pool, req->authority, ex->localhost ? ex->port : 0, &p->conf.cookie_rules);
    ex->slot = target->conn_limit;
    ex->slot_worker = target->limit_worker;
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
    ex->is_tcp = target->tcp != 0;
    ex->rfb = (unsigned)target->rfb & 3;
    ex->viewer_slot = target->viewer_limit;
    ex->is_websocket = gw_ws_h2_is_websocket(req);
    h2o_buffer_init(&ex->rest, &h2o_socket_buffer_prototype);
    h2o_doublebuffer_init(&ex->sending, &h2o_socket_buffer_prototype);

    /* the last check before the line is written: whatever let it through, a
     * method or target with a space or a control would make two request
     * lines for the app */
    if (gw_request_line_check(req->method, ex->path) != 0) {
        gw_exchange_detach_upstream(ex);
        ex->state = GW_EX_OVER;
        gw_request_line_refuse(req, 400, "Bad Request", "The request line cannot be forwarded");
        gw_request_body_end(req, 1); /* a body still arriving kept req alive */
        return;
    }

    if (gw_request_body_streams(req) && !ex->is_websocket && !ex->is_tcp)
        gw_request_body_take(ex); /* a body still arriving streams to the app (request_body.h) */
    gw_proxy_add_bytes(p, ex->sandbox_id, ex->no_activity, 0, request_size(req, ex->up_req.streaming));

    /* the route came from Redis: never connect outside the allowed networks */
    if (!gw_cidr_list_contains(p->conf.allowed_networks, p->conf.num_allowed_networks, (const struct sockaddr *)&ex->addr.ss)) {
        gw_exchange_fail(ex, GW_ERR_UPSTREAM_FORBIDDEN, NULL);
        return;
    }

    ex->up_req.head = build_request_head(ex);
    gw_exchange_watch_client(ex);
    key = (gw_upstream_key_t){ex->sandbox_id, ex->lifecycle, ex->port, &ex->addr};
    /* a streaming body takes a fresh connection: what h2o handed over is gone once written, so it could not be sent again
       on the retry a pooled connection the app closed while idle needs (docs/uploads.md) */
    if (!ex->is_websocket && !ex->is_tcp && !ex->up_req.streaming && (sock = gw_upstream_pool_take(p->pool, &key)) != NULL) {
        GW_PROXY_COUNT(p, reuses, 1);
        ex->reused = 1;
        ex->sock = sock;
        sock->data = ex;
        start_request(ex);
    } else {
        connect_fresh(ex);
    }
}

void gw_proxy_set_hangup(gw_proxy_t *p, gw_hangup_t *h)
{
    p->hangup = h;
}

void gw_proxy_set_counters(gw_proxy_t *p, gw_proxy_counters_t *c)
{
    p->counters = c;
}

void gw_proxy_set_meter(gw_proxy_t *p, gw_worker_meter_t *meter)
{
    p->meter = meter;
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
    gw_h2c_drop(p->h2c, sandbox_id, current_lifecycle);
    gw_orphans_close(p, sandbox_id, current_lifecycle);
}

void gw_proxy_client_closed(gw_proxy_t *p, h2o_socket_t *sock)
{
    gw_deliveries_close(p->deliveries, sock);
}

void gw_proxy_settle_deliveries(gw_proxy_t *p)
{
    gw_deliveries_settle_all(p->deliveries);
}
