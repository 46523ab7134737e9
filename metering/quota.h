/*
 * egress_quota on the metering side (docs/access-control.md, "Who may reach a sandbox, and
 * how much"): the running totals that a written batch's INCRBY replies
 * return, compared with the quota its records carry (no other Redis call).
 * A sandbox found at or past its quota is published on <prefix>routes once,
 * so that every gateway reads its record and total again and refuses its
 * new requests. A watch lives on the flusher's thread only.
 */
#ifndef GW_METERING_QUOTA_H
#define GW_METERING_QUOTA_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "metering/record.h"

/* Sandboxes a watch remembers as published; at the cap it forgets them all
 * (each of those publishes once more if it is still over its quota). */
#define GW_QUOTA_WATCH_MAX 10000

typedef struct st_gw_quota_watch_t gw_quota_watch_t;

/* An empty watch; never NULL (out of memory aborts). */
gw_quota_watch_t *gw_quota_watch_new(void);
/* NULL is a no-op. */
void gw_quota_watch_free(gw_quota_watch_t *w);

/* 1 when `total` (an INCRBY reply) is at or past `quota` (a record's: 0 is
 * none) and `sandbox` was not reported at this quota yet: it is remembered
 * with it. A total under the quota forgets the sandbox, so that after the
 * control plane raised it the next crossing is reported again. */
int gw_quota_watch_check(gw_quota_watch_t *w, const char *sandbox, uint64_t quota, uint64_t total);

/* Reads the EXEC reply of batch b, as gw_metering_emit_batch sent it, and calls reached(arg, sandbox) for each record whose
 * INCRBY reply gw_quota_watch_check reports (sandbox valid during the call).
 * Returns the number of calls. A reply shorter than the batch (or a failed
 * INCRBY) is read as far as it goes. */
size_t gw_quota_watch_exec(gw_quota_watch_t *w, const gw_metering_batch_t *b, const redisReply *exec,
                           void (*reached)(void *arg, const char *sandbox), void *arg);

/* The quota a merged record carries: the smallest set one (0: none), so
 * that a worker holding an older, higher quota cannot hide a crossing; a
 * stale lower one costs at most one publish that changes nothing. */
static inline uint64_t gw_quota_merge(uint64_t a, uint64_t b)
{
    if (a == 0 || (b != 0 && b < a))
        return b;
    return a;
}

#endif
