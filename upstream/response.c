/*
 * Streaming a sandbox's response body to the client with back-pressure: the
 * upstream is read only while less than limits.response_buffer_bytes is held,
 * an HTTP/2 send is cut to the client's flow-control credit, and a response
 * its client does not take is reset (client stall, connection and worker
 * memory budgets).
 */
#include <assert.h>
#include <sys/socket.h>
#include <h2o.h>
#include <h2o/http2.h>
#include "common/engine.h"
#include "upstream/exchange.h"

/* At most this much of the response is handed to h2o per h2o_send: it bounds
 * the copy a TLS socket makes while encrypting. */
#define SEND_CHUNK_BYTES (128 * 1024)
/* The final send is billed as it is handed over (h2o calls no proceed
 * after it), before h2o has written it: of a larger rest, all but this much
 * goes first, billed when written, then a final send of this much. Bounds
 * what a connection that closes while h2o still writes can be billed for
 * and never get (docs/metering.md, Metering). Not under HTTP/2 when the piece takes
 * the client's whole window: h2o 2.2.5 would hold the empty END_STREAM
 * after it until the client opens the window again. */
#define FINAL_SEND_MAX_BYTES (16 * 1024)
/* What is handed to h2o for an HTTP/2 stream without flow-control credit:
 * it goes out when the client opens its window (h2o then calls proceed). */
#define STALLED_SEND_BYTES (16 * 1024)

static void on_body_read(h2o_socket_t *sock, const char *err);

void gw_exchange_account(gw_exchange_t *ex)
{
    size_t now =
        ex->cut ? 0 : ex->rest->size + ex->sending.buf->size + (ex->sock != NULL ? ex->sock->input->size : 0) + gw_splice_held(ex);

    gw_held_move(ex->proxy->held, (uint64_t)(uintptr_t)ex->req->conn, ex->held, now);
    ex->held = now;
}

void gw_exchange_stop_waiting(gw_exchange_t *ex)
{
    if (gw_timer_is_linked(&ex->stall_timer))
        gw_timer_unlink(&ex->stall_timer);
    if (h2o_linklist_is_linked(&ex->waiting))
        h2o_linklist_unlink(&ex->waiting);
}

/* The response body is over (complete, or not): the connection goes back
 * to the pool when it can serve another request, else it is closed. Body
 * bytes not yet sent stay with the exchange. */
void gw_exchange_release_upstream(gw_exchange_t *ex, int complete)
{
    h2o_socket_t *sock = ex->sock;
    h2o_buffer_t *empty = ex->rest;

    gw_exchange_clear_timer(ex);
    /* the app is done: a client leaving now is h2o's to notice as it writes */
    gw_exchange_unwatch_client(ex);
    ex->sock = NULL;
    /* ex->rest is empty: the upstream is released once */
    ex->rest = sock->input;
    sock->input = empty;
    if (complete && ex->res.body.keepalive && ex->up_req.done && !ex->up_req.failed && !ex->is_websocket) {
        gw_upstream_key_t key = {ex->sandbox_id, ex->lifecycle, ex->port, &ex->addr};
        h2o_socket_read_stop(sock);
        gw_upstream_pool_put(ex->proxy->pool, &key, sock);
    } else {
        h2o_socket_close(sock);
    }
}

/* How much of the response one h2o_send may carry. Under HTTP/2 a send is
 * cut to the flow-control credit the client has given (stream and
 * connection), so that what h2o is handed is written at once and confirmed
 * by proceed: a stream the client stalls holds at most one small send that
 * is never billed. *credit is 0 when that small send is beyond the credit. */
static size_t send_limit(gw_exchange_t *ex, int *credit)
{
    ssize_t window;

    *credit = 1;
    if (ex->req->version < 0x200)
        return SEND_CHUNK_BYTES;
    if ((window = h2o_http2_get_send_window(ex->req)) <= 0) { /* patch 0230 */
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
void gw_exchange_send(gw_exchange_t *ex)
{
    h2o_buffer_t **receiving = ex->sock != NULL ? &ex->sock->input : &ex->rest;
    h2o_send_state_t state;
    h2o_iovec_t vec;
    size_t limit;
    int credit, end_body = 0, in_hand = ex->up_req.in_hand;
    h2o_req_t *req = ex->req;

    assert(!ex->res.sending);
    limit = send_limit(ex, &credit);
    /* The upstream is done and more than a final send's worth is left: this
     * send leaves exactly that much, so that the END_STREAM goes with body
     * bytes, not alone after them. A client that stops reading at the
     * Content-Length (curl) otherwise closes with the empty END_STREAM
     * unread, its kernel answers with a reset, and the reset's ACK, the
     * only one of the last bytes when its delayed ACK was still pending, is
     * not processed by the gateway's kernel: the ledger saw those bytes
     * never acknowledged and did not bill them. */
    if (ex->sock == NULL) {
        size_t left = ex->sending.buf->size + (*receiving)->size;
        if (left > FINAL_SEND_MAX_BYTES && left - FINAL_SEND_MAX_BYTES < limit)
            limit = left - FINAL_SEND_MAX_BYTES;
    }
    vec = h2o_doublebuffer_prepare(&ex->sending, receiving, limit);
    if (ex->sock == NULL && vec.len == ex->sending.buf->size && (*receiving)->size == 0 && (vec.len == 0 || credit) &&
        (vec.len <= FINAL_SEND_MAX_BYTES || (ex->req->version >= 0x200 && vec.len == limit))) {
        state = ex->res.body_error ? H2O_SEND_STATE_ERROR : H2O_SEND_STATE_FINAL;
        ex->state = GW_EX_OVER;
        /* the app answered whole before the client's body ended: the rest of it is not read (request_body.h) */
        end_body = gw_request_body_streams(req);
        /* an ERROR send is written too (h2o then closes the HTTP/1
         * connection, or resets the HTTP/2 stream after the data): a cut
         * body's last piece reaches the client like a complete one's */
        gw_proxy_add_egress(ex->proxy, gw_exchange_client_socket(ex), ex->sandbox_id, ex->no_activity,
                            vec.len + (ex->res.started ? 0 : gw_exchange_response_head_size(ex->req)), 0);
    } else {
        /* an empty send is only for getting the head out (server-sent
         * events: the head comes long before the first event) */
        if (vec.len == 0 && ex->res.started)
            return;
        state = H2O_SEND_STATE_IN_PROGRESS;
        ex->res.sending = 1;
        if (ex->proxy->client_stall_timeout.enabled)
            gw_timer_link(ex->proxy->ctx->loop, ex->proxy->client_stall_timeout.timeout, &ex->stall_timer);
        h2o_linklist_insert(&ex->proxy->waiting, &ex->waiting);
        ex->res.unbilled = vec.len + (ex->res.started ? 0 : gw_exchange_response_head_size(ex->req));
    }
    ex->res.started = 1;
    h2o_send(req, &vec, vec.len != 0 ? 1 : 0, state);
    if (end_body)
        gw_request_body_end(req, in_hand);
}

static void on_io_timeout(gw_timer_t *entry);

/* The deadline of the app's silence mid-body: streamed media types (server-
 * sent events, NDJSON) are quiet between events for as long as the app likes
 * (a dashboard, a build log, a running cell), so upstream.idle_timeout_ms
 * would cut healthy streams; they have their own, off by default. */
static void set_body_timer(gw_exchange_t *ex)
{
    gw_exchange_set_silence(ex, GW_SILENCE_BODY, on_io_timeout);
}

/* Back-pressure: the upstream is read only while less than read_pause_at of
 * this response is held (received and not yet confirmed sent by h2o). */
static void update_reading(gw_exchange_t *ex)
{
    size_t held = ex->sock->input->size + ex->sending.buf->size;

    /* the body is to be spliced: what is buffered goes first, unread */
    if (ex->splice.wanted)
        return;
    if (held >= ex->proxy->read_pause_at) {
        if (!ex->res.read_paused) {
            h2o_socket_read_stop(ex->sock);
            /* waiting for the client is not the app's idleness */
            gw_exchange_clear_timer(ex);
            ex->res.read_paused = 1;
        }
    } else if (ex->res.read_paused) {
        ex->res.read_paused = 0;
        h2o_socket_read_start(ex->sock, on_body_read);
        set_body_timer(ex);
    }
}

void gw_exchange_on_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    gw_exchange_t *ex = (void *)generator;

    (void)req;
    ex->res.sending = 0;
    gw_exchange_stop_waiting(ex);
    /* h2o wrote the send to the client socket: billed once the client has them */
    gw_proxy_add_egress(ex->proxy, gw_exchange_client_socket(ex), ex->sandbox_id, ex->no_activity, ex->res.unbilled, 1);
    ex->res.unbilled = 0;
    if (gw_doublebuffer_inflight(&ex->sending) != 0)
        h2o_doublebuffer_consume(&ex->sending);
    if (gw_splice_try(ex))
        return;
    if (ex->sock != NULL)
        update_reading(ex);
    gw_exchange_account(ex);
    gw_exchange_send(ex);
}

void gw_exchange_on_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    gw_exchange_t *ex = (void *)generator;

    /* the client went away mid-response: the upstream connection is in an
     * unknown place of its response, so it cannot be reused */
    (void)req;
    gw_exchange_stop_waiting(ex);
    gw_exchange_detach_upstream(ex);
    ex->state = GW_EX_OVER;
}

void gw_exchange_reset(gw_exchange_t *ex, gw_cut_reason_t reason)
{
    h2o_req_t *req = ex->req;
    /* a spliced body, or one waiting for the app, has no send in flight whose failure would end it */
    int no_send = ex->splice.active || !ex->res.sending, end_body = req->version < 0x200 && gw_request_body_streams(req);

    gw_exchange_stop_waiting(ex);
    gw_exchange_detach_upstream(ex);
    h2o_buffer_dispose(&ex->rest);
    h2o_buffer_init(&ex->rest, &h2o_socket_buffer_prototype);
    ex->cut = 1;
    gw_exchange_account(ex);
    ex->state = GW_EX_OVER;
    gw_exchange_release_slots(ex);
    gw_cut_note(req, reason);
    gw_response_cut_client(req, no_send, end_body);
}

void gw_response_cut_client(h2o_req_t *req, int no_send, int end_body)
{
    if (req->version >= 0x200) {
        /* INTERNAL_ERROR, as every cut (CONTRACT.md, Long calls) */
        h2o_http2_reset_request(req, H2O_HTTP2_ERROR_INTERNAL); /* patch 0230 */
        return;
    }
    /* the write in flight fails (EPIPE) and h2o closes the connection;
     * no linger: what the kernel holds for the client is dropped */
    h2o_socket_t *sock = gw_conn_socket(req->conn);
    struct linger lg = {1, 0};
    if (sock != NULL) {
        setsockopt(h2o_socket_get_fd(sock), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        shutdown(h2o_socket_get_fd(sock), SHUT_RDWR);
    }
    if (no_send)
        h2o_send(req, NULL, 0, H2O_SEND_STATE_ERROR);
    /* a body still arriving: h2o closes the connection once the response is over (HTTP/2's reset ends it) */
    if (end_body)
        gw_request_body_close(req);
}

/* The client took no byte of the send in flight for
 * limits.client_stall_timeout_ms. */
void gw_exchange_on_client_stall(gw_timer_t *entry)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, stall_timer, entry);
    GW_PROXY_COUNT(ex->proxy, client_stalls, 1);
    gw_exchange_reset(ex, GW_CUT_CLIENT_STALL);
}

/* Over limits.max_connection_buffer_bytes (for ex's client connection) or
 * limits.max_worker_buffer_bytes: the responses waiting longest for their
 * client are reset until both hold. A response whose client takes it is
 * the last to go; its own bound is response_buffer_bytes. Returns 1 when ex
 * itself was reset (then it must not be used again). */
static int enforce_budgets(gw_exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    uint64_t conn = (uint64_t)(uintptr_t)ex->req->conn;
    size_t conn_max = p->conf.max_connection_buffer_bytes;
    size_t worker_max = p->conf.max_worker_buffer_bytes;
    h2o_linklist_t *node, *next;

    for (node = p->waiting.next; node != &p->waiting && gw_held_over(p->held, conn, conn_max, worker_max); node = next) {
        gw_exchange_t *victim = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, waiting, node);
        next = node->next;
        if (!gw_held_is_victim(p->held, conn, worker_max, (uint64_t)(uintptr_t)victim->req->conn, victim->held))
            continue;
        GW_PROXY_COUNT(p, budget_resets, 1);
        if (victim == ex) {
            gw_exchange_reset(ex, GW_CUT_CLIENT_STALL);
            return 1;
        }
        /* the victim may be disposed now; `next` is not (a request owns no
         * other), and it is still linked unless it was ex */
        gw_exchange_reset(victim, GW_CUT_CLIENT_STALL);
    }
    return 0;
}

static void on_io_timeout(gw_timer_t *entry)
{
    gw_exchange_t *ex = H2O_STRUCT_FROM_MEMBER(gw_exchange_t, timer, entry);

    /* mid-body: the client gets a truncated response (HTTP/1: the
     * connection closes; HTTP/2: RST_STREAM). An event stream without a
     * length ends cleanly instead (last chunk, END_STREAM): it is a sequence
     * of events, not a document, and EventSource reconnects from a clean end
     * (with Last-Event-ID) where it would report an error for a cut one. */
    if (!ex->event_stream || ex->res.body.framing == GW_HTTP1_LENGTH)
        ex->res.body_error = 1;
    gw_cut_note(ex->req, GW_CUT_IDLE_TIMEOUT);
    gw_exchange_release_upstream(ex, 0);
    if (!ex->res.sending)
        gw_exchange_send(ex);
}

/* The body bytes that arrived are decoded (`ret` as gw_http1_body_decode's). */
static void on_body_decoded(gw_exchange_t *ex, int ret)
{
    if (ret < 0) {
        /* the app closed or broke its body before its end */
        ex->res.body_error = 1;
        gw_cut_note(ex->req, GW_CUT_UPSTREAM_RESET);
    }
    if (ret != 0) {
        gw_exchange_release_upstream(ex, ret > 0);
    } else {
        update_reading(ex);
    }
    gw_exchange_account(ex);
    if (enforce_budgets(ex))
        return;
    if (!ex->res.sending)
        gw_exchange_send(ex);
}

/* `newbytes` more bytes of body are at the end of the upstream input, or
 * the upstream said `err`. */
static void on_body_bytes(gw_exchange_t *ex, size_t newbytes, const char *err)
{
    int ret;

    if (err != NULL) {
        /* a chunked body cut short is an error too, unlike h2o 2.2.5's
         * proxy: the client sees the truncation the app caused */
        ret = ex->res.body.framing == GW_HTTP1_UNTIL_CLOSE ? 1 : -1;
        ex->res.body.keepalive = 0;
    } else {
        h2o_buffer_t *in = ex->sock->input;
        size_t len = newbytes;
        set_body_timer(ex);
        ret = gw_http1_body_decode(&ex->res.body, in->bytes + in->size - newbytes, &len);
        in->size -= newbytes - len;
        if (ex->sse_watched)
            gw_exchange_events_seen(ex, in->bytes + in->size - len, len);
    }
    on_body_decoded(ex, ret);
}

static void on_body_read(h2o_socket_t *sock, const char *err)
{
    on_body_bytes(sock->data, gw_socket_bytes_last_read(sock), err);
}

int gw_exchange_decode_first(gw_exchange_t *ex, size_t head_size)
{
    h2o_buffer_t *in = ex->sock->input;
    size_t len = in->size - head_size;

    /* with no bytes too: a Content-Length of 0 is complete at once */
    if ((ex->res.first_decoded = gw_http1_body_decode(&ex->res.body, in->bytes + head_size, &len)) < 0)
        return -1;
    in->size = head_size + len;
    return 0;
}

void gw_exchange_start_body(gw_exchange_t *ex, int no_body)
{
    h2o_socket_t *sock = ex->sock;

    ex->state = GW_EX_BODY;
    int streamed = gw_exchange_is_streamed(ex->req);
    ex->event_stream = streamed != 0;
    /* keepalives are not activity: the bytes that came with the head are the stream's first (server-sent events only) */
    if (streamed == 2 && !no_body && !ex->no_activity)
        gw_exchange_watch_events(ex, sock->input->bytes, sock->input->size);
    h2o_start_response(ex->req, &ex->super);
    if (no_body) {
        if (sock->input->size != 0) {
            /* a body where there must be none: drop it, and the connection */
            h2o_buffer_consume(&sock->input, sock->input->size);
            ex->res.body.keepalive = 0;
        }
        gw_exchange_release_upstream(ex, 1);
        gw_exchange_send(ex);
        return;
    }
    if ((ex->splice.wanted = !ex->sse_watched && gw_splice_eligible(ex))) {
        /* not read again before it is spliced (update_reading); waiting
         * for the client is not the app's idleness (nor its first byte) */
        ex->res.read_paused = 1;
        gw_exchange_clear_timer(ex);
    } else {
        h2o_socket_read_start(sock, on_body_read);
        set_body_timer(ex);
    }
    /* with the bytes that came with the head; this sends the head too */
    on_body_decoded(ex, ex->res.first_decoded);
}

void gw_exchange_cut(gw_exchange_t *ex, gw_cut_reason_t reason)
{
    gw_cut_note(ex->req, reason);
    gw_splice_stop(ex);
    ex->res.body_error = 1;
    if (ex->sock != NULL)
        gw_exchange_release_upstream(ex, 0);
    h2o_buffer_consume(&ex->rest, ex->rest->size);
    gw_exchange_account(ex);
    if (!ex->res.sending) {
        h2o_buffer_consume(&ex->sending.buf, ex->sending.buf->size);
        gw_exchange_send(ex);
    }
}
