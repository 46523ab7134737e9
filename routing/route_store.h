/*
 * Where requests get their sandbox from: one per worker thread. Looks the
 * sandbox hash up in Redis with a deadline. (The cache with pub/sub
 * invalidation, negative entries and single flight lives behind this same
 * interface: issue 5.)
 */
#ifndef GW_ROUTING_ROUTE_STORE_H
#define GW_ROUTING_ROUTE_STORE_H

#include <stdint.h>
#include <h2o.h>
#include "routing/redis.h"
#include "routing/sandbox.h"

typedef struct st_gw_route_store_t gw_route_store_t;
typedef struct st_gw_route_lookup_t gw_route_lookup_t;

typedef struct st_gw_route_store_conf_t {
    const char *prefix;         /* key prefix, e.g. "lizard:" */
    uint64_t lookup_timeout_ms; /* deadline of one lookup */
    uint64_t cache_ttl_ms;
    uint64_t negative_ttl_ms;
    uint64_t stale_ttl_ms;
} gw_route_store_conf_t;

typedef enum {
    GW_ROUTE_FOUND = 0,
    GW_ROUTE_NOT_FOUND,
    GW_ROUTE_UNAVAILABLE, /* Redis down or the deadline passed */
} gw_route_status_t;

/* `sandbox` is borrowed for the duration of the call (retain to keep it);
 * non-NULL only with GW_ROUTE_FOUND. */
typedef void (*gw_route_cb)(void *data, gw_route_status_t status, gw_sandbox_t *sandbox);

/* The store borrows `redis` (the worker owns it) and copies conf. */
gw_route_store_t *gw_route_store_new(h2o_loop_t *loop, gw_redis_t *redis, const gw_route_store_conf_t *conf);
void gw_route_store_free(gw_route_store_t *s);

/* Starts a lookup. cb is always called later from the loop (never from
 * inside this call), exactly once, unless gw_route_lookup_cancel is called
 * first. Returns the handle for cancelling. */
gw_route_lookup_t *gw_route_store_lookup(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data);
void gw_route_lookup_cancel(gw_route_lookup_t *l);

#endif
