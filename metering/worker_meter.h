/*
 * A worker's metering: its meter (bytes per sandbox, for billing) and its
 * activity (last traffic per sandbox), the one way bytes enter metering on
 * the worker's thread (the proxy counts, the pipeline names the project),
 * and the timer that hands both over every metering.journal_interval_ms
 * (the journal) and seals every metering.flush_interval_ms.
 */
#ifndef GW_METERING_WORKER_METER_H
#define GW_METERING_WORKER_METER_H

#include <stdint.h>
#include <h2o.h>
#include "common/redis.h"
#include "metering/metering.h"

typedef struct st_gw_worker_meter_t gw_worker_meter_t;

/* Every pointer is borrowed and must outlive the worker meter. */
typedef struct st_gw_worker_meter_conf_t {
    gw_metering_t *metering;    /* the process's queue */
    gw_redis_t *redis;          /* the worker's connection: the activity's ZADDs */
    const char *prefix;         /* redis.prefix */
    uint64_t flush_interval_ms; /* metering.flush_interval_ms */
    uint64_t
        journal_interval_ms; /* metering.journal_interval_ms: counts reach the queue (and the journal) this often; 0: at flushes */
    const gw_redis_conf_t *flusher_redis; /* non-NULL: this worker runs the metering flusher, connecting with it */
} gw_worker_meter_conf_t;

/* Builds the worker's meter and activity on `loop` (the calling thread's)
 * and starts its tick (and the flusher, see conf). Never NULL: out of memory
 * aborts, a Redis outage is the flusher's to retry. */
gw_worker_meter_t *gw_worker_meter_new(h2o_loop_t *loop, const gw_worker_meter_conf_t *conf);

/* Remembers what a sandbox's route says for its records, in one look-up:
 * its project (copied) and its egress_quota (GW_EGRESS_QUOTA_NONE: none),
 * which the flusher compares with the running total INCRBY returns. */
void gw_worker_meter_set_route(gw_worker_meter_t *wm, const char *sandbox_id, h2o_iovec_t project, uint64_t egress_quota);

/* Bills bytes moved for a sandbox now, and records its activity unless
 * no_activity (X-Lizard-No-Activity). sandbox_id is only read during the call. */
void gw_worker_meter_add(gw_worker_meter_t *wm, const char *sandbox_id, uint64_t egress, uint64_t ingress, int no_activity);

/* Records activity of a sandbox now, without bytes (an event of a stream
 * whose bytes are billed without activity, upstream/sse_watch.h). */
void gw_worker_meter_touch(gw_worker_meter_t *wm, const char *sandbox_id);

/* Stops the tick (the loop stops soon): counts stay until gw_worker_meter_free. */
void gw_worker_meter_stop_tick(gw_worker_meter_t *wm);

/* Hands what was counted since the last tick to the queue (and the last
 * activity to the final flush), stops the flusher if this worker runs it,
 * and frees. NULL is a no-op. */
void gw_worker_meter_free(gw_worker_meter_t *wm);

#endif
