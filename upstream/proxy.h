/*
 * The upstream path: HTTP/1.1 to the microVM over pooled keep-alive
 * connections, streaming responses with back-pressure (never more than
 * limits.response_buffer_bytes held per response), WebSocket tunnels.
 * One gw_proxy_t per worker thread; it owns that worker's pools.
 */
#ifndef GW_UPSTREAM_PROXY_H
#define GW_UPSTREAM_PROXY_H

#include <stdatomic.h>
#include <stdint.h>
#include <h2o.h>
#include "limits/conn_limit.h"
#include "limits/revocation.h"
#include "metering/worker_meter.h"
#include "common/hangup.h"
#include "common/netaddr.h"
#include "upstream/address_view.h"
#include "upstream/ws_budget.h"

typedef struct st_gw_proxy_t gw_proxy_t;

/* gw_proxy_target_t.rfb */
#define GW_RFB_FULL 1
#define GW_RFB_VIEW_ONLY 2

typedef struct st_gw_proxy_target_t {
    gw_netaddr_t addr;     /* microVM address, port set */
    h2o_iovec_t lifecycle; /* with the port, the pool key */
    const char *sandbox_id;
    uint16_t port;
    h2o_iovec_t path;            /* request target to send upstream (credentials removed) */
    int cors_preflight;          /* when the answer allows the origin, add x-lizard-access-token to Access-Control-Allow-Headers */
    int localhost;               /* the port's host mode is localhost (host:<n>, else upstream.host_header): the app sees
                                    itself at http://localhost:<port> (upstream/address_view.h) */
    uint16_t client_port;        /* the port the client connected to (X-Forwarded-Port); 0: ask the socket */
    gw_conn_limit_t *conn_limit; /* a slot of this sandbox taken by the caller: the proxy gives it back when the
                                    exchange (or its WebSocket tunnel) is over; NULL: none */
    gw_conn_limit_t *client_limit; /* a slot of client_addr taken by the caller, given back as conn_limit; NULL: none */
    const char *client_addr;       /* the client's address, the key of client_limit (copied) */
    size_t limit_worker;           /* the worker index the caller took both slots with: this proxy's worker */
    int no_activity;               /* X-Lizard-No-Activity: the bytes moved say so to the bytes callback */
    int tcp;                       /* a TCP tunnel's handshake to a proto tcp port (upstream/tcp_tunnel.h) */
    int rfb; /* with tcp: a desktop's WebSocket to a proto rfb port, GW_RFB_FULL or GW_RFB_VIEW_ONLY (its input dropped) */
    gw_conn_limit_t *viewer_limit; /* a desktop viewer's slot of the sandbox (limits.max_desktop_viewers) taken by the
                                      caller, given back as conn_limit; NULL: none */
    gw_grant_t grant;              /* what let the request in (record borrowed: the proxy retains it); record NULL: the
                                      exchange is not revocable */
    uint32_t timeout_ms;           /* the port's timeout:<n>: replaces first_byte_timeout_ms and idle_timeout_ms; 0: those */
    int h2c;                       /* the port is proto:<n> = h2c: HTTP/2 with prior knowledge (upstream/h2c.h) */
} gw_proxy_target_t;

/* Per-request byte counts, reported when a proxied exchange ends (metering). */
typedef struct st_gw_proxy_bytes_t {
    uint64_t egress;  /* to the client: status line/headers, body, WebSocket bytes */
    uint64_t ingress; /* from the client: request head, body, WebSocket bytes */
    int no_activity;  /* the exchange asked not to count as its sandbox's activity (X-Lizard-No-Activity) */
} gw_proxy_bytes_t;

/* What the proxy is told of the configuration (config/config.h names the
 * keys); a timeout of 0 means none. */
typedef struct st_gw_proxy_conf_t {
    gw_cookie_rules_t cookie_rules; /* what a sandbox's Set-Cookie may not do (strings borrowed: must outlive the proxy) */
    uint64_t connect_timeout_ms;
    uint64_t first_byte_timeout_ms;
    uint64_t idle_timeout_ms;      /* mid-body silence */
    uint64_t pool_idle_timeout_ms; /* the idle lifetime of a pooled connection */
    uint64_t websocket_idle_timeout_ms;
    uint64_t websocket_ping_interval_ms; /* a WebSocket tunnel without a frame this long pings its client; 0: never */
    size_t max_idle_per_pool;            /* idle connections a pool keeps for pool_idle_timeout_ms (more are kept 2 s) */
    size_t max_idle_per_worker;          /* idle connections of all pools; past it the one idle longest is closed */
    const gw_cidr_t *allowed_networks;   /* borrowed: must outlive the proxy */
    size_t num_allowed_networks;
    size_t response_buffer_bytes; /* 4 KiB to 12 MiB (config/config.h, GW_MAX_RESPONSE_BUFFER_BYTES) */
    uint64_t client_stall_timeout_ms;
    size_t max_connection_buffer_bytes;
    size_t max_worker_buffer_bytes;
    uint64_t event_stream_idle_timeout_ms; /* a response of a streamed media type silent this long ends cleanly; 0: never */
    int splice;                           /* upstream.splice: Content-Length bodies to HTTP/1.1 plain clients move with splice(2) */
    gw_ws_budget_conf_t websocket_bounds; /* limits.websocket_*: what the client of a WebSocket or TCP tunnel may send */
    size_t tunnel_socket_buffer_bytes;    /* limits.tunnel_socket_buffer_bytes: SO_SNDBUF of tunnel sockets; 0: autotuned */
} gw_proxy_conf_t;

/* A proxy for the worker of ctx; conf is copied. */
gw_proxy_t *gw_proxy_new(h2o_context_t *ctx, const gw_proxy_conf_t *conf);
/* Closes idle pooled connections and open WebSocket tunnels, and frees.
 * HTTP exchanges must be over (their requests disposed). NULL is a no-op. */
void gw_proxy_free(gw_proxy_t *p);

/* Forwards req to the target and answers it: with the sandbox's response,
 * or a gateway error (502 port_not_open, 504 upstream_timeout, ...). The
 * target's strings are copied. The request's X-Lizard-* headers and
 * hop-by-hop headers are never forwarded; X-Forwarded-* are set. */
void gw_proxy_forward(gw_proxy_t *p, h2o_req_t *req, const gw_proxy_target_t *target);

/* Counters for /metrics: written by the proxy's thread only (GW_COUNTER_ADD,
 * common/counter.h), so one block per proxy; readable from any thread. */
typedef struct st_gw_proxy_counters_t {
    atomic_uint_fast64_t connects; /* fresh upstream connections started */
    atomic_uint_fast64_t reuses;   /* requests sent on a pooled connection */
    atomic_uint_fast64_t retries;  /* dead pooled connections retried on a fresh one */
    atomic_uint_fast64_t websockets_opened;
    atomic_int_fast64_t websockets_open; /* gauge */
    atomic_uint_fast64_t tcp_tunnels_opened;
    atomic_int_fast64_t tcp_tunnels_open; /* gauge */
    atomic_uint_fast64_t pings_sent;      /* keep-alive Pings sent to clients of WebSocket tunnels */
    atomic_uint_fast64_t pong_timeouts;   /* tunnels closed because their client answered no Ping */
    atomic_uint_fast64_t egress_bytes;
    atomic_uint_fast64_t ingress_bytes;
    atomic_uint_fast64_t client_stalls;        /* responses reset after limits.client_stall_timeout_ms without progress */
    atomic_uint_fast64_t budget_resets;        /* responses reset over max_connection_buffer_bytes / max_worker_buffer_bytes */
    atomic_uint_fast64_t spliced_responses;    /* response bodies moved with splice(2) (upstream/splice.c) */
    atomic_uint_fast64_t spliced_bytes;        /* body bytes those moved to their clients */
    atomic_uint_fast64_t spliced_tunnels;      /* WebSocket tunnels with bytes moved by splice(2) (upstream/tunnel.c) */
    atomic_uint_fast64_t spliced_tunnel_bytes; /* bytes those moved, both ways */
    atomic_uint_fast64_t orphans;              /* requests left by their client while at the app (upstream/orphan.c) */
    atomic_int_fast64_t orphans_open;          /* gauge: those the app has not answered yet, their slots still held */
    atomic_uint_fast64_t frame_rate_closes;    /* tunnels closed 1008: their client's frames ran out of budget */
    atomic_uint_fast64_t message_size_closes;  /* tunnels closed 1009: a client's message over the size bound */
    atomic_int_fast64_t desktop_viewers[2];    /* gauges: desktop tunnels open, full [0] and view-only [1] */
    atomic_uint_fast64_t desktop_input_drops;  /* input messages of view-only viewers dropped (upstream/rfb_walk.h) */
} gw_proxy_counters_t;

/* Watches the HTTP/1 client of each exchange that lasts (common/hangup.h;
 * borrowed, the worker's; NULL: not watched): a client that closes ends
 * its exchange and the connection to its sandbox at once. */
void gw_proxy_set_hangup(gw_proxy_t *p, gw_hangup_t *h);

/* The drain's end: every exchange still going is cut (access log "cut":
 * "shutdown"): a response being streamed ends as after an upstream failure,
 * one still waiting for its head is reset (HTTP/2) or closed (HTTP/1). Their
 * requests are disposed as the loop runs on. */
void gw_proxy_cut_all(gw_proxy_t *p);

/* Makes this proxy count into `c` (NULL: stop counting). */
void gw_proxy_set_counters(gw_proxy_t *p, gw_proxy_counters_t *c);

/* Bills the bytes of every exchange and tunnel from now on into `meter`
 * (borrowed, the worker's; NULL: not billed any more), as they move. */
void gw_proxy_set_meter(gw_proxy_t *p, gw_worker_meter_t *meter);

/* Bytes moved by all exchanges of this proxy since gw_proxy_new. */
gw_proxy_bytes_t gw_proxy_bytes_total(const gw_proxy_t *p);

/* Registers every exchange and WebSocket tunnel from now on with `r`
 * (borrowed; NULL: none), so that a publish that revokes its grant closes it:
 * an exchange still waiting for its head gets the error a new request would,
 * a response being streamed is cut (as after an upstream failure), a tunnel
 * is closed. */
void gw_proxy_set_revocation(gw_proxy_t *p, gw_revocation_t *r);

/* A client socket of this proxy's worker is being disposed, its descriptor
 * still open (h2o's on_close, libh2o patch 0220): the egress it held is
 * billed as far as the client received it (upstream/delivery.h). */
void gw_proxy_client_closed(gw_proxy_t *p, h2o_socket_t *sock);

/* Bills the egress every open client connection has delivered so far (at
 * shutdown, before the bytes hook is cleared). */
void gw_proxy_settle_deliveries(gw_proxy_t *p);

/* Closes every pooled connection of (sandbox) whose lifecycle differs from
 * `current` (NULL: all of that sandbox's), and the requests of that
 * lifecycle whose clients left (upstream/orphan.c), giving their slots back. */
void gw_proxy_drop_pools(gw_proxy_t *p, const char *sandbox_id, const char *current_lifecycle);

#endif
