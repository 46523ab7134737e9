/*
 * Idle keep-alive connections to microVMs, one set per worker thread, keyed
 * by (sandbox, lifecycle, port, address) so that a connection never crosses
 * a lifecycle. Idle connections expire by time, not by count: each pool keeps
 * max_idle_per_key of them for idle_timeout_ms and the rest (what a burst of
 * concurrent requests opened) for surplus_timeout_ms, so that steady
 * concurrency finds them again. max_idle bounds the worker's idle connections
 * over all pools: past it the one idle longest is closed. Idle sockets keep
 * reading: any byte or EOF from the peer closes them.
 */
#ifndef GW_UPSTREAM_UPSTREAM_POOL_H
#define GW_UPSTREAM_UPSTREAM_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include "common/netaddr.h"

typedef struct st_gw_upstream_pool_t gw_upstream_pool_t;

typedef struct st_gw_upstream_key_t {
    const char *sandbox_id;
    h2o_iovec_t lifecycle;
    uint16_t port;
    const gw_netaddr_t *addr;
} gw_upstream_key_t;

typedef struct st_gw_upstream_pool_conf_t {
    uint64_t idle_timeout_ms;    /* lifetime of an idle connection within max_idle_per_key; 0: until the peer closes it */
    uint64_t surplus_timeout_ms; /* lifetime of a pool's idle connections past max_idle_per_key; 0: until the peer closes them */
    size_t max_idle_per_key;     /* 0 disables pooling (gw_upstream_pool_put closes) */
    size_t max_idle;             /* idle connections over all keys; 0 disables pooling */
} gw_upstream_pool_conf_t;

/* A pool on `loop` (conf is copied). The caller frees with
 * gw_upstream_pool_free. */
gw_upstream_pool_t *gw_upstream_pool_new(h2o_loop_t *loop, const gw_upstream_pool_conf_t *conf);

/* Closes every idle connection and frees. NULL is a no-op. */
void gw_upstream_pool_free(gw_upstream_pool_t *pool);

/* Removes and returns the most recently pooled connection for `key`, or
 * NULL if there is none. The socket is not reading, its input is empty and
 * its data pointer is NULL; the caller owns it. */
h2o_socket_t *gw_upstream_pool_take(gw_upstream_pool_t *pool, const gw_upstream_key_t *key);

/* Gives an idle connection to the pool (the key's strings are copied). The
 * socket must have no pending write and an empty input. Past the key's
 * max_idle_per_key it is kept for surplus_timeout_ms only; when the worker
 * holds max_idle idle connections, the one idle longest (any key) is closed
 * first. Takes ownership of sock. */
void gw_upstream_pool_put(gw_upstream_pool_t *pool, const gw_upstream_key_t *key, h2o_socket_t *sock);

/* Closes every idle connection of `sandbox_id` whose lifecycle is not
 * `keep_lifecycle` (NULL: all of that sandbox's). */
void gw_upstream_pool_drop(gw_upstream_pool_t *pool, const char *sandbox_id, const char *keep_lifecycle);

/* Number of idle connections held, over all keys (metrics, tests). */
size_t gw_upstream_pool_num_idle(const gw_upstream_pool_t *pool);

#endif
