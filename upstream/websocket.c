/*
 * The hand-over of an upgraded exchange to a WebSocket tunnel: the 101 goes
 * to the client, then both sockets belong to the tunnel, which keeps the
 * sandbox's connection slot and stays revocable until it closes. It is
 * revocable from the hand-over on, while the 101 is still being written too
 * (a client that does not read can keep it pending for as long as it likes).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <h2o.h>
#include <h2o/http1.h>
#include "common/engine.h"
#include "upstream/exchange.h"
#include "upstream/tunnel.h"
#include "upstream/tunnel_hold.h"

/* A WebSocket exchange after the upgrade; outlives its request. */
typedef struct st_websocket_t {
    h2o_linklist_t link; /* in proxy->websockets */
    gw_proxy_t *proxy;
    gw_tunnel_hold_t hold; /* taken over from the exchange */
    gw_tunnel_t *tunnel;
    size_t head_bytes;       /* of the 101, billed once it is written */
    gw_tunnel_end_t *client; /* once the 101 is written: the bytes to it are billed as it receives them */
    h2o_socket_t *writing;   /* the client's socket while h2o writes the 101 (h2o's until then), else NULL */
    int revoked;             /* revoked while the 101 was being written: the tunnel never starts */
    int spliced;             /* counted in lizard_spliced_tunnels_total */
} websocket_t;

static void on_websocket_bytes(void *data, uint64_t to_client, uint64_t to_upstream, int keepalive)
{
    websocket_t *ws = data;
    int no_activity = ws->hold.no_activity || keepalive;

    gw_proxy_add_bytes(ws->proxy, ws->hold.sandbox_id, no_activity, 0, to_upstream);
    gw_tunnel_hold_bill_client(ws->proxy, &ws->hold, ws->client, no_activity, to_client);
}

static void on_websocket_close(void *data)
{
    websocket_t *ws = data;
    gw_tunnel_hold_release(&ws->hold);
    GW_PROXY_COUNT(ws->proxy, websockets_open, -1);
    h2o_linklist_unlink(&ws->link);
    free(ws);
}

static void on_websocket_keepalive(void *data, int pong_timeout)
{
    websocket_t *ws = data;
    if (pong_timeout)
        GW_PROXY_COUNT(ws->proxy, pong_timeouts, 1);
    else
        GW_PROXY_COUNT(ws->proxy, pings_sent, 1);
}

static void on_websocket_spliced(void *data, uint64_t bytes)
{
    websocket_t *ws = data;
    if (!ws->spliced) {
        ws->spliced = 1;
        GW_PROXY_COUNT(ws->proxy, spliced_tunnels, 1);
    }
    GW_PROXY_COUNT(ws->proxy, spliced_tunnel_bytes, bytes);
}

static void on_websocket_refused(void *data, uint16_t code)
{
    gw_tunnel_hold_count_refusal(((websocket_t *)data)->proxy, code);
}

static const gw_tunnel_callbacks_t websocket_callbacks = {on_websocket_bytes, on_websocket_close, on_websocket_keepalive,
                                                          on_websocket_spliced, on_websocket_refused};

/* A publish revoked what let the tunnel in: both sockets close (no close
 * frame: the relay may be in the middle of one). */
static void on_websocket_revoke(gw_revocable_t *item, gw_error_code_t code)
{
    websocket_t *ws = H2O_STRUCT_FROM_MEMBER(websocket_t, hold.revocable, item);
    (void)code;

    if (ws->writing == NULL) {
        gw_tunnel_close(ws->tunnel);
        return;
    }
    /* The 101 is still being written, by h2o, which owns the socket and
     * calls on_upgrade_complete once the write ends: the tunnel (and ws)
     * must live until then. Shutting the socket down ends the write now
     * (EPIPE, or done if it was already complete), whether or not the client
     * reads; the tunnel is then closed there. */
    ws->revoked = 1;
    shutdown(h2o_socket_get_fd(ws->writing), SHUT_RDWR);
}

static void on_upgrade_complete(void *data, gw_tunnel_end_t *client, size_t reqsize)
{
    websocket_t *ws = data;

    ws->writing = NULL;
    /* the request is gone by now; the tunnel owns both sockets */
    if (client == NULL || ws->revoked) {
        if (client != NULL)
            gw_tunnel_end_close(client);
        gw_tunnel_close(ws->tunnel);
        return;
    }
    h2o_buffer_consume(client->input, reqsize);
    /* h2o calls back once the 101 is written to the client */
    ws->client = client;
    gw_tunnel_hold_bill_client(ws->proxy, &ws->hold, client, ws->hold.no_activity, ws->head_bytes);
    gw_tunnel_hold_bound_client(ws->proxy, client);
    gw_tunnel_start(ws->tunnel, client);
}

void gw_exchange_upgrade(gw_exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    websocket_t *ws = h2o_mem_alloc(sizeof(*ws));
    h2o_socket_t *sock = ex->sock;

    memset(ws, 0, sizeof(*ws));
    h2o_add_header(&ex->req->pool, &ex->req->res.headers, H2O_TOKEN_UPGRADE, NULL, H2O_STRLIT("websocket"));
    gw_exchange_clear_timer(ex);
    ex->sock = NULL;
    ex->state = GW_EX_OVER;

    ws->proxy = p;
    ws->tunnel = gw_tunnel_new(p->ctx->loop, sock, p->websocket_timeout.enabled ? p->websocket_timeout.timeout : NULL,
                               &websocket_callbacks, ws);
    if (p->client_stall_timeout.enabled)
        gw_tunnel_set_stall_timeout(ws->tunnel, p->client_stall_timeout.timeout);
    if (p->websocket_ping.enabled)
        gw_tunnel_set_pings(ws->tunnel, p->websocket_ping.timeout);
    if (p->conf.splice && ex->req->version < 0x200) /* an HTTP/2 stream's bytes are not a socket's */
        gw_tunnel_set_splice(ws->tunnel);
    if (p->conf.websocket_bounds.frames_per_second != 0 || p->conf.websocket_bounds.max_message_bytes != 0)
        gw_tunnel_set_bounds(ws->tunnel, &p->conf.websocket_bounds, p->tunnel_close_wait.timeout);
    gw_tunnel_hold_bound_socket(p, sock);
    /* a publish handled while the 101 is written finds the tunnel (on_websocket_revoke) */
    ws->writing = gw_conn_socket(ex->req->conn);
    gw_tunnel_hold_take(&ws->hold, ex, on_websocket_revoke);
    h2o_linklist_insert(&p->websockets, &ws->link);
    GW_PROXY_COUNT(p, websockets_opened, 1);
    GW_PROXY_COUNT(p, websockets_open, 1);
    ws->head_bytes = gw_exchange_response_head_size(ex->req) + sizeof("connection: upgrade\r\n") - 1;
    /* h2o's upgrade path stamps no response time: the access log's duration
     * of an upgrade is the time to this 101 (the line is written as the
     * tunnel opens, when the request is disposed) */
    ex->req->timestamps.response_start_at = gw_context_timeval(ex->req->conn->ctx);
    gw_client_upgrade(ex->req, on_upgrade_complete, ws);
}

void gw_proxy_close_websockets(gw_proxy_t *p)
{
    while (!h2o_linklist_is_empty(&p->websockets)) {
        websocket_t *ws = H2O_STRUCT_FROM_MEMBER(websocket_t, link, p->websockets.next);
        gw_tunnel_close(ws->tunnel);
    }
}
