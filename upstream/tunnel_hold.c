/*
 * A tunnel's hold on its sandbox (tunnel_hold.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <h2o.h>
#include "common/ws_frame.h"
#include "upstream/exchange.h"
#include "upstream/tunnel_hold.h"
#include "upstream/tunnel_end.h"

void gw_tunnel_hold_take(gw_tunnel_hold_t *h, gw_exchange_t *ex, gw_revoke_cb on_revoke)
{
    h->sandbox_id = h2o_strdup(NULL, ex->sandbox_id, SIZE_MAX).base;
    h->no_activity = ex->no_activity;
    /* the tunnel outlives the request: it keeps the connection slots */
    h->slot = ex->slot;
    h->slot_worker = ex->slot_worker;
    ex->slot = NULL;
    h->viewer_slot = ex->viewer_slot;
    ex->viewer_slot = NULL;
    if (ex->client_slot != NULL) {
        h->client_slot = ex->client_slot;
        h->client_addr = h2o_strdup(NULL, ex->client_addr, SIZE_MAX).base;
        ex->client_slot = NULL;
    }
    h->revocation = ex->proxy->revocation;
    if (ex->revocable.grant.record != NULL) {
        if (h->revocation != NULL)
            gw_revocation_remove(h->revocation, &ex->revocable);
        h->revocable.grant = ex->revocable.grant;
        ex->revocable.grant.record = NULL;
        h->revocable.on_revoke = on_revoke;
        if (h->revocation != NULL)
            gw_revocation_add(h->revocation, &h->revocable);
    }
}

void gw_tunnel_hold_release(gw_tunnel_hold_t *h)
{
    if (h->revocable.grant.record != NULL) {
        if (h->revocation != NULL)
            gw_revocation_remove(h->revocation, &h->revocable);
        gw_sandbox_release(h->revocable.grant.record);
    }
    if (h->slot != NULL)
        gw_conn_limit_release(h->slot, h->slot_worker, h->sandbox_id);
    if (h->client_slot != NULL)
        gw_conn_limit_release(h->client_slot, h->slot_worker, h->client_addr);
    if (h->viewer_slot != NULL)
        gw_conn_limit_release(h->viewer_slot, h->slot_worker, h->sandbox_id);
    free(h->client_addr);
    free(h->sandbox_id);
    memset(h, 0, sizeof(*h));
}

void gw_exchange_release_slots(gw_exchange_t *ex)
{
    if (ex->slot != NULL) {
        gw_conn_limit_release(ex->slot, ex->slot_worker, ex->sandbox_id);
        ex->slot = NULL;
    }
    if (ex->client_slot != NULL) {
        gw_conn_limit_release(ex->client_slot, ex->slot_worker, ex->client_addr);
        ex->client_slot = NULL;
    }
    if (ex->viewer_slot != NULL) {
        gw_conn_limit_release(ex->viewer_slot, ex->slot_worker, ex->sandbox_id);
        ex->viewer_slot = NULL;
    }
}

void gw_tunnel_hold_bound_socket(gw_proxy_t *p, h2o_socket_t *sock)
{
    int n = (int)p->conf.tunnel_socket_buffer_bytes; /* at most 16 MiB (config.c) */

    /* setting it ends the kernel's autotuning of this buffer, which grows it to tcp_wmem[2] (4 MiB) for a peer that
     * does not read */
    if (n != 0)
        setsockopt(h2o_socket_get_fd(sock), SOL_SOCKET, SO_SNDBUF, &n, sizeof(n));
}

void gw_tunnel_hold_bill_client(gw_proxy_t *p, const gw_tunnel_hold_t *h, gw_tunnel_end_t *client, int no_activity, uint64_t bytes)
{
    h2o_socket_t *sock;

    if (client->sock != NULL)
        gw_proxy_add_egress(p, client->sock, h->sandbox_id, no_activity, bytes, 1);
    else if (bytes != 0 && (sock = gw_tunnel_end_billing_socket(client)) != NULL)
        gw_proxy_add_egress(p, sock, h->sandbox_id, no_activity, bytes, 1); /* written: h2o's proceed follows its write */
}

void gw_tunnel_hold_bound_client(gw_proxy_t *p, gw_tunnel_end_t *client)
{
    if (client->sock == NULL)
        return; /* a stream's window bounds it (tunnel_end.h) */
    /* bounds what one read of the client pulls in, as for upstreams */
    setsockopt(h2o_socket_get_fd(client->sock), SOL_SOCKET, SO_RCVBUF, &p->rcvbuf, sizeof(p->rcvbuf));
    gw_tunnel_hold_bound_socket(p, client->sock);
}

void gw_tunnel_hold_count_refusal(gw_proxy_t *p, uint16_t code)
{
    if (code == GW_WS_CLOSE_TOO_BIG)
        GW_PROXY_COUNT(p, message_size_closes, 1);
    else
        GW_PROXY_COUNT(p, frame_rate_closes, 1);
}
