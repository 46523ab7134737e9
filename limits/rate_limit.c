/*
 * req_rate's token buckets, shared by the workers (limits/rate_limit.h).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "limits/rate_limit.h"

typedef struct st_slot_t {
    _Atomic uint64_t key; /* 0: never used */
    _Atomic uint64_t tat; /* the theoretical arrival time, ns */
} slot_t;

struct st_gw_rate_limit_t {
    slot_t slots[GW_RATE_LIMIT_SLOTS];
    int watched;
    /* watched: the latest tat the takes set (ns): every bucket is full by then. Kept with a plain load and store (a
     * race may keep the smaller of two: a bucket taken from at that very moment reads as fuller until its next take) */
    _Atomic uint64_t max_tat;
};

gw_rate_limit_t *gw_rate_limit_new(void)
{
    gw_rate_limit_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        abort();
    return l;
}

gw_rate_limit_t *gw_rate_limit_new_watched(void)
{
    gw_rate_limit_t *l = gw_rate_limit_new();
    l->watched = 1;
    return l;
}

void gw_rate_limit_free(gw_rate_limit_t *l)
{
    free(l);
}

uint64_t gw_rate_limit_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* FNV-1a of the key, never 0 (0 marks an unused slot). */
static uint64_t hash_key(const char *key)
{
    uint64_t h = 1469598103934665603u;
    for (; *key != '\0'; ++key)
        h = (h ^ (unsigned char)*key) * 1099511628211u;
    return h != 0 ? h : 1;
}

/* The slot of `h`: its own, or one taken over (unused, or its bucket full again); NULL when all probed are busy. */
static slot_t *find_slot(gw_rate_limit_t *l, uint64_t h, uint64_t now_ns)
{
    size_t i, start = (size_t)(h % GW_RATE_LIMIT_SLOTS);

    for (i = 0; i != GW_RATE_LIMIT_PROBE; ++i) {
        slot_t *s = &l->slots[(start + i) % GW_RATE_LIMIT_SLOTS];
        if (atomic_load_explicit(&s->key, memory_order_acquire) == h)
            return s;
    }
    for (i = 0; i != GW_RATE_LIMIT_PROBE; ++i) {
        slot_t *s = &l->slots[(start + i) % GW_RATE_LIMIT_SLOTS];
        uint64_t k = atomic_load_explicit(&s->key, memory_order_acquire);
        if (k == h)
            return s; /* another worker took one for h meanwhile */
        if ((k == 0 || atomic_load_explicit(&s->tat, memory_order_relaxed) <= now_ns) &&
            atomic_compare_exchange_strong_explicit(&s->key, &k, h, memory_order_acq_rel, memory_order_acquire))
            return s; /* a full bucket remembers nothing: the old tat (<= now) reads as full for h too */
        if (k == h)
            return s;
    }
    return NULL;
}

/* One token every interval ns; a take is refused when the bucket would be more than tolerance ns in debt. */
static void bucket_shape(uint32_t rate, uint32_t burst, uint64_t *interval, uint64_t *tolerance)
{
    *interval = 1000000000u / rate;
    if (*interval == 0)
        *interval = 1;
    *tolerance = (uint64_t)burst * *interval;
}

uint32_t gw_rate_limit_take(gw_rate_limit_t *l, const char *key, uint32_t rate, uint64_t now_ns)
{
    /* burst x interval: 2 x rate requests at once */
    return gw_rate_limit_take_burst(l, key, rate, rate > UINT32_MAX / 2 ? UINT32_MAX : 2 * rate, now_ns);
}

uint32_t gw_rate_limit_take_burst(gw_rate_limit_t *l, const char *key, uint32_t rate, uint32_t burst, uint64_t now_ns)
{
    uint64_t interval, tolerance, tat, next;
    slot_t *s;

    if (rate == 0 || burst == 0)
        return 0;
    if ((s = find_slot(l, hash_key(key), now_ns)) == NULL)
        return 0; /* the table is busy: admitted (rate_limit.h) */
    bucket_shape(rate, burst, &interval, &tolerance);
    tat = atomic_load_explicit(&s->tat, memory_order_relaxed);
    do {
        next = (tat > now_ns ? tat : now_ns) + interval;
        if (next - now_ns > tolerance) {
            /* refused: a token is there once next - interval - now <= tolerance - interval, i.e. at next - tolerance */
            uint64_t wait_ns = next - tolerance - now_ns;
            uint64_t secs = (wait_ns + 999999999u) / 1000000000u;
            return secs < 1 ? 1 : secs > UINT32_MAX ? UINT32_MAX : (uint32_t)secs;
        }
    } while (!atomic_compare_exchange_weak_explicit(&s->tat, &tat, next, memory_order_relaxed, memory_order_relaxed));
    if (l->watched && next > atomic_load_explicit(&l->max_tat, memory_order_relaxed))
        atomic_store_explicit(&l->max_tat, next, memory_order_relaxed);
    return 0;
}

int gw_rate_limit_below(gw_rate_limit_t *l, const char *key, uint32_t rate, uint32_t burst, uint32_t tokens, uint64_t now_ns)
{
    uint64_t interval, tolerance, tat, h, debt;
    size_t i, start;

    if (!l->watched || rate == 0 || burst == 0 || tokens == 0)
        return 0;
    bucket_shape(rate, burst, &interval, &tolerance);
    /* fewer than `tokens` while tat - now > tolerance - tokens x interval: the debt past which it is so */
    debt = tokens >= burst ? 0 : tolerance - (uint64_t)tokens * interval;
    if (atomic_load_explicit(&l->max_tat, memory_order_relaxed) <= now_ns + debt)
        return 0;
    h = hash_key(key);
    start = (size_t)(h % GW_RATE_LIMIT_SLOTS);
    for (i = 0; i != GW_RATE_LIMIT_PROBE; ++i) {
        slot_t *s = &l->slots[(start + i) % GW_RATE_LIMIT_SLOTS];
        if (atomic_load_explicit(&s->key, memory_order_acquire) == h) {
            tat = atomic_load_explicit(&s->tat, memory_order_relaxed);
            return tat > now_ns + debt;
        }
    }
    return 0;
}
