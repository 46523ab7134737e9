/*
 * The HTTP/2 leg's response (upstream/h2c.h): the app's head, body and
 * trailers to the client as they arrive, paced by the client's reading (the
 * upstream stream's window is opened as h2o reports sends written), billed
 * by acknowledgement, with the silence limits of CONTRACT.md "Long calls".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <h2o.h>
#include <h2o/http2.h>
#include "upstream/h2c_call.h"

/* At most this much of the response is handed to h2o per h2o_send. */
#define SEND_CHUNK_BYTES (128 * 1024)

void gw_h2c_account(call_t *c)
{
    size_t now = c->state == CALL_OVER && c->last == NULL ? 0
                                                          : (c->client != NULL && c->last == NULL ? (*c->client->buf)->size : 0) +
                                                                c->sending.buf->size + (c->last != NULL ? c->last->size : 0);

    gw_held_move(c->h2c->proxy->held, (uint64_t)(uintptr_t)c->req->conn, c->held, now);
    c->held = now;
}

/* Over limits.max_connection_buffer_bytes (for c's client connection) or limits.max_worker_buffer_bytes: the calls
 * waiting longest for their clients are cut until both hold (response.c's rule for the HTTP/1.1 leg's exchanges).
 * Returns 1 when c itself was cut (then it must not be used again). */
static int enforce_budgets(call_t *c)
{
    gw_h2c_t *h = c->h2c;
    gw_proxy_t *p = h->proxy;
    uint64_t conn = (uint64_t)(uintptr_t)c->req->conn;
    h2o_linklist_t *node, *next;

    for (node = h->waiting.next;
         node != &h->waiting && gw_held_over(p->held, conn, p->conf.max_connection_buffer_bytes, p->conf.max_worker_buffer_bytes);
         node = next) {
        call_t *victim = H2O_STRUCT_FROM_MEMBER(call_t, waiting, node);
        next = node->next;
        if (!gw_held_is_victim(p->held, conn, p->conf.max_worker_buffer_bytes, (uint64_t)(uintptr_t)victim->req->conn,
                               victim->held))
            continue;
        GW_PROXY_COUNT(p, budget_resets, 1);
        /* c's stream is in the client's callback: h2o resets it when the callback says so, never cancelled inside */
        if (victim == c)
            gw_h2c_detach_client(c);
        gw_h2c_cut(victim, GW_CUT_CLIENT_STALL);
        if (victim == c)
            return 1;
    }
    return 0;
}

size_t gw_h2c_headers_size(const h2o_header_t *h, size_t n)
{
    size_t sum = 0, i;
    for (i = 0; i != n; ++i)
        sum += h[i].name->len + h[i].value.len + 4;
    return sum;
}

/* Hands what is buffered to h2o (h2o_send), billing as response.c does: at proceed what h2o wrote, the final send as it
 * is handed over (h2o calls no proceed after it). The final send may dispose the request: the caller's last use of c. */
void gw_h2c_send(call_t *c)
{
    h2o_req_t *req = c->req;
    h2o_buffer_t **from = c->last != NULL ? &c->last : c->client != NULL ? c->client->buf : NULL;
    h2o_iovec_t vec = {NULL, 0};
    size_t head = c->started ? 0 : gw_exchange_response_head_size(req);

    if (from != NULL)
        vec = h2o_doublebuffer_prepare(&c->sending, from, SEND_CHUNK_BYTES);
    if (c->last != NULL && vec.len == c->sending.buf->size && c->last->size == 0) {
        h2o_send_state_t state = c->body_error ? H2O_SEND_STATE_ERROR : H2O_SEND_STATE_FINAL;
        c->state = CALL_OVER;
        c->started = 1;
        gw_timer_unlink(&c->silence.entry);
        gw_proxy_add_egress(c->h2c->proxy, gw_conn_socket(req->conn), c->sandbox_id, c->no_activity,
                            head + vec.len + gw_h2c_headers_size(req->res.trailers.entries, req->res.trailers.size), 0);
        /* the app answered whole before the client's body ended: the rest of it is not read (request_body.h) */
        int end_body = gw_request_body_streams(req), in_hand = c->in_hand;
        h2o_send(req, &vec, vec.len != 0 ? 1 : 0, state);
        if (end_body)
            gw_request_body_end(req, in_hand);
        return;
    }
    if (vec.len == 0 && c->started)
        return;
    /* waiting for the client is not the app's silence: the timer runs again at proceed; the client's is (its stall) */
    gw_timer_unlink(&c->silence.entry);
    if (c->h2c->proxy->client_stall_timeout.enabled)
        gw_timer_link(c->h2c->proxy->ctx->loop, c->h2c->proxy->client_stall_timeout.timeout, &c->stall);
    h2o_linklist_insert(&c->h2c->waiting, &c->waiting);
    c->in_send = 1;
    c->started = 1;
    c->unbilled = vec.len + head;
    h2o_send(req, &vec, vec.len != 0 ? 1 : 0, H2O_SEND_STATE_IN_PROGRESS);
}

/* The app said something (or is about to be asked): its next silence ends at the limit of the phase (CONTRACT.md,
 * Long calls): a streamed type's event_stream_idle_timeout_ms (0: never), else the port's timeout:<n>, else
 * first_byte_timeout_ms before the head and idle_timeout_ms after. */
void gw_h2c_arm_silence(call_t *c)
{
    gw_proxy_t *p = c->h2c->proxy;
    uint64_t ms;

    gw_timer_unlink(&c->silence.entry);
    if (c->state == CALL_BODY && c->streamed)
        ms = p->conf.event_stream_idle_timeout_ms;
    else if (c->timeout_ms != 0)
        ms = c->timeout_ms;
    else
        ms = c->state == CALL_BODY ? p->conf.idle_timeout_ms : p->conf.first_byte_timeout_ms;
    if (ms != 0)
        gw_delay_timer_link(p->ctx->loop, &c->silence, ms);
}

void gw_h2c_on_silence(gw_timer_t *entry)
{
    call_t *c = H2O_STRUCT_FROM_MEMBER(call_t, silence.entry, entry);
    char detail[384];

    if (c->state != CALL_BODY) {
        gw_proxy_silence_detail(c->h2c->proxy, c->timeout_ms, c->port, GW_SILENCE_FIRST_BYTE, detail, sizeof(detail));
        gw_cut_note(c->req, GW_CUT_FIRST_BYTE_TIMEOUT);
        gw_h2c_fail_why(c, GW_ERR_UPSTREAM_TIMEOUT, GW_WHY_SILENCE_LIMIT, detail, NULL);
        return;
    }
    /* mid-body: a cut (RST_STREAM INTERNAL_ERROR), except an event stream, which ends cleanly (response.c) */
    gw_cut_note(c->req, GW_CUT_IDLE_TIMEOUT);
    if (!c->sse) {
        gw_h2c_cut(c, GW_CUT_IDLE_TIMEOUT);
        return;
    }
    if (c->client != NULL && c->last == NULL) {
        c->last = *c->client->buf;
        h2o_buffer_init(c->client->buf, &h2o_socket_buffer_prototype);
    }
    gw_h2c_close_upstream(c);
    if (c->last == NULL)
        h2o_buffer_init(&c->last, &h2o_socket_buffer_prototype);
    if (!c->in_send)
        gw_h2c_send(c);
}

void gw_h2c_on_client_stall(gw_timer_t *entry)
{
    call_t *c = H2O_STRUCT_FROM_MEMBER(call_t, stall, entry);

    GW_PROXY_COUNT(c->h2c->proxy, client_stalls, 1);
    gw_h2c_cut(c, GW_CUT_CLIENT_STALL);
}

void gw_h2c_on_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    call_t *c = (void *)generator;

    c->in_send = 0;
    gw_timer_unlink(&c->stall);
    if (h2o_linklist_is_linked(&c->waiting))
        h2o_linklist_unlink(&c->waiting);
    gw_proxy_add_egress(c->h2c->proxy, gw_conn_socket(c->req->conn), c->sandbox_id, c->no_activity, c->unbilled, 1);
    c->unbilled = 0;
    if (c->state == CALL_OVER && c->last == NULL) {
        /* cut while the send was in flight (an HTTP/1 client whose connection was shut wrote it all the same): the
         * response ends as a cut one */
        h2o_send(req, NULL, 0, H2O_SEND_STATE_ERROR);
        return;
    }
    if (gw_doublebuffer_inflight(&c->sending) != 0)
        h2o_doublebuffer_consume(&c->sending);
    gw_h2c_account(c);
    int streaming = c->last == NULL;
    /* the client took what was sent: the app may send again (the stream's window) */
    if (c->client != NULL && !c->res_done)
        c->client->update_window(c->client);
    gw_h2c_send(c); /* final (the last use of c) only once the upstream is done */
    if (streaming && !c->in_send && c->state == CALL_BODY)
        gw_h2c_arm_silence(c);
}

void gw_h2c_on_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    call_t *c = (void *)generator;

    (void)req;
    gw_h2c_close_upstream(c);
    c->state = CALL_OVER;
}

static int on_body(h2o_httpclient_t *client, const char *errstr, h2o_header_t *trailers, size_t num_trailers)
{
    call_t *c = client->data;

    if (c == NULL)
        return -1;
    if (num_trailers != 0)
        c->req->res.trailers = (h2o_headers_t){trailers, num_trailers, num_trailers};
    if (errstr != NULL) {
        /* the rest of the body stays with the call; the stream is h2o's to close */
        c->last = *client->buf;
        h2o_buffer_init(client->buf, &h2o_socket_buffer_prototype);
        gw_timer_unlink(&c->silence.entry);
        if (errstr == h2o_httpclient_error_is_eos) {
            c->res_done = 1;
            if (c->req_done)
                gw_h2c_detach_client(c);
        } else {
            /* the app reset the stream or the connection broke: the client sees the truncation */
            gw_h2c_detach_client(c);
            c->body_error = 1;
            gw_cut_note(c->req, GW_CUT_UPSTREAM_RESET);
            if (c->req->proceed_req != NULL)
                c->req->proceed_req(c->req, errstr);
        }
    }
    gw_h2c_account(c);
    if (errstr == NULL && enforce_budgets(c))
        return -1; /* h2o resets the app's stream */
    int streaming = c->last == NULL;
    if (!c->in_send)
        gw_h2c_send(c); /* final (the last use of c) only once the upstream is done */
    if (streaming && !c->in_send)
        gw_h2c_arm_silence(c);
    return 0;
}

/* The app's response header `h` as the client gets it; 0: dropped. */
static int take_response_header(call_t *c, const h2o_header_t *h, int dup, h2o_iovec_t *value)
{
    h2o_req_t *req = c->req;
    *value = dup ? h2o_strdup(&req->pool, h->value.base, h->value.len) : h->value;
    if (!h2o_iovec_is_token(h->name))
        return 1;
    const h2o_token_t *token = H2O_STRUCT_FROM_MEMBER(h2o_token_t, buf, h->name);
    if (token->flags.proxy_should_drop_for_res || token == H2O_TOKEN_DATE ||
        (token == H2O_TOKEN_SERVER && req->conn->ctx->globalconf->server_name.len != 0))
        return 0;
    if (token == H2O_TOKEN_CONTENT_LENGTH) {
        req->res.content_length = h2o_strtosize(value->base, value->len);
        return 0;
    }
    if ((token == H2O_TOKEN_SET_COOKIE || c->localhost) && !gw_address_view_response_header(&c->view, &req->pool, token, value))
        return 0;
    return 1;
}

h2o_httpclient_body_cb gw_h2c_on_head(h2o_httpclient_t *client, const char *errstr, h2o_httpclient_on_head_t *args)
{
    call_t *c = client->data;
    h2o_req_t *req;
    size_t i;

    if (c == NULL)
        return NULL;
    req = c->req;
    gw_timer_unlink(&c->silence.entry);
    if (errstr != NULL && errstr != h2o_httpclient_error_is_eos) {
        h2o_httpclient_conn_properties_t props;
        memset(&props, 0, sizeof(props));
        char detail[384];
        client->get_conn_properties(client, &props);
        /* the stream is h2o's to close */
        gw_h2c_detach_client(c);
        if (errstr == h2o_httpclient_error_refused_stream && gw_h2c_retry(c) == 0)
            return NULL;
        if (props.sock != NULL && gw_h2c_is_http1_answer(props.sock->input->bytes, props.sock->input->size)) {
            gw_h2c_fail_why(c, GW_ERR_BAD_UPSTREAM_RESPONSE, GW_WHY_H2C_HTTP1, NULL, NULL);
        } else if (errstr == h2o_httpclient_error_protocol_violation && props.sock != NULL && props.sock->input->size != 0) {
            /* what the app sent where a frame was expected, quoted (an HTTP/1.x server that answers the preface's "PRI *
             * HTTP/2.0" as HTTP/0.9 sends a bare HTML page) */
            size_t q = gw_http1_quote(detail, sizeof(detail), props.sock->input->bytes, props.sock->input->size);
            gw_h2c_fail_why(c, GW_ERR_BAD_UPSTREAM_RESPONSE, GW_WHY_H2C_NOT_HTTP2, q != 0 ? detail + 1 : NULL, NULL);
        } else if (errstr == h2o_httpclient_error_io) {
            gw_h2c_fail(c, GW_ERR_PORT_NOT_OPEN, DETAIL_CLOSED);
        } else {
            snprintf(detail, sizeof(detail), "The gateway's HTTP/2 client said: %s.", errstr);
            gw_h2c_fail_why(c, GW_ERR_BAD_UPSTREAM_RESPONSE, GW_WHY_H2C_NOT_HTTP2, detail, NULL);
        }
        return NULL;
    }

    req->res.status = args->status;
    req->res.reason = args->status == 200 ? "OK" : ""; /* HTTP/2 has none; an HTTP/1.1 client's status line may have none */
    for (i = 0; i != args->num_headers; ++i) {
        const h2o_header_t *h = args->headers + i;
        h2o_iovec_t value;
        if (!take_response_header(c, h, args->header_requires_dup, &value))
            continue;
        if (h2o_iovec_is_token(h->name)) {
            h2o_add_header(&req->pool, &req->res.headers, H2O_STRUCT_FROM_MEMBER(h2o_token_t, buf, h->name), NULL, value.base,
                           value.len);
        } else {
            h2o_iovec_t name = args->header_requires_dup ? h2o_strdup(&req->pool, h->name->base, h->name->len) : *h->name;
            h2o_add_header_by_str(&req->pool, &req->res.headers, name.base, name.len, 0, NULL, value.base, value.len);
        }
    }
    int streamed = gw_exchange_is_streamed(req);
    c->streamed = streamed != 0;
    c->sse = streamed == 2;
    c->state = CALL_BODY;
    h2o_start_response(req, &c->super);
    if (errstr == h2o_httpclient_error_is_eos) {
        /* a head without a body (a gRPC Trailers-Only answer comes as one HEADERS frame) */
        c->res_done = 1;
        if (c->req_done)
            gw_h2c_detach_client(c);
        h2o_buffer_init(&c->last, &h2o_socket_buffer_prototype);
        gw_h2c_send(c);
        return NULL;
    }
    gw_h2c_arm_silence(c);
    /* the head goes now: a server-streaming call's first message may come much later */
    gw_h2c_send(c);
    return on_body;
}
