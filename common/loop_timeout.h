/*
 * The duration a module links its timers for (common/engine.h's
 * gw_timeout_t), one per (module, duration). On h2o's timer wheel a timer
 * costs the same whatever its duration and however many durations a loop
 * has, so a duration is only a number: each acquire gets one of its own,
 * freed by its release. (libh2o 2.2.5's evloop walked every duration of a
 * loop each turn, so this module once shared one per (loop, duration); the
 * call sites keep that shape.)
 */
#ifndef GW_COMMON_LOOP_TIMEOUT_H
#define GW_COMMON_LOOP_TIMEOUT_H

#include <stdint.h>
#include <stdlib.h>
#include <h2o.h>
#include "common/engine.h"

/* A duration of `ms` for timers of `loop`; never NULL (out of memory
 * aborts). Each acquire is paired with one release. */
static inline gw_timeout_t *gw_loop_timeout_acquire(h2o_loop_t *loop, uint64_t ms)
{
    gw_timeout_t *t = h2o_mem_alloc(sizeof(*t));

    gw_timeout_init(loop, t, ms);
    return t;
}

/* Frees what acquire made; no timer may be linked for it then. NULL is a
 * no-op. */
static inline void gw_loop_timeout_release(h2o_loop_t *loop, gw_timeout_t *timeout)
{
    (void)loop;
    free(timeout);
}

#endif
