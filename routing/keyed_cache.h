/*
 * The cache both lookup stores are built on (routing/route_store.c for
 * sandboxes, routing/domain_store.c for custom domains): one per worker
 * thread, a bounded table of what HGETALL <prefix><kind>:{<key>} last said in
 * front of Redis, with one fetch in flight per key shared by every lookup
 * of that key (single flight), negative entries, a TTL, stale answers while
 * Redis cannot answer, eviction by a publish and a whole-cache expiry when
 * the owner's subscription is (re)confirmed. The store gives the key's kind,
 * a parser of the reply and the type of its values; the cache does the rest.
 */
#ifndef GW_ROUTING_KEYED_CACHE_H
#define GW_ROUTING_KEYED_CACHE_H

#include <stdatomic.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include <h2o.h>
#include "common/redis.h"

typedef struct st_gw_keyed_cache_t gw_keyed_cache_t;
typedef struct st_gw_keyed_lookup_t gw_keyed_lookup_t;

/* Counters for operators: written by the cache's thread only (GW_COUNTER_ADD,
 * common/counter.h), so one block per cache; readable from any thread. */
typedef struct st_gw_keyed_cache_counters_t {
    atomic_uint_fast64_t hits;          /* answered from the cache, no Redis call */
    atomic_uint_fast64_t fetches;       /* HGETALLs sent (one per miss, shared by concurrent lookups) */
    atomic_uint_fast64_t coalesced;     /* lookups that joined a fetch already in flight */
    atomic_uint_fast64_t stale;         /* answered with an expired value because Redis could not answer */
    atomic_uint_fast64_t unavailable;   /* answered GW_KEYED_UNAVAILABLE */
    atomic_uint_fast64_t invalidations; /* publishes that evicted a cached key */
    atomic_uint_fast64_t flushes;       /* whole-cache expiries on (re)subscription */
    atomic_uint_fast64_t evictions;     /* entries dropped to stay under max_entries */
} gw_keyed_cache_counters_t;

typedef enum {
    GW_KEYED_FOUND = 0,
    GW_KEYED_NOT_FOUND,
    GW_KEYED_UNAVAILABLE, /* Redis down or the deadline passed, and no usable cached value */
} gw_keyed_status_t;

/* The caller's callback, of the caller's own type: the cache stores it and
 * gives it back to conf.answer, which casts it back and calls it. */
typedef void (*gw_keyed_fn)(void);

typedef struct st_gw_keyed_cache_conf_t {
    const char *prefix; /* the Redis key is "<prefix><kind>:{<key>}", e.g. "lizard:sbx:{<id>}" */
    const char *kind;
    size_t key_max;                      /* longest key looked up; longer or empty: GW_KEYED_NOT_FOUND, never fetched */
    size_t max_entries;                  /* beyond it the entry confirmed longest ago goes (not one with a fetch in flight) */
    uint64_t lookup_timeout_ms;          /* deadline of one fetch */
    uint64_t cache_ttl_ms;               /* a value answers without asking Redis this long after its fetch was sent */
    uint64_t negative_ttl_ms;            /* "not found" is remembered this long; 0: not at all */
    uint64_t stale_ttl_ms;               /* while Redis cannot answer, values read less than this long ago still answer */
    gw_keyed_cache_counters_t *counters; /* NULL: not counted; borrowed, must outlive the cache */
    /* a publish keeps the evicted entry's value (never served) to be passed as `before` to on_fetched */
    int keep_revoked;
    void *ctx; /* the first argument of the callbacks below */
    /* 0 with *value set (a new value, one reference the cache takes; NULL: no such key), or -1 when the reply
     * cannot be read (answered as if Redis could not be asked). `key` is NUL-terminated. */
    int (*parse)(void *ctx, const char *key, const redisReply *reply, void **value);
    void (*retain)(void *value);
    void (*release)(void *value); /* NULL is never passed */
    /* 1 while the publishes that evict are heard: only then does an entry answer as fresh */
    int (*listening)(void *ctx);
    /* calls cb (cast back to its type) with the answer; `value` is borrowed for the call */
    void (*answer)(gw_keyed_fn cb, void *data, gw_keyed_status_t status, void *value);
    /* NULL: none. Else "GET <prefix><counter_kind>:{<key>}" is sent right before each HGETALL, in the same
     * round trip (no second one), and `counted` is given its value (a decimal; 0 when absent, unreadable or
     * not answered in time) with each value a fetch parsed, before anyone else sees that value. */
    const char *counter_kind;
    void (*counted)(void *value, uint64_t counter);
    /* NULL: none. After a fetch for a cached key was read (`before`: what the entry held, NULL when nothing;
     * `after`: the new value, NULL: not found), before it is kept. Must not free the cache. */
    void (*on_fetched)(void *ctx, const char *key, void *before, void *after);
} gw_keyed_cache_conf_t;

/* Borrows `redis` (the worker's); copies conf, its prefix and kind. Nothing
 * is kept until gw_keyed_cache_set_caching(c, 1): concurrent lookups of one
 * key still share one fetch. Never NULL. */
gw_keyed_cache_t *gw_keyed_cache_new(h2o_loop_t *loop, gw_redis_t *redis, const gw_keyed_cache_conf_t *conf);

/* Drops open lookups without calling them back and cancels the fetches.
 * Not from inside a lookup callback. NULL is a no-op. */
void gw_keyed_cache_free(gw_keyed_cache_t *c);

/* 1: answers are kept (the owner hears the publishes that evict them). */
void gw_keyed_cache_set_caching(gw_keyed_cache_t *c, int on);

/* Starts a lookup of `key` (len bytes, compared as is). cb is always called
 * later from the loop (never from inside this call; a cache hit answers on
 * the next loop turn), exactly once, no later than lookup_timeout_ms after
 * its fetch was sent (a publish of the key that detaches that fetch makes it
 * join one sent after the publish, at most 4 times, then it is answered
 * GW_KEYED_UNAVAILABLE), unless gw_keyed_lookup_cancel comes first. `fresh`:
 * a cached entry never answers, only a fetch (one in flight, or one sent
 * now) does, or a stale value when Redis cannot answer. Never NULL.
 *
 * The answer never predates a publish of the key (or a flush) that the cache
 * saw before answering: a fetch that such a publish detached does not answer
 * its waiters, they join a fetch sent after it; a cache hit still waiting
 * for the loop when one comes is looked up again. */
gw_keyed_lookup_t *gw_keyed_cache_lookup(gw_keyed_cache_t *c, const char *key, size_t len, int fresh, gw_keyed_fn cb, void *data);

/* After this, the lookup's callback is never called. Not from inside that
 * callback. A fetch left without waiters goes on: its answer fills the cache. */
void gw_keyed_lookup_cancel(gw_keyed_lookup_t *l);

/* A publish named `key`: its entry stops answering (kept as revoked with
 * conf.keep_revoked and a value, else removed); the waiters of its fetch in
 * flight join one sent from now on. Returns 1 when the key was cached. */
int gw_keyed_cache_invalidate(gw_keyed_cache_t *c, const char *key, size_t len);

/* The owner's subscription was (re)confirmed: publishes may have been lost,
 * so nothing cached answers before it is read again (values still stand in
 * while Redis cannot answer, bounded by stale_ttl_ms). */
void gw_keyed_cache_flush(gw_keyed_cache_t *c);

/* 1 when a lookup of `key` (not fresh) made now would send a fetch to Redis
 * for a key that holds no value: not cached, or "not found" and expired (no
 * entry answers it, and no fetch of it is in flight to join). Reading again
 * a value the cache holds is not counted: that is bounded by the keys it
 * holds, not by what clients make up. For a caller that bounds what its
 * clients may cost Redis (custom domains). */
int gw_keyed_cache_would_fetch_unknown(gw_keyed_cache_t *c, const char *key, size_t len);

/* Entries currently held (tests, metrics). */
size_t gw_keyed_cache_num_entries(const gw_keyed_cache_t *c);

#endif
