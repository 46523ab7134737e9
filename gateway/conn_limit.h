/*
 * limits.max_connections_per_sandbox: how many connections to one sandbox
 * this gateway process holds at once (proxied requests in flight and
 * WebSocket tunnels), counted across every worker. Over the limit a request
 * gets 429 too_many_connections, so one sandbox cannot take every socket.
 */
#ifndef GW_GATEWAY_CONN_LIMIT_H
#define GW_GATEWAY_CONN_LIMIT_H

#include <stdint.h>

typedef struct st_gw_conn_limit_t gw_conn_limit_t;

/* max == 0 means no limit. Never NULL. */
gw_conn_limit_t *gw_conn_limit_new(uint64_t max);
/* Frees; NULL is a no-op. Only when no slot is held any more. */
void gw_conn_limit_free(gw_conn_limit_t *l);

/* Takes a slot for `sandbox_id`: 1 when granted, 0 when the sandbox is at the
 * limit. Thread-safe. */
int gw_conn_limit_acquire(gw_conn_limit_t *l, const char *sandbox_id);

/* Gives back a slot taken with gw_conn_limit_acquire. Thread-safe. */
void gw_conn_limit_release(gw_conn_limit_t *l, const char *sandbox_id);

/* Slots held for `sandbox_id` now (for tests and metrics). */
uint64_t gw_conn_limit_count(gw_conn_limit_t *l, const char *sandbox_id);

#endif
