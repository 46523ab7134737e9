/*
 * What a tunnel past its 101 (a WebSocket, websocket.c, or a TCP tunnel,
 * tcp_tunnel.c) holds for its sandbox, taken over from its exchange at the
 * hand-over: the sandbox id it bills under, the connection slots and the
 * revocable grant. Given back when the tunnel closes. And what both kinds
 * bound alike: their sockets' kernel buffers, the refusals of their bounds.
 */
#ifndef GW_UPSTREAM_TUNNEL_HOLD_H
#define GW_UPSTREAM_TUNNEL_HOLD_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include "limits/conn_limit.h"
#include "limits/revocation.h"

struct st_gw_exchange_t;
struct st_gw_proxy_t;
struct st_gw_tunnel_end_t;

typedef struct st_gw_tunnel_hold_t {
    char *sandbox_id; /* malloc'd: the tunnel outlives the request's pool */
    int no_activity;
    gw_conn_limit_t *slot;        /* the connection slot the tunnel holds, NULL: none */
    gw_conn_limit_t *client_slot; /* the client address's slot the tunnel holds, NULL: none */
    gw_conn_limit_t *viewer_slot; /* a desktop viewer's slot of the sandbox the tunnel holds, NULL: none */
    char *client_addr;
    size_t slot_worker;          /* the worker index the slots were taken with (the exchange's) */
    gw_revocation_t *revocation; /* the proxy's; NULL: not revocable */
    gw_revocable_t revocable;    /* grant.record retained; NULL: the exchange had none */
} gw_tunnel_hold_t;

/* Moves ex's sandbox id (copied), slots and grant to the zeroed `h`: the
 * grant goes in one step, so a publish handled from now on finds the tunnel
 * (its on_revoke, called with &h->revocable) and no longer the exchange. */
void gw_tunnel_hold_take(gw_tunnel_hold_t *h, struct st_gw_exchange_t *ex, gw_revoke_cb on_revoke);
/* Gives everything back (the grant out of revocation, the slots to their
 * limits) and frees the copies; `h` is then zeroed. */
void gw_tunnel_hold_release(gw_tunnel_hold_t *h);

/* Bounds the send buffer of a tunnel's socket (either side) to
 * limits.tunnel_socket_buffer_bytes (0: left to the kernel's autotuning),
 * so that a peer that does not read parks at most that (doubled by the
 * kernel) in this socket. */
void gw_tunnel_hold_bound_socket(struct st_gw_proxy_t *p, h2o_socket_t *sock);

/* Bills `bytes` written to the tunnel's client end `client`: as its TCP
 * acknowledges them. An HTTP/2 client's stream end (tunnel_end.h): as the
 * HTTP/2 connection's TCP acknowledges them (they were written when the
 * stream's write completes: h2o's proceed follows its write), and nothing once the stream is gone: they never reach the client. */
void gw_tunnel_hold_bill_client(struct st_gw_proxy_t *p, const gw_tunnel_hold_t *h, struct st_gw_tunnel_end_t *client,
                                int no_activity, uint64_t bytes);

/* A socket end of a tunnel's client: its receive buffer bounded as an
 * upstream's (what one read pulls in), its send buffer as
 * gw_tunnel_hold_bound_socket's. A stream end: nothing (its window bounds it). */
void gw_tunnel_hold_bound_client(struct st_gw_proxy_t *p, struct st_gw_tunnel_end_t *client);

/* Counts a tunnel closed by its client's bounds with `code` (1008 or 1009). */
void gw_tunnel_hold_count_refusal(struct st_gw_proxy_t *p, uint16_t code);

#endif
