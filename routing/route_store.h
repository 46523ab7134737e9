/*
 * Where requests get their sandbox from: one per worker thread. A bounded
 * cache of sandbox records in front of HGETALL <prefix>sbx:{<id>}, kept
 * honest by SUBSCRIBE <prefix>routes, with single-flight misses, negative
 * entries and stale answers while Redis is unreachable (the cache is
 * routing/keyed_cache.h, which the domain store uses as well).
 */
#ifndef GW_ROUTING_ROUTE_STORE_H
#define GW_ROUTING_ROUTE_STORE_H

#include <stdatomic.h>
#include <stdint.h>
#include <h2o.h>
#include "common/redis.h"
#include "routing/keyed_cache.h"
#include "routing/sandbox.h"

/* Entries one store holds at most (positive, negative and revoked); beyond
 * it the entry confirmed longest ago is dropped, so a flood of random
 * sandbox ids cannot grow memory without bound. Entries with a fetch in
 * flight are not dropped: the bound may be passed by those (each ends
 * within its lookup's deadline). */
#define GW_ROUTE_CACHE_MAX_ENTRIES 100000

typedef struct st_gw_route_store_t gw_route_store_t;
typedef gw_keyed_lookup_t gw_route_lookup_t;

/* Counters for operators (routing/keyed_cache.h): written by the store's
 * thread only, so one block per store; readable from any thread. */
typedef gw_keyed_cache_counters_t gw_route_store_counters_t;

/* Called when a fetch shows that a cached sandbox got a new lifecycle
 * (`lifecycle` is the new one) or is gone (`lifecycle` NULL), so that the
 * owner can close pooled connections of the old one. Strings are valid
 * during the call only. Must not free the store. */
typedef void (*gw_route_lifecycle_cb)(void *data, const char *sandbox_id, const char *lifecycle);

/* Called after a publish named `sandbox_id` (lowercased; whether or not it
 * was cached) and its cache entry was revoked, so that a lookup started from
 * the call reads Redis again; `sandbox_id` NULL: the subscription was
 * (re)confirmed and any sandbox may have changed meanwhile. Valid during the
 * call only. Must not free the store. */
typedef void (*gw_route_invalidate_cb)(void *data, const char *sandbox_id);

typedef struct st_gw_route_store_conf_t {
    const char *prefix;                  /* key prefix, e.g. "lizard:" */
    uint64_t lookup_timeout_ms;          /* deadline of one lookup */
    uint64_t cache_ttl_ms;               /* a route is served without asking Redis for this long after it was read; 0: no cache */
    uint64_t negative_ttl_ms;            /* "no such sandbox" is remembered this long; 0: not at all */
    uint64_t stale_ttl_ms;               /* while Redis cannot answer, routes read less than this long ago still serve */
    uint64_t max_port_timeout_ms;        /* the largest timeout:<n> a record may set; 0: GW_SANDBOX_MAX_TIMEOUT_MS */
    gw_route_store_counters_t *counters; /* NULL: not counted; borrowed, must outlive the store */
    gw_route_lifecycle_cb on_lifecycle;  /* NULL: none */
    void *lifecycle_data;
    gw_route_invalidate_cb on_invalidate; /* NULL: none */
    void *invalidate_data;
    /* a message holding ':' ("domain:<host>", "cert:<name>": not a sandbox id) goes here as is, and nowhere
     * else; NULL: ignored */
    void (*on_other_message)(void *data, const char *payload, size_t len);
    void *other_message_data;
} gw_route_store_conf_t;

typedef enum {
    GW_ROUTE_FOUND = GW_KEYED_FOUND,
    GW_ROUTE_NOT_FOUND = GW_KEYED_NOT_FOUND,
    GW_ROUTE_UNAVAILABLE = GW_KEYED_UNAVAILABLE, /* Redis down or the deadline passed, and no usable cached route */
} gw_route_status_t;

/* `sandbox` is borrowed for the duration of the call (retain to keep it);
 * non-NULL only with GW_ROUTE_FOUND. */
typedef void (*gw_route_cb)(void *data, gw_route_status_t status, gw_sandbox_t *sandbox);

/* The store borrows `redis` (the worker owns it) and copies conf. Until
 * gw_route_store_subscribe is called nothing is cached (concurrent lookups
 * of one sandbox still share one HGETALL): without invalidation a cache
 * could not stop traffic to an unexposed port at once. Never NULL. */
gw_route_store_t *gw_route_store_new(h2o_loop_t *loop, gw_redis_t *redis, const gw_route_store_conf_t *conf);

/* Drops open lookups without calling them back. Not from inside a lookup
 * callback. Free the subscriber connection (if any) before the store. NULL
 * is a no-op. */
void gw_route_store_free(gw_route_store_t *s);

/* Turns the cache on: SUBSCRIBEs `subscriber` (a connection of its own, not
 * the one given to gw_route_store_new; borrowed) to "<prefix>routes" and
 * takes its state callback. A message "<sandboxId>" evicts that sandbox;
 * every (re)confirmed subscription drops the whole cache, since messages
 * may have been lost meanwhile. Returns 0, or -1 when gw_redis_subscribe
 * refuses. */
int gw_route_store_subscribe(gw_route_store_t *s, gw_redis_t *subscriber);

/* Starts a lookup. cb is always called later from the loop (never from
 * inside this call; a cache hit answers on the next loop turn), exactly
 * once, no later than lookup_timeout_ms after its fetch was sent (a
 * publish of the sandbox that detaches that fetch makes it join one sent
 * after the publish, at most 4 times, then it is answered
 * GW_ROUTE_UNAVAILABLE), unless gw_route_lookup_cancel is called first. Returns the handle for cancelling, never NULL (out of
 * memory aborts, as everywhere).
 *
 * The answer never predates a publish of the sandbox (or a resubscription)
 * that the store saw before answering: a fetch that such a publish detached
 * does not answer its waiters, they join a fetch sent after it; a cache hit
 * still waiting for the loop when one comes is looked up again. So whatever
 * the answer lets in and registers with revocation from the callback is
 * either checked against the new record or there before the publish's own
 * read (limits/revocation.h). */
gw_route_lookup_t *gw_route_store_lookup(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data);

/* gw_route_store_lookup that reads Redis even when the cache holds a fresh
 * entry (joining a fetch already in flight: one sent before the last publish
 * was detached by it): what a request waiting for a state change asks when
 * no publish came. The answer refreshes the cache. While Redis cannot answer,
 * a stale route may still answer, as for any lookup. */
gw_route_lookup_t *gw_route_store_lookup_fresh(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data);

/* After this, the lookup's callback is never called. Not from inside that
 * callback. */
void gw_route_lookup_cancel(gw_route_lookup_t *l);

/* 1 while the subscription is confirmed: a cache kept in step by its
 * messages (the route store's, or one fed from on_other) can be trusted. */
int gw_route_store_listening(const gw_route_store_t *s);

/* Entries currently held (tests, metrics). */
size_t gw_route_store_num_entries(const gw_route_store_t *s);

#endif
