/*
 * One gw_timeout_t (common/engine.h) per (loop, duration), shared by every
 * module that asks for that duration. libh2o 2.2.5's evloop walks all of a
 * loop's h2o_timeout_t on every turn (h2o_timeout_get_wake_at, then h2o_timeout_run on each,
 * empty or not): each one more costs about 30 instructions a turn, about
 * 60 per proxied request. Entries of one duration are linked in the order
 * they expire, whoever links them, so sharing changes no deadline (h2o's
 * own context shares its zero and one-second timeouts the same way, and
 * a worker's are adopted here). On h2o master's timer wheel a duration is
 * only a number: nothing is left to share, and only 2.2.5 builds this
 * module's .c (issue 40; it goes with 2.2.5).
 */
#ifndef GW_COMMON_LOOP_TIMEOUT_H
#define GW_COMMON_LOOP_TIMEOUT_H

#include <stdint.h>
#include <stdlib.h>
#include <h2o.h>
#include "common/engine.h"

#ifdef GW_ENGINE_H2O_MASTER

/*
 * On master's timer wheel a timer costs the same whatever its duration and
 * however many durations a loop has: there is nothing to share, and
 * loop_timeout.c is not built. Each acquire gets a duration of its own
 * (a number, freed by its release); adopting is a no-op.
 */
static inline gw_timeout_t *gw_loop_timeout_acquire(h2o_loop_t *loop, uint64_t ms)
{
    gw_timeout_t *t = h2o_mem_alloc(sizeof(*t));

    gw_timeout_init(loop, t, ms);
    return t;
}

static inline void gw_loop_timeout_adopt_context(h2o_context_t *ctx)
{
    (void)ctx;
}

static inline void gw_loop_timeout_release(h2o_loop_t *loop, gw_timeout_t *timeout)
{
    (void)loop;
    free(timeout);
}

#else

/* The loop's gw_timeout_t of `ms`, made on the first ask; never NULL (out
 * of memory aborts). Each acquire is paired with one release. */
gw_timeout_t *gw_loop_timeout_acquire(h2o_loop_t *loop, uint64_t ms);
/* Makes `timeout` (owned by the caller, which outlives every user: h2o's
 * context's zero_timeout or one_sec_timeout) the loop's of its duration, if
 * the loop has none yet. */
void gw_loop_timeout_adopt(h2o_loop_t *loop, gw_timeout_t *timeout);
/* Adopts the durations h2o's `ctx` keeps for itself (its 0 ms and 1 s
 * ones) on ctx's loop; `ctx` outlives every user. */
void gw_loop_timeout_adopt_context(h2o_context_t *ctx);
/* Drops one reference; the last one disposes it (no entry may be linked
 * then). NULL is a no-op. */
void gw_loop_timeout_release(h2o_loop_t *loop, gw_timeout_t *timeout);

#endif /* GW_ENGINE_H2O_MASTER */

#endif
