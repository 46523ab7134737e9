/*
 * A gw_timeout_t that a configured 0 turns off (h2o's own would fire at
 * once), for the proxy's deadlines and the pool's idle lifetimes; the loop's
 * timeout of that duration, shared (common/loop_timeout.h).
 */
#ifndef GW_UPSTREAM_OPT_TIMEOUT_H
#define GW_UPSTREAM_OPT_TIMEOUT_H

#include <stdint.h>
#include <h2o.h>
#include "common/engine.h"
#include "common/loop_timeout.h"

typedef struct st_gw_opt_timeout_t {
    int enabled;           /* 0: entries are never linked */
    gw_timeout_t *timeout; /* NULL when not enabled */
} gw_opt_timeout_t;

static inline void gw_opt_timeout_init(h2o_loop_t *loop, gw_opt_timeout_t *t, uint64_t ms)
{
    t->enabled = ms != 0;
    t->timeout = t->enabled ? gw_loop_timeout_acquire(loop, ms) : NULL;
}

static inline void gw_opt_timeout_dispose(h2o_loop_t *loop, gw_opt_timeout_t *t)
{
    gw_loop_timeout_release(loop, t->timeout);
    t->timeout = NULL;
}

#endif
