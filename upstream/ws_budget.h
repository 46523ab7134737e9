/*
 * What the client of a WebSocket tunnel may send (HTTP upgrades and TCP
 * tunnels): a frame-rate budget that earns back per second and with the
 * payload bytes frames carry, and a bound on a message's size (the payloads
 * of its fragments together). Pure arithmetic on frame headers: the tunnels
 * walk the client's frames and ask at each header.
 */
#ifndef GW_UPSTREAM_WS_BUDGET_H
#define GW_UPSTREAM_WS_BUDGET_H

#include <stdint.h>
#include "common/ws_frame.h"

/* The allowance a tunnel starts with, and the most it can save: this many
 * seconds of frames_per_second. */
#define GW_WS_BUDGET_SECONDS 10
/* A frame costs 1 from the budget; each GW_WS_BUDGET_BYTES_PER_FRAME payload
 * bytes it carries earn 1 back, so frames of that size or more never run
 * the budget down (they are bulk bytes, not a frame flood). */
#define GW_WS_BUDGET_BYTES_PER_FRAME 1024

/* The bounds (limits.websocket_*); 0 turns that bound off. */
typedef struct st_gw_ws_budget_conf_t {
    uint64_t frames_per_second;
    uint64_t max_message_bytes;
} gw_ws_budget_conf_t;

typedef struct st_gw_ws_budget_t {
    const gw_ws_budget_conf_t *conf;
    uint64_t credit;      /* in 1/GW_WS_BUDGET_BYTES_PER_FRAME of a frame */
    uint64_t refilled_at; /* ms, the clock of the last refill */
    uint64_t message;     /* payload bytes of the data message in progress (its fragments so far) */
} gw_ws_budget_t;

/* Starts a tunnel's budget with the whole allowance at `now_ms` (any
 * monotonic clock in ms, e.g. h2o_now); `conf` must outlive it. */
void gw_ws_budget_init(gw_ws_budget_t *b, const gw_ws_budget_conf_t *conf, uint64_t now_ms);

/* One frame header from the client, at now_ms. Returns 0 when it may pass,
 * GW_WS_CLOSE_POLICY when the budget cannot pay for it (the tunnel closes
 * with 1008) or GW_WS_CLOSE_TOO_BIG when its message would go past
 * max_message_bytes (1009). Control frames cost a frame and are never part
 * of a message; reserved bits and opcodes are not judged here. */
uint16_t gw_ws_budget_charge(gw_ws_budget_t *b, const gw_ws_header_t *h, uint64_t now_ms);

#endif
