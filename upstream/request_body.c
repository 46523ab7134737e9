/*
 * A request body that streams to the sandbox (request_body.h): h2o's
 * write_req / proceed_req cycle, one chunk at a time, framed as the client
 * declared it (Content-Length) or chunked.
 */
#include <stdio.h>
#include <string.h>
#include "upstream/exchange.h"
#include "upstream/h2c_call.h"
#include "upstream/request_body.h"

typedef struct st_drain_t {
    h2o_req_t *req;
    size_t left;
} drain_t;

/* write_req.cb of a body ended early (HTTP/1): dropped, up to the bound. */
static int on_drain(void *ctx, int is_end_stream)
{
    drain_t *d = ctx;
    h2o_req_t *req = d->req;

    if (is_end_stream)
        return 0; /* h2o ends the request (and serves the next one on the connection) */
    if (req->entity.len > d->left)
        return -1; /* h2o closes the connection once the response is over */
    d->left -= req->entity.len;
    req->proceed_req(req, NULL);
    return 0;
}

void gw_request_body_end(h2o_req_t *req, int in_hand)
{
    drain_t *d;

    if (!gw_request_body_streams(req) || req->write_req.cb == on_drain)
        return;
    if (req->version >= 0x200) {
        req->proceed_req(req, h2o_httpclient_error_is_eos);
        return;
    }
    d = h2o_mem_alloc_pool(&req->pool, *d, 1);
    *d = (drain_t){req, GW_REQUEST_BODY_DRAIN_BYTES};
    req->write_req.cb = on_drain;
    req->write_req.ctx = d;
    if (in_hand)
        req->proceed_req(req, NULL);
}

void gw_request_body_close(h2o_req_t *req)
{
    if (gw_request_body_streams(req))
        req->proceed_req(req, "closed");
}

/* The chunk that would pass limits.max_request_body_bytes: nothing of it
 * reaches the app. Before the response head, the contract's 413; after it,
 * the response is cut. Run from ex->timer, outside h2o's write_req call: a
 * stream reset inside it would close the HTTP/2 stream under h2o's feet. */
static void on_over_limit(gw_timer_t *entry)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, timer, entry);

    switch (ex->state) {
    case GW_EX_CONNECTING:
    case GW_EX_AWAIT_HEAD:
        gw_exchange_fail(ex, GW_ERR_BODY_TOO_LARGE, NULL);
        break;
    case GW_EX_BODY:
        /* HTTP/2: the stream is reset (INTERNAL_ERROR), what the client still sends on it credits the connection window
           only; HTTP/1: the connection is shut, and the reset ends the body after it */
        gw_exchange_reset(ex, GW_CUT_BODY_TOO_LARGE);
        break;
    case GW_EX_OVER:
        break;
    }
}

static void on_chunk_written(h2o_socket_t *sock, const char *err)
{
    gw_exchange_t *ex = sock->data;

    ex->up_req.writing = 0;
    if (err != NULL) {
        /* the app closed or reset its side: it may still answer (413 before reading the body), the read side decides; the
           body is held where it is until the exchange ends (and ends it) */
        ex->up_req.done = 1;
        ex->up_req.failed = 1;
        if (ex->state == GW_EX_AWAIT_HEAD)
            gw_exchange_set_silence(ex, GW_SILENCE_FIRST_BYTE, gw_exchange_on_first_byte_timeout);
        return;
    }
    gw_proxy_add_bytes(ex->proxy, ex->sandbox_id, ex->no_activity, 0, ex->up_req.body_inflight);
    ex->up_req.body_written += ex->up_req.body_inflight;
    ex->up_req.body_inflight = 0;
    h2o_buffer_consume(&ex->up_req.chunk, ex->up_req.chunk->size);
    /* the app took a chunk: its silence counts from here (as the buffered body's slices) */
    if (ex->state == GW_EX_AWAIT_HEAD)
        gw_exchange_set_silence(ex, GW_SILENCE_FIRST_BYTE, gw_exchange_on_first_byte_timeout);
    if (ex->up_req.body_end) {
        ex->up_req.done = 1;
        return;
    }
    /* the next chunk: h2o reads the client again (HTTP/2: credits the stream window), and may call on_write_req at once */
    ex->up_req.in_hand = 0;
    ex->req->proceed_req(ex->req, NULL);
}

/* Writes `data` (the client's bytes) to the app, after the head when it is
 * not out yet, framed, with the last chunk when is_end. HTTP/1's chunk stays
 * where h2o put it until proceed_req; HTTP/2's buffer grows (and may move)
 * as DATA frames arrive, so its chunk is copied first (copied: it is in
 * ex->up_req.chunk already). */
static void write_chunk(gw_exchange_t *ex, h2o_iovec_t data, int is_end, int copied)
{
    static const h2o_iovec_t tails[2][2] = {{{NULL, 0}, {H2O_STRLIT("0\r\n\r\n")}},
                                            {{H2O_STRLIT("\r\n")}, {H2O_STRLIT("\r\n0\r\n\r\n")}}};
    h2o_iovec_t bufs[4];
    size_t n = 0;

    if (ex->up_req.body_written + data.len > ex->req->conn->ctx->globalconf->max_request_entity_size) {
        ex->up_req.failed = 1; /* the app's connection is in the middle of a request: never pooled, never written again */
        gw_exchange_clear_timer(ex);
        ex->timer.cb = on_over_limit;
        h2o_timer_link(ex->proxy->ctx->loop, 0, &ex->timer);
        return;
    }
    ex->up_req.body_inflight = data.len;
    if (!ex->up_req.head_written) {
        bufs[n++] = ex->up_req.head;
        ex->up_req.head_written = 1;
    }
    if (ex->up_req.chunked && data.len != 0)
        bufs[n++] = h2o_iovec_init(ex->up_req.size_line,
                                   (size_t)snprintf(ex->up_req.size_line, sizeof(ex->up_req.size_line), "%zx\r\n", data.len));
    if (data.len != 0) {
        if (ex->req->version >= 0x200) {
            if (!copied)
                h2o_buffer_append(&ex->up_req.chunk, data.base, data.len);
            data = h2o_iovec_init(ex->up_req.chunk->bytes, ex->up_req.chunk->size);
        }
        bufs[n++] = data;
    }
    if (ex->up_req.chunked && tails[data.len != 0][is_end != 0].len != 0)
        bufs[n++] = tails[data.len != 0][is_end != 0];
    if (n == 0) {
        /* the end of a Content-Length body, with no byte: nothing to write */
        ex->up_req.done = 1;
        return;
    }
    ex->up_req.writing = 1;
    h2o_socket_write(ex->sock, bufs, n, on_chunk_written);
}

/* h2o's write_req.cb: the next chunk is in req->entity. */
static int on_write_req(void *ctx, int is_end_stream)
{
    gw_exchange_t *ex = ctx;

    ex->up_req.in_hand = 1;
    if (is_end_stream)
        ex->up_req.body_end = 1;
    /* the exchange is over, or its app stopped reading: the chunk stays with h2o until the exchange's end ends the body */
    if (ex->sock == NULL || ex->up_req.failed || ex->state == GW_EX_OVER || !ex->up_req.head_written)
        return 0;
    if (is_end_stream) /* its trailers came with its end (h2o's req->trailers): ingress, though HTTP/1.1 apps never get them */
        gw_proxy_add_bytes(ex->proxy, ex->sandbox_id, ex->no_activity, 0,
                           gw_h2c_headers_size(ex->req->trailers.entries, ex->req->trailers.size));
    write_chunk(ex, ex->req->entity, is_end_stream, 0);
    return 0;
}

void gw_request_body_take(gw_exchange_t *ex)
{
    h2o_req_t *req = ex->req;
    h2o_socket_t *sock;

    ex->up_req.streaming = 1;
    ex->up_req.in_hand = 1; /* what h2o read before on_req */
    ex->up_req.chunked = req->content_length == SIZE_MAX;
    h2o_buffer_init(&ex->up_req.chunk, &h2o_socket_buffer_prototype);
    /* HTTP/2: what h2o holds now may move before the connection is up (h2o appends DATA to it and leaves req->entity as
       it is once write_req.cb is set): copied now; proceed_req consumes as much of its buffer, which only grows at the end */
    if (req->version >= 0x200 && req->entity.len != 0)
        h2o_buffer_append(&ex->up_req.chunk, req->entity.base, req->entity.len);
    /* an HTTP/1.1 client's reads are one chunk each: at most this much of it is in the gateway at a time (h2o reads up to
       1 MiB at once, and holds it twice, TLS-encrypted and not) */
    if (req->version < 0x200 && (sock = gw_conn_socket(req->conn)) != NULL)
        h2o_evloop_socket_set_max_read_size(sock, GW_REQUEST_BODY_READ_BYTES);
    req->write_req.cb = on_write_req;
    req->write_req.ctx = ex;
}

void gw_request_body_start(gw_exchange_t *ex)
{
    h2o_req_t *req = ex->req;

    /* what h2o read before the request was processed; the body is not over (proceed_req is set), or it would not stream */
    if (req->version >= 0x200)
        write_chunk(ex, h2o_iovec_init(ex->up_req.chunk->bytes, ex->up_req.chunk->size), 0, 1);
    else
        write_chunk(ex, req->entity.base != NULL ? req->entity : h2o_iovec_init("", 0), 0, 0);
}
