/*
 * req_rate (../shared/CONTRACT.md, Redis): a token bucket per sandbox per
 * gateway, with a burst of 2 x rate, one bucket across all the gateway's
 * workers.
 *
 * Design: the bucket is kept as GCRA (the generic cell rate algorithm,
 * exactly a token bucket): one 64-bit "theoretical arrival time" per
 * sandbox, in a fixed table of slots shared by the workers. A request
 * computes tat' = max(tat, now) + 1/rate and is admitted when
 * tat' - now <= burst/rate; the slot moves from tat to tat' by one
 * compare-and-swap, retried when another worker moved it first. So the
 * hot path takes no lock and writes one word, and the bucket is exact
 * across workers (the per-worker counters of limits/conn_limit.c sum
 * counts, which a rate cannot be split into without starving the worker
 * that gets the traffic: per-worker token shares would let one busy worker
 * through only burst/workers).
 *
 * The table: GW_RATE_LIMIT_SLOTS slots of (key, tat), the key a 64-bit hash
 * of the sandbox id, found by probing GW_RATE_LIMIT_PROBE slots from the
 * hash. A slot whose bucket is full again (tat <= now: nothing to
 * remember) is taken over by another key with a CAS of its key, so idle
 * sandboxes free their slots by themselves. When every probed slot is busy
 * (more than that many sandboxes limited at once within one window) the
 * request is admitted, not refused: the limit protects sandboxes, a full
 * table must not take them down. Sandboxes without req_rate never touch it.
 */
#ifndef GW_LIMITS_RATE_LIMIT_H
#define GW_LIMITS_RATE_LIMIT_H

#include <stdint.h>

#define GW_RATE_LIMIT_SLOTS 65536
#define GW_RATE_LIMIT_PROBE 16

typedef struct st_gw_rate_limit_t gw_rate_limit_t;

/* Never NULL (out of memory aborts). */
gw_rate_limit_t *gw_rate_limit_new(void);
/* The same, for a table that is also asked gw_rate_limit_below: every take
 * also keeps the latest time any bucket is in debt until (one more store per
 * take), so that the question costs one load while every bucket is full
 * enough. */
gw_rate_limit_t *gw_rate_limit_new_watched(void);
void gw_rate_limit_free(gw_rate_limit_t *l);

/* Takes a token of `key`'s bucket (rate per second, burst 2 x rate) at
 * now_ns (CLOCK_MONOTONIC), from any thread. Returns 0 when admitted, else
 * the whole seconds (>= 1) until a token is there, for Retry-After. */
uint32_t gw_rate_limit_take(gw_rate_limit_t *l, const char *key, uint32_t rate, uint64_t now_ns);

/* The same with a bucket of `burst` tokens (>= 1) refilled at `rate` a
 * second. */
uint32_t gw_rate_limit_take_burst(gw_rate_limit_t *l, const char *key, uint32_t rate, uint32_t burst, uint64_t now_ns);

/* 1 when `key`'s bucket (rate, burst as it is taken with) holds fewer than
 * `tokens` (1 .. burst) at now_ns; tokens 1: a take would be refused. Takes
 * nothing. Only for a table made with gw_rate_limit_new_watched (0
 * otherwise). Any thread. */
int gw_rate_limit_below(gw_rate_limit_t *l, const char *key, uint32_t rate, uint32_t burst, uint32_t tokens, uint64_t now_ns);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t gw_rate_limit_now_ns(void);

#endif
