/*
 * Fixed-size objects made and freed on every request (route lookups, idle
 * upstream connections, revocation buckets) come from a per-thread
 * h2o_mem_recycle_t, h2o's free list, instead of malloc and free each time.
 */
#ifndef GW_COMMON_RECYCLE_H
#define GW_COMMON_RECYCLE_H

#include <stdlib.h>
#include <h2o/memory.h>

/* How many freed objects of one kind a thread keeps for reuse: the
 * requests of a busy worker in flight at once, roughly; past it they go
 * back to malloc. */
#define GW_RECYCLE_MAX 64

/* Frees what `r` holds (when its owner goes); r stays usable. */
static inline void gw_recycle_clear(h2o_mem_recycle_t *r)
{
    while (r->cnt != 0)
        free(h2o_mem_alloc_recycle(r, 0)); /* a held chunk: the size is not looked at */
}

#endif
