/*
 * The TCP tunnel: the sandbox's connection is up before the 101, then its
 * bytes go to the client as binary frames and the client's binary frames'
 * payloads go to the sandbox, unmasked in place. As in tunnel.c each
 * direction has at most one write in flight and its source is not read
 * meanwhile; control frames to the client (Pong, the keep-alive Ping,
 * Close) wait for the data write in flight, so they fall between frames.
 * The client's frames are charged to a budget (ws_budget.h): past it, or
 * past the message size, the tunnel closes 1008 or 1009. A desktop's
 * tunnel (proto rfb) is the same, with the subprotocol "binary" or none;
 * for a view-only grant the client's bytes, once unmasked, are walked as
 * RFB (rfb_walk.h): input messages never reach the sandbox.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <h2o.h>
#include <h2o/http1.h>
#include "common/engine.h"
#include "common/ws_frame.h"
#include "upstream/exchange.h"
#include "upstream/rfb_walk.h"
#include "upstream/tunnel_end.h"
#include "upstream/tcp_tunnel.h"
#include "upstream/tunnel_hold.h"
#include "upstream/ws_track.h"

typedef struct st_tcp_tunnel_t {
    h2o_linklist_t link; /* in proxy->tcp_tunnels */
    gw_proxy_t *proxy;
    gw_tunnel_hold_t hold; /* taken over from the exchange */
    size_t head_bytes;
    h2o_socket_t *sandbox;
    gw_tunnel_end_t *client; /* once the 101 is written: a socket end, or an HTTP/2 stream end (tunnel_end.h) */
    h2o_socket_t *writing;   /* the client's socket while h2o writes the 101, else NULL */
    int revoked;             /* while the 101 was being written */
    /* client -> sandbox */
    uint64_t payload_left;
    uint8_t mask[4];
    uint64_t mask_off;
    int in_message;
    gw_ws_budget_t budget; /* budget.conf NULL: no bounds */
    size_t up_consumed;    /* client input bytes covered by the write to the sandbox in flight; 0: none */
    /* sandbox -> client: one write in flight, data or control */
    int client_busy;
    size_t down_writing; /* sandbox input bytes in that write; 0: a control write */
    uint8_t down_head[GW_WS_MAX_HEADER];
    size_t down_frame; /* bytes of that write (frame header included) */
    uint8_t pong[2 + GW_WS_MAX_CONTROL_PAYLOAD], ping[2 + GW_WS_MAX_CONTROL_PAYLOAD], close[2 + GW_WS_MAX_CONTROL_PAYLOAD];
    size_t pong_len, ping_len, close_len;             /* pending control frames; 0: none */
    uint8_t ctl[3 * (2 + GW_WS_MAX_CONTROL_PAYLOAD)]; /* the control write in flight */
    int close_sent;                                   /* the gateway's Close is out: wait for the client's answer, then end */
    int sandbox_eof;                                  /* 1: FIN, 2: an error; the close goes once what was read is written */
    uint64_t pings;                                   /* Pings sent: the next one's number */
    int awaiting_pong;                                /* the last Ping is unanswered */
    gw_timer_t ping_entry, idle_entry, close_entry;
    int rfb;                /* a desktop's tunnel: GW_RFB_FULL or GW_RFB_VIEW_ONLY; 0: a raw TCP port's */
    gw_timer_t greet_entry; /* rfb: linked until the sandbox's first bytes (upstream.connect_timeout_ms) */
    gw_rfb_walk_t walk;     /* GW_RFB_VIEW_ONLY: the client's RFB stream */
} tcp_tunnel_t;

static void flush_to_client(tcp_tunnel_t *t);
static void on_client_read(gw_tunnel_end_t *end, const char *err);
static void on_sandbox_read(h2o_socket_t *sock, const char *err);

/* --- the handshake -------------------------------------------------------- */

static h2o_iovec_t header_value(h2o_req_t *req, const char *name, size_t len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, len, -1);
    return i == -1 ? h2o_iovec_init(NULL, 0) : req->headers.entries[i].value;
}

static int is_websocket_get(h2o_req_t *req)
{
    h2o_iovec_t version = header_value(req, H2O_STRLIT("sec-websocket-version")),
                key = header_value(req, H2O_STRLIT("sec-websocket-key"));

    if (req->version < 0x101 || !h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) || req->upgrade.base == NULL ||
        !h2o_lcstris(req->upgrade.base, req->upgrade.len, H2O_STRLIT("websocket")))
        return 0;
    return h2o_memis(version.base, version.len, H2O_STRLIT("13")) && key.len != 0 && key.len <= 64;
}

int gw_tcp_tunnel_is_handshake(h2o_req_t *req, h2o_iovec_t path)
{
    size_t plen = sizeof(GW_TCP_TUNNEL_PATH) - 1;
    h2o_iovec_t proto = header_value(req, H2O_STRLIT("sec-websocket-protocol"));

    if (path.len < plen || memcmp(path.base, GW_TCP_TUNNEL_PATH, plen) != 0 || (path.len > plen && path.base[plen] != '?'))
        return 0;
    return is_websocket_get(req) && proto.base != NULL &&
           h2o_contains_token(proto.base, proto.len, H2O_STRLIT(GW_TCP_TUNNEL_PROTOCOL), ',');
}

int gw_rfb_tunnel_is_handshake(h2o_req_t *req)
{
    h2o_iovec_t proto = header_value(req, H2O_STRLIT("sec-websocket-protocol"));
    return is_websocket_get(req) && (proto.base == NULL || h2o_contains_token(proto.base, proto.len, H2O_STRLIT("binary"), ','));
}

/* Sec-WebSocket-Accept (RFC 6455 4.2.2); key is at most 64 bytes (gw_tcp_tunnel_is_handshake) */
static h2o_iovec_t accept_key(h2o_mem_pool_t *pool, h2o_iovec_t key)
{
    char *out = gw_pool_alloc(pool, GW_WS_ACCEPT_SIZE);
    return h2o_iovec_init(out, gw_ws_accept_encode(out, key.base, key.len));
}

/* --- ending --------------------------------------------------------------- */

static void unlink_entry(gw_timer_t *e)
{
    if (gw_timer_is_linked(e))
        gw_timer_unlink(e);
}

static void tunnel_free(tcp_tunnel_t *t)
{
    unlink_entry(&t->ping_entry);
    unlink_entry(&t->idle_entry);
    unlink_entry(&t->close_entry);
    unlink_entry(&t->greet_entry);
    if (t->sandbox != NULL)
        h2o_socket_close(t->sandbox);
    if (t->client != NULL)
        gw_tunnel_end_close(t->client);
    gw_tunnel_hold_release(&t->hold);
    GW_PROXY_COUNT(t->proxy, tcp_tunnels_open, -1);
    if (t->rfb != 0)
        GW_PROXY_COUNT(t->proxy, desktop_viewers[t->rfb == GW_RFB_VIEW_ONLY], -1);
    h2o_linklist_unlink(&t->link);
    free(t);
}

/* Ends the tunnel with a Close frame: the sandbox's side closes now, the
 * client's once the Close is written and answered (or GW_TUNNEL_CLOSE_WAIT_MS). */
static void begin_close(tcp_tunnel_t *t, uint16_t code, const char *reason)
{
    if (t->close_len != 0 || t->close_sent)
        return;
    /* a write to the client in flight may point into the sandbox's input: the socket closes after it */
    if (t->sandbox != NULL && t->down_writing == 0) {
        h2o_socket_close(t->sandbox);
        t->sandbox = NULL;
    } else if (t->sandbox != NULL) {
        h2o_socket_read_stop(t->sandbox);
    }
    t->pong_len = t->ping_len = 0;
    t->close_len = gw_ws_close_frame_encode(t->close, code, reason, strlen(reason));
    unlink_entry(&t->ping_entry);
    flush_to_client(t);
}

static void on_greet_timeout(gw_timer_t *e)
{
    begin_close(H2O_STRUCT_FROM_MEMBER(tcp_tunnel_t, greet_entry, e), GW_WS_CLOSE_INTERNAL_ERROR,
                "the sandbox's port sent no RFB greeting: not a VNC server?");
}

static void on_close_wait(gw_timer_t *e)
{
    tunnel_free(H2O_STRUCT_FROM_MEMBER(tcp_tunnel_t, close_entry, e));
}

static void on_idle(gw_timer_t *e)
{
    tcp_tunnel_t *t = H2O_STRUCT_FROM_MEMBER(tcp_tunnel_t, idle_entry, e);

    if (t->awaiting_pong)
        GW_PROXY_COUNT(t->proxy, pong_timeouts, 1);
    begin_close(t, GW_WS_CLOSE_GOING_AWAY, "idle");
}

static void reset_idle(tcp_tunnel_t *t)
{
    if (!t->proxy->websocket_timeout.enabled || t->close_sent)
        return;
    unlink_entry(&t->idle_entry);
    gw_timer_link(t->proxy->ctx->loop, t->proxy->websocket_timeout.timeout, &t->idle_entry);
}

/* --- toward the client ------------------------------------------------------ */

static void reset_ping(tcp_tunnel_t *t)
{
    if (!t->proxy->websocket_ping.enabled || t->close_len != 0 || t->close_sent)
        return;
    unlink_entry(&t->ping_entry);
    gw_timer_link(t->proxy->ctx->loop, t->proxy->websocket_ping.timeout, &t->ping_entry);
}

static void on_ping(gw_timer_t *e)
{
    tcp_tunnel_t *t = H2O_STRUCT_FROM_MEMBER(tcp_tunnel_t, ping_entry, e);

    /* the client has the whole idle timeout to answer the first unanswered Ping */
    if (!t->awaiting_pong)
        reset_idle(t);
    t->ping_len = gw_ws_ping_encode(t->ping, ++t->pings);
    t->awaiting_pong = 1;
    GW_PROXY_COUNT(t->proxy, pings_sent, 1);
    flush_to_client(t);
    reset_ping(t);
}

static void on_client_written(gw_tunnel_end_t *end, const char *err)
{
    tcp_tunnel_t *t = end->data;

    t->client_busy = 0;
    if (err != NULL) {
        tunnel_free(t);
        return;
    }
    gw_tunnel_hold_bill_client(t->proxy, &t->hold, t->client, t->hold.no_activity, t->down_frame);
    if (t->down_writing != 0 && t->sandbox != NULL) {
        h2o_buffer_consume(&t->sandbox->input, t->down_writing);
        if (t->close_len != 0) {
            /* begin_close waited for this write */
            h2o_socket_close(t->sandbox);
            t->sandbox = NULL;
        } else {
            h2o_socket_read_start(t->sandbox, on_sandbox_read);
        }
    }
    t->down_writing = 0;
    if (t->close_sent) {
        /* the Close is out: the client answers with its own (or not) */
        gw_tunnel_end_shutdown(t->client);
        gw_timer_link(t->proxy->ctx->loop, t->proxy->tunnel_close_wait.timeout, &t->close_entry);
        gw_tunnel_end_read_start(t->client, on_client_read);
        return;
    }
    flush_to_client(t);
}

static void write_control(tcp_tunnel_t *t)
{
    size_t n = 0;

    memcpy(t->ctl + n, t->pong, t->pong_len), n += t->pong_len;
    memcpy(t->ctl + n, t->ping, t->ping_len), n += t->ping_len;
    t->pong_len = t->ping_len = 0;
    if (t->close_len != 0) {
        memcpy(t->ctl + n, t->close, t->close_len), n += t->close_len;
        t->close_len = 0;
        t->close_sent = 1;
        unlink_entry(&t->idle_entry);
    }
    h2o_iovec_t buf = h2o_iovec_init(t->ctl, n);
    t->client_busy = 1;
    t->down_writing = 0;
    t->down_frame = n;
    gw_tunnel_end_write(t->client, &buf, 1, on_client_written);
}

/* Starts the next write to the client, if any and none is in flight:
 * pending control frames first, then what the sandbox sent as one binary
 * frame, then the Close the sandbox's end calls for. */
static void flush_to_client(tcp_tunnel_t *t)
{
    if (t->client == NULL || t->client_busy || t->close_sent)
        return;
    if (t->pong_len != 0 || t->ping_len != 0 || t->close_len != 0) {
        write_control(t);
        return;
    }
    if (t->sandbox != NULL && t->sandbox->input->size != 0) {
        h2o_iovec_t bufs[2];
        size_t len = t->sandbox->input->size;
        h2o_socket_read_stop(t->sandbox);
        /* a desktop's server greets first; a 3.3 server names its security type next: seen before the client can
         * answer it. The rest is never looked at */
        if (t->rfb != 0 && gw_rfb_walk_wants_server(&t->walk)) {
            unlink_entry(&t->greet_entry);
            if (gw_rfb_walk_server(&t->walk, (const uint8_t *)t->sandbox->input->bytes, len) != 0) {
                begin_close(t, GW_WS_CLOSE_INTERNAL_ERROR, "the sandbox's port is not a VNC server (no RFB greeting)");
                return;
            }
        }
        bufs[0] = h2o_iovec_init(t->down_head, gw_ws_header_encode(t->down_head, 1, GW_WS_OP_BINARY, len, NULL));
        bufs[1] = h2o_iovec_init(t->sandbox->input->bytes, len);
        t->client_busy = 1;
        t->down_writing = len;
        t->down_frame = bufs[0].len + len;
        /* bytes to a client that answered its last Ping (or got none) keep the tunnel */
        if (!t->awaiting_pong)
            reset_idle(t);
        reset_ping(t);
        gw_tunnel_end_write(t->client, bufs, 2, on_client_written);
        return;
    }
    if (t->sandbox_eof != 0)
        begin_close(t, t->sandbox_eof == 1 ? GW_WS_CLOSE_NORMAL : GW_WS_CLOSE_INTERNAL_ERROR,
                    t->sandbox_eof == 1 ? "" : "connection to the sandbox failed");
}

static void on_sandbox_read(h2o_socket_t *sock, const char *err)
{
    tcp_tunnel_t *t = sock->data;

    if (err != NULL) {
        t->sandbox_eof = err == h2o_socket_error_closed ? 1 : 2;
        h2o_socket_read_stop(sock);
    }
    flush_to_client(t);
}

/* --- toward the sandbox ----------------------------------------------------- */

static void on_sandbox_written(h2o_socket_t *sock, const char *err)
{
    tcp_tunnel_t *t = sock->data;

    if (err != NULL) {
        t->sandbox_eof = 2;
        t->up_consumed = 0;
        flush_to_client(t);
        return;
    }
    gw_proxy_add_bytes(t->proxy, t->hold.sandbox_id, t->hold.no_activity, 0, t->up_consumed);
    /* the client's frames keep the tunnel from being silent: no Ping is due */
    reset_ping(t);
    h2o_buffer_consume(t->client->input, t->up_consumed);
    t->up_consumed = 0;
    gw_tunnel_end_read_start(t->client, on_client_read);
    if ((*t->client->input)->size != 0)
        on_client_read(t->client, NULL);
}

/* A whole control frame from the client, its payload unmasked. Returns 0,
 * or -1 when the tunnel is closing. */
static int on_client_control(tcp_tunnel_t *t, const gw_ws_header_t *h, const uint8_t *payload)
{
    const uint8_t *reason;
    size_t rlen;
    uint16_t code;

    switch (h->opcode) {
    case GW_WS_OP_PING:
        /* only the latest Ping needs its Pong (RFC 6455 5.5.3) */
        t->pong_len = gw_ws_header_encode(t->pong, 1, GW_WS_OP_PONG, h->payload_len, NULL);
        memcpy(t->pong + t->pong_len, payload, (size_t)h->payload_len);
        t->pong_len += (size_t)h->payload_len;
        flush_to_client(t);
        return 0;
    case GW_WS_OP_PONG:
        t->awaiting_pong = 0;
        return 0;
    default: /* Close */
        if (gw_ws_close_parse(payload, (size_t)h->payload_len, &code, &reason, &rlen) != 0) {
            begin_close(t, GW_WS_CLOSE_PROTOCOL_ERROR, "bad close frame");
        } else {
            begin_close(t, GW_WS_CLOSE_NORMAL, "");
        }
        return -1;
    }
}

/* 1 when the client's frame `h` is past its bounds: the tunnel closes. */
static int refused(tcp_tunnel_t *t, const gw_ws_header_t *h)
{
    uint16_t code;

    if (t->budget.conf == NULL || (code = gw_ws_budget_charge(&t->budget, h, h2o_now(t->proxy->ctx->loop))) == 0)
        return 0;
    gw_tunnel_hold_count_refusal(t->proxy, code);
    begin_close(t, code, code == GW_WS_CLOSE_TOO_BIG ? "message too big" : "frame rate");
    return 1;
}

/* A view-only viewer's unmasked bytes at buf: what passes stays at buf's
 * start. Returns its length, or SIZE_MAX when the tunnel is closing. */
static size_t walk_rfb(tcp_tunnel_t *t, uint8_t *buf, size_t len)
{
    uint64_t drops = t->walk.drops;
    const char *why;
    ssize_t kept = gw_rfb_walk_client(&t->walk, buf, len, &why);

    GW_PROXY_COUNT(t->proxy, desktop_input_drops, t->walk.drops - drops);
    if (kept < 0) {
        begin_close(t, GW_WS_CLOSE_PROTOCOL_ERROR, why);
        return SIZE_MAX;
    }
    return (size_t)kept;
}

/* Walks the client's input from its start: payload bytes are unmasked and
 * moved down over the frame headers, so that [0, *out) is what goes to the
 * sandbox. Returns the input bytes walked (a header or control frame cut by
 * the end of the input stays), or -1 when the tunnel is closing. */
static ssize_t walk_client_input(tcp_tunnel_t *t, size_t *out)
{
    uint8_t *buf = (uint8_t *)(*t->client->input)->bytes;
    size_t size = (*t->client->input)->size, pos = 0;
    gw_ws_header_t h;
    const char *why;
    uint16_t code;
    int n;

    *out = 0;
    while (pos < size) {
        if (t->payload_left != 0) {
            size_t k = t->payload_left < size - pos ? (size_t)t->payload_left : size - pos;
            gw_ws_mask(buf + pos, k, t->mask, t->mask_off);
            if (*out != pos)
                memmove(buf + *out, buf + pos, k);
            pos += k, t->payload_left -= k, t->mask_off += k;
            if (t->rfb == GW_RFB_VIEW_ONLY && (k = walk_rfb(t, buf + *out, k)) == SIZE_MAX)
                return -1;
            *out += k;
            continue;
        }
        if ((n = gw_ws_header_decode(buf + pos, size - pos, GW_WS_FROM_CLIENT, &h, &why, &code)) < 0) {
            begin_close(t, code, why);
            return -1;
        }
        if (n == 0)
            break;
        if (h.opcode >= GW_WS_OP_CLOSE) {
            if (size - pos < (size_t)n + h.payload_len)
                break;
            /* charged once whole: a control frame is decoded again until it is */
            if (refused(t, &h))
                return -1;
            gw_ws_mask(buf + pos + n, (size_t)h.payload_len, h.mask, 0);
            if (on_client_control(t, &h, buf + pos + n) != 0)
                return -1;
            pos += (size_t)n + (size_t)h.payload_len;
            continue;
        }
        if (h.opcode == GW_WS_OP_TEXT || gw_ws_sequence_check(&t->in_message, &h) != 0) {
            begin_close(t, GW_WS_CLOSE_PROTOCOL_ERROR, h.opcode == GW_WS_OP_TEXT ? "text message" : "bad fragmentation");
            return -1;
        }
        if (refused(t, &h))
            return -1;
        t->payload_left = h.payload_len;
        memcpy(t->mask, h.mask, 4);
        t->mask_off = 0;
        pos += (size_t)n;
    }
    return (ssize_t)pos;
}

static void on_client_read(gw_tunnel_end_t *end, const char *err)
{
    tcp_tunnel_t *t = end->data;
    h2o_buffer_t **input = end->input;
    ssize_t walked;
    size_t out;

    if (err != NULL) {
        /* the client left, or closed after the gateway's Close */
        tunnel_free(t);
        return;
    }
    if (t->close_sent || t->close_len != 0) {
        /* its answer to the gateway's Close, or what it sent before seeing it: EOF ends the tunnel */
        h2o_buffer_consume(input, (*input)->size);
        return;
    }
    reset_idle(t);
    if (t->up_consumed != 0 || (*input)->size == 0)
        return;
    if ((walked = walk_client_input(t, &out)) < 0)
        return;
    if (out == 0 || t->sandbox == NULL) {
        gw_proxy_add_bytes(t->proxy, t->hold.sandbox_id, t->hold.no_activity, 0, (uint64_t)walked);
        h2o_buffer_consume(input, (size_t)walked);
        return;
    }
    h2o_iovec_t buf = h2o_iovec_init((*input)->bytes, out);
    gw_tunnel_end_read_stop(end);
    t->up_consumed = (size_t)walked;
    h2o_socket_write(t->sandbox, &buf, 1, on_sandbox_written);
}

/* --- opening ------------------------------------------------------------- */

static void on_tcp_revoke(gw_revocable_t *item, gw_error_code_t code)
{
    tcp_tunnel_t *t = H2O_STRUCT_FROM_MEMBER(tcp_tunnel_t, hold.revocable, item);
    (void)code;

    if (t->writing != NULL) {
        /* the 101 is still h2o's to write: end it now (see websocket.c) */
        t->revoked = 1;
        shutdown(h2o_socket_get_fd(t->writing), SHUT_RDWR);
        return;
    }
    begin_close(t, GW_WS_CLOSE_REVOKED, "access revoked");
}

static void on_upgrade_complete(void *data, gw_tunnel_end_t *client, size_t reqsize)
{
    tcp_tunnel_t *t = data;

    t->writing = NULL;
    if (client == NULL || t->revoked) {
        if (client != NULL)
            gw_tunnel_end_close(client);
        tunnel_free(t);
        return;
    }
    h2o_buffer_consume(client->input, reqsize);
    t->client = client;
    client->data = t;
    gw_tunnel_hold_bill_client(t->proxy, &t->hold, client, t->hold.no_activity, t->head_bytes);
    gw_tunnel_hold_bound_client(t->proxy, client);
    gw_tunnel_hold_bound_socket(t->proxy, t->sandbox);
    if (t->proxy->conf.websocket_bounds.frames_per_second != 0 || t->proxy->conf.websocket_bounds.max_message_bytes != 0)
        gw_ws_budget_init(&t->budget, &t->proxy->conf.websocket_bounds, h2o_now(t->proxy->ctx->loop));
    reset_idle(t);
    reset_ping(t);
    h2o_socket_read_start(t->sandbox, on_sandbox_read);
    gw_tunnel_end_read_start(client, on_client_read);
    if (t->sandbox->input->size != 0)
        flush_to_client(t);
    /* a VNC server speaks first, at once: one that says nothing within the connect timeout is something else */
    if (t->rfb != 0 && t->walk.server_seen == 0 && t->close_len == 0 && !t->close_sent && t->proxy->connect_timeout.enabled)
        gw_timer_link(t->proxy->ctx->loop, t->proxy->connect_timeout.timeout, &t->greet_entry);
    if ((*client->input)->size != 0)
        on_client_read(client, NULL);
}

static void take_over(tcp_tunnel_t *t, gw_exchange_t *ex)
{
    t->proxy = ex->proxy;
    t->sandbox = ex->sock;
    t->sandbox->data = t;
    ex->sock = NULL;
    h2o_socket_read_stop(t->sandbox);
    gw_tunnel_hold_take(&t->hold, ex, on_tcp_revoke);
}

void gw_exchange_tcp_open(gw_exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    h2o_req_t *req = ex->req;
    tcp_tunnel_t *t = h2o_mem_alloc(sizeof(*t));
    h2o_iovec_t key = header_value(req, H2O_STRLIT("sec-websocket-key"));

    memset(t, 0, sizeof(*t));
    gw_exchange_clear_timer(ex);
    ex->state = GW_EX_OVER;
    take_over(t, ex);
    t->ping_entry.cb = on_ping;
    t->idle_entry.cb = on_idle;
    t->close_entry.cb = on_close_wait;
    t->greet_entry.cb = on_greet_timeout;
    h2o_linklist_insert(&p->tcp_tunnels, &t->link);
    GW_PROXY_COUNT(p, tcp_tunnels_opened, 1);
    GW_PROXY_COUNT(p, tcp_tunnels_open, 1);
    if ((t->rfb = ex->rfb) != 0) {
        gw_rfb_walk_init(&t->walk);
        GW_PROXY_COUNT(p, desktop_viewers[t->rfb == GW_RFB_VIEW_ONLY], 1);
    }

    req->res.status = 101;
    req->res.reason = "Switching Protocols";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_UPGRADE, NULL, H2O_STRLIT("websocket"));
    h2o_iovec_t accept = accept_key(&req->pool, key);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("sec-websocket-accept"), 0, NULL, accept.base, accept.len);
    if (t->rfb == 0)
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("sec-websocket-protocol"), 0, NULL,
                              H2O_STRLIT(GW_TCP_TUNNEL_PROTOCOL));
    else if (header_value(req, H2O_STRLIT("sec-websocket-protocol")).base != NULL) /* "binary" (gw_rfb_tunnel_is_handshake) */
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("sec-websocket-protocol"), 0, NULL, H2O_STRLIT("binary"));
    t->head_bytes = gw_exchange_response_head_size(req) + sizeof("connection: upgrade\r\n") - 1;
    t->writing = gw_conn_socket(req->conn);
    req->timestamps.response_start_at = gw_context_timeval(req->conn->ctx);
    gw_client_upgrade(req, on_upgrade_complete, t);
}

void gw_proxy_close_tcp_tunnels(gw_proxy_t *p)
{
    while (!h2o_linklist_is_empty(&p->tcp_tunnels))
        tunnel_free(H2O_STRUCT_FROM_MEMBER(tcp_tunnel_t, link, p->tcp_tunnels.next));
}
