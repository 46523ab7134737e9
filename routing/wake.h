/*
 * Requests held while their sandbox wakes up (../shared/CONTRACT.md, "Waking
 * a paused sandbox"): one registry per worker, keyed by sandbox. The first
 * request for a paused sandbox with `resume: auto` asks the control plane to
 * resume it (SET <prefix>resume:{<id>} NX PX, then XADD <prefix>resume); the
 * held requests are answered when a fresh read after a publish (or, if the
 * publish was lost, after GW_WAKE_RECHECK_MS) no longer shows it waking.
 */
#ifndef GW_ROUTING_WAKE_H
#define GW_ROUTING_WAKE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include "common/redis.h"
#include "routing/route_store.h"
#include "routing/sandbox.h"

/* PX of the SET NX: at most one resume request per sandbox per this long,
 * across the fleet (the contract's 30 s). */
#define GW_WAKE_LOCK_MS 30000
/* While requests are held, the sandbox is read again this often in case the
 * control plane's publish was lost (the publish is what normally wakes
 * them, within one round trip). */
#define GW_WAKE_RECHECK_MS 1000
/* Upper bounds (ms) of the wake-time histogram's buckets; +Inf follows. */
#define GW_WAKE_HISTOGRAM_BOUNDS                                                                                                   \
    {                                                                                                                              \
        250, 500, 1000, 2500, 5000, 10000, 20000, 30000, 60000                                                                     \
    }
#define GW_WAKE_HISTOGRAM_BUCKETS 9

/* Counters for operators: written by the registry's thread only
 * (GW_COUNTER_ADD, common/counter.h), so one block per registry; readable
 * from any thread. */
typedef struct st_gw_wake_counters_t {
    atomic_int_fast64_t held;             /* gauge: requests held now */
    atomic_uint_fast64_t held_total;      /* requests that were held */
    atomic_uint_fast64_t refused;         /* requests refused over a count limit (429) */
    atomic_uint_fast64_t refused_bytes;   /* requests refused over max_bytes (503) */
    atomic_int_fast64_t held_bytes;       /* gauge: body bytes of the requests held now */
    atomic_uint_fast64_t abandoned;       /* held requests whose client went away */
    atomic_uint_fast64_t timeouts;        /* held requests answered at routing.resume_timeout_ms */
    atomic_uint_fast64_t resume_requests; /* XADDs to <prefix>resume sent: this gateway won the SET NX */
    atomic_uint_fast64_t resume_deduped;  /* SET NX lost: a resume was asked for less than GW_WAKE_LOCK_MS ago */
    atomic_uint_fast64_t resume_failures; /* SET or XADD failed (Redis down, timeout, error reply) */
    /* ms from the first held request to the read that showed the sandbox running, per sandbox wake seen */
    atomic_uint_fast64_t wake_ms_buckets[GW_WAKE_HISTOGRAM_BUCKETS + 1]; /* not cumulative; last: +Inf */
    atomic_uint_fast64_t wake_ms_sum;
    atomic_uint_fast64_t wake_count;
} gw_wake_counters_t;

/* Held requests counted per sandbox beyond one registry (the gateway's
 * workers together, limits.max_held_requests_per_sandbox): acquire returns
 * 1 when one more request of sandbox_id may be held, and each granted
 * acquire is released exactly once, on the registry's thread. */
typedef struct st_gw_wake_slots_t {
    int (*acquire)(void *data, const char *sandbox_id);
    void (*release)(void *data, const char *sandbox_id);
    void *data;
} gw_wake_slots_t;

typedef struct st_gw_wake_conf_t {
    const char *prefix;           /* key prefix, e.g. "lizard:" (copied) */
    const char *instance_id;      /* the `gateway` field and the SET's value (copied) */
    uint64_t timeout_ms;          /* routing.resume_timeout_ms: a request is held at most this long */
    size_t max_per_sandbox;       /* held requests of one sandbox in this registry; only when slots.acquire is NULL */
    gw_wake_slots_t slots;        /* acquire NULL: max_per_sandbox, counted here */
    size_t max_per_worker;        /* held requests of this registry, all sandboxes */
    uint64_t max_bytes;           /* limits.max_held_request_bytes: body bytes held by this registry, all sandboxes */
    uint64_t recheck_ms;          /* 0: GW_WAKE_RECHECK_MS */
    uint64_t command_timeout_ms;  /* deadline of the SET and the XADD */
    gw_wake_counters_t *counters; /* NULL: not counted; borrowed, must outlive the registry */
} gw_wake_conf_t;

typedef enum {
    GW_WAKE_SETTLED = 0, /* a fresh read shows the sandbox neither starting nor waiting to be resumed (running, or not) */
    GW_WAKE_NOT_FOUND,   /* a fresh read shows the sandbox gone */
    GW_WAKE_TIMEOUT,     /* timeout_ms passed */
} gw_wake_result_t;

typedef struct st_gw_wake_t gw_wake_t;
typedef struct st_gw_wake_waiter_t gw_wake_waiter_t;

/* `record`: GW_WAKE_SETTLED only, the fresh record (borrowed for the call:
 * retain it to keep it). Called from the loop, never from inside
 * gw_wake_hold. */
typedef void (*gw_wake_cb)(void *data, gw_wake_result_t result, gw_sandbox_t *record);

/* 1 when a request that found `record` is to be held rather than refused:
 * the sandbox is `starting`, or `paused` with `resume: auto`. Pure. */
int gw_wake_applies(const gw_sandbox_t *record);

/* One per worker. Borrows `redis` (the resume requests go through it) and
 * `routes` (the fresh reads); copies conf. Never NULL (aborts on OOM). */
gw_wake_t *gw_wake_new(h2o_loop_t *loop, gw_redis_t *redis, gw_route_store_t *routes, const gw_wake_conf_t *conf);

/* Drops held requests without calling them back, cancels reads and resume
 * requests in flight. Not from inside a callback. NULL is a no-op. */
void gw_wake_free(gw_wake_t *w);

typedef enum {
    GW_WAKE_HELD = 0,
    GW_WAKE_OVER_COUNT, /* the sandbox's or the registry's count of held requests is at its limit (429) */
    GW_WAKE_OVER_BYTES, /* its body would take the registry's held bytes past max_bytes (503) */
} gw_wake_hold_result_t;

/* Holds a request that found `record` (gw_wake_applies(record) must hold)
 * and whose body is `body_bytes` long (h2o has read it all by now): asks for
 * a resume when the sandbox is paused and this worker has not asked in the
 * last GW_WAKE_LOCK_MS. cb is called exactly once, unless gw_wake_cancel
 * comes first. Returns NULL, without calling cb and with *refused saying
 * why, when the request may not be held: over a count limit (the sandbox's
 * slots, or max_per_worker), or over max_bytes. A request refused over
 * max_bytes still asks for the resume (its retry then finds the sandbox
 * awake); none is asked over a count limit (those requests were held
 * already, and asked). */
gw_wake_waiter_t *gw_wake_hold(gw_wake_t *w, const gw_sandbox_t *record, size_t body_bytes, gw_wake_cb cb, void *data,
                               gw_wake_hold_result_t *refused);

/* The request is gone (client reset or closed): forgets it. `abandoned`
 * counts it as such. Not from inside its callback. */
void gw_wake_cancel(gw_wake_waiter_t *waiter, int abandoned);

/* A publish named sandbox_id (NULL: the subscription was (re)confirmed:
 * any sandbox may have changed): the held sandboxes concerned are read again
 * now. Signature of gw_route_invalidate_cb. */
void gw_wake_on_publish(void *w, const char *sandbox_id);

/* Answers every held request with GW_WAKE_TIMEOUT now, and any held from
 * now on at the next loop turn (the worker is stopping: they must not hold
 * up the drain). */
void gw_wake_expire_all(gw_wake_t *w);

/* Requests held for sandbox_id (NULL: all) on this worker. */
size_t gw_wake_num_held(gw_wake_t *w, const char *sandbox_id);

/* Body bytes of the requests held on this worker. */
uint64_t gw_wake_held_bytes(gw_wake_t *w);

#endif
