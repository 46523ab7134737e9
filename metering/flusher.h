/*
 * The flusher: writes the queue's sealed batches to Redis, one MULTI/EXEC
 * at a time in seq order, on one event loop (worker 0's) with a Redis
 * connection of its own, so a large transaction never delays route lookups.
 * A failed batch is sent again unchanged (same seq values).
 */
#ifndef GW_METERING_FLUSHER_H
#define GW_METERING_FLUSHER_H

#include <h2o.h>
#include "metering/queue.h"
#include "common/redis.h"

/* Deadline of one MULTI/EXEC on the event loop. */
#define GW_METERING_EXEC_TIMEOUT_MS 5000
/* With Sentinel (always) or with replicas listed by ROLE, a batch counts as
 * written once WAIT 1 <this> after its EXEC reports a replica that has it;
 * otherwise it is waited for again, or sent again (same seq) to the next
 * primary if this one goes away: in full to a primary of another
 * replication id, as INCRBY 0 only to the same one. */
#define GW_METERING_WAIT_MS 1000

/* Starts m's flusher on `loop` (the calling thread's), connecting to Redis
 * as conf says (copied). Never fails (out of memory aborts). */
void gw_metering_start_flusher(gw_metering_t *m, h2o_loop_t *loop, const gw_redis_conf_t *conf);
/* Seals and sends the next batch if none is in flight. From the flusher's loop. */
void gw_metering_flush(gw_metering_t *m);
/* 1 while a MULTI/EXEC of the flusher awaits its answer. From the flusher's thread. */
int gw_metering_in_flight(const gw_metering_t *m);
/* Closes the flusher's connection and frees it (a batch in flight stays
 * pending). From the flusher's thread, after its loop stopped. No flusher: no-op. */
void gw_metering_stop_flusher(gw_metering_t *m);

#endif
