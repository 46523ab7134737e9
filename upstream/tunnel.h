/*
 * A byte tunnel between an upgraded client connection and its upstream
 * (WebSocket). Back-pressure: a side is not read while what it sent last is
 * still being written to the other side. Counts bytes per direction.
 */
#ifndef GW_UPSTREAM_TUNNEL_H
#define GW_UPSTREAM_TUNNEL_H

#include <stdint.h>
#include <h2o.h>
#include "common/engine.h"
#include "upstream/tunnel_end.h"
#include "upstream/ws_budget.h"

typedef struct st_gw_tunnel_t gw_tunnel_t;

typedef struct st_gw_tunnel_callbacks_t {
    /* bytes written to the client / to the upstream socket since the previous call; keepalive: they were WebSocket
     * Pings and Pongs only (frames tracked, gw_tunnel_set_pings), not the sandbox's activity; may be NULL */
    void (*on_bytes)(void *data, uint64_t to_client, uint64_t to_upstream, int keepalive);
    /* the tunnel has closed both sockets and is about to be freed; may be NULL */
    void (*on_close)(void *data);
    /* keep-alive (gw_tunnel_set_pings): a Ping was sent (pong_timeout 0), or the tunnel closes because its client
     * answered none for the idle timeout (1); may be NULL */
    void (*on_keepalive)(void *data, int pong_timeout);
    /* gw_tunnel_set_splice: `bytes` more moved with splice(2), either way (also reported to on_bytes); may be NULL */
    void (*on_spliced)(void *data, uint64_t bytes);
    /* gw_tunnel_set_bounds: a frame of the client's went past them; the tunnel closes with `code` (1008: the frame
     * rate, 1009: the message size); may be NULL */
    void (*on_refused)(void *data, uint16_t code);
} gw_tunnel_callbacks_t;

/* Creates a tunnel that owns `upstream` (whose input may already hold bytes
 * for the client; its data is the tunnel's from now on) and waits for gw_tunnel_start. idle_timeout (NULL: none)
 * closes the tunnel when no byte has moved for that long; it must outlive
 * the tunnel. `callbacks` must outlive the tunnel too. */
gw_tunnel_t *gw_tunnel_new(h2o_loop_t *loop, h2o_socket_t *upstream, gw_timeout_t *idle_timeout,
                           const gw_tunnel_callbacks_t *callbacks, void *data);

/* stall_timeout (NULL: none, the default) closes the tunnel when a write to
 * the client has not completed for that long, whatever the other direction
 * does; it must outlive the tunnel. Call before gw_tunnel_start. */
void gw_tunnel_set_stall_timeout(gw_tunnel_t *tunnel, gw_timeout_t *stall_timeout);

/* WebSocket keep-alive: the frames of both directions are tracked
 * (ws_track.h); after `interval` (which must outlive the tunnel) without a
 * write to the client, the client gets a Ping between two of the upstream's
 * frames, and its Pong to it is not forwarded. Its Pongs keep the tunnel
 * from the idle timeout. Call before gw_tunnel_start. */
void gw_tunnel_set_pings(gw_tunnel_t *tunnel, gw_timeout_t *interval);

/* Zero-copy: once what a side sent before the tunnel started is written,
 * its bytes move socket -> pipe -> socket with splice(2), never copied to
 * the gateway, when both ends are sockets, neither TLS, and no Pings are set (they need
 * the frames tracked). Billing, the idle and stall timeouts and the close
 * at one side's end hold as on the copying path. Call after
 * gw_tunnel_set_pings, before gw_tunnel_start. */
void gw_tunnel_set_splice(gw_tunnel_t *tunnel);

/* Bounds on the client's frames (ws_budget.h; `conf` must outlive the
 * tunnel): its frames are walked, so its direction is never spliced. A
 * frame past them ends the tunnel: the client's frames before it reach the
 * sandbox, then a (masked) Close with the code (1008 or 1009); the client
 * gets a Close with the code too when what it was sent ends between frames
 * (known unless that direction is spliced), then both sides are shut down
 * and drained until they close, for `close_wait` at most (which must
 * outlive the tunnel, and not be the tunnel's own: its expiry frees the
 * tunnel). Call after gw_tunnel_set_pings and gw_tunnel_set_splice, before
 * gw_tunnel_start. */
void gw_tunnel_set_bounds(gw_tunnel_t *tunnel, const gw_ws_budget_conf_t *conf, gw_timeout_t *close_wait);

/* Starts relaying; takes ownership of `client` (a socket end, or an HTTP/2
 * stream end: tunnel_end.h), whose input may already hold bytes for the
 * upstream; its `data` is the tunnel's from now on. */
void gw_tunnel_start(gw_tunnel_t *tunnel, gw_tunnel_end_t *client);

/* Closes both sockets, calls on_close, frees. */
void gw_tunnel_close(gw_tunnel_t *tunnel);

#endif
