/*
 * Fixed-size objects made and freed on every request (route lookups, idle
 * upstream connections, revocation buckets) come from a per-thread free
 * list instead of malloc and free each time. The gateway's own (2.2.5's
 * h2o_mem_recycle_t, the same algorithm, changed shape on h2o master:
 * issue 40), not thread-safe: one owner, on one thread.
 */
#ifndef GW_COMMON_RECYCLE_H
#define GW_COMMON_RECYCLE_H

#include <stddef.h>
#include <stdlib.h>
#include <h2o/memory.h>

/* How many freed objects of one kind a thread keeps for reuse: the
 * requests of a busy worker in flight at once, roughly; past it they go
 * back to malloc. */
#define GW_RECYCLE_MAX 64

typedef struct st_gw_recycle_chunk_t {
    struct st_gw_recycle_chunk_t *next;
} gw_recycle_chunk_t;

/* Zero-initialised plus `max` set (GW_RECYCLE_MAX) is ready; every object
 * it holds has the one size its owner always asks for. */
typedef struct st_gw_recycle_t {
    size_t max; /* objects kept at most */
    size_t cnt; /* objects kept now */
    gw_recycle_chunk_t *head;
} gw_recycle_t;

/* An object of `sz` bytes (at least a pointer's; the same `sz` on every
 * call for one `r`): a kept one, or a new one (out of memory aborts). */
static inline void *gw_recycle_alloc(gw_recycle_t *r, size_t sz)
{
    gw_recycle_chunk_t *chunk;

    if (r->cnt == 0)
        return h2o_mem_alloc(sz);
    chunk = r->head;
    r->head = chunk->next;
    --r->cnt;
    return chunk;
}

/* Gives `p` (from gw_recycle_alloc on `r`) back: kept, or freed past max. */
static inline void gw_recycle_free(gw_recycle_t *r, void *p)
{
    gw_recycle_chunk_t *chunk = p;

    if (r->cnt == r->max) {
        free(p);
        return;
    }
    chunk->next = r->head;
    r->head = chunk;
    ++r->cnt;
}

/* Frees what `r` holds (when its owner goes); r stays usable. */
static inline void gw_recycle_clear(gw_recycle_t *r)
{
    while (r->cnt != 0)
        free(gw_recycle_alloc(r, 0));
}

#endif
