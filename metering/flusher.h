/*
 * The flusher: writes the queue's sealed batches to Redis as they form, one
 * MULTI/EXEC after another in seq order, on one event loop (worker 0's)
 * with a Redis connection of its own, so a large transaction never delays
 * route lookups. An EXEC is followed by INFO replication in the same
 * pipeline: where the batch went (replication id, offset). With Sentinel a
 * batch is written once an online replica acknowledged that offset
 * (INFO replication, asked again every tick while batches wait); waiting
 * never holds a later batch back. After a reconnect the primary's INFO
 * decides which unacknowledged batches it holds and which it lacks
 * (metering/replication.h). A failed batch is sent again unchanged (same
 * seq values).
 */
#ifndef GW_METERING_FLUSHER_H
#define GW_METERING_FLUSHER_H

#include <h2o.h>
#include "metering/queue.h"
#include "common/redis.h"

/* Deadline of one MULTI/EXEC (and of an INFO) on the event loop. */
#define GW_METERING_EXEC_TIMEOUT_MS 5000

/* Starts m's flusher on `loop` (the calling thread's), connecting to Redis
 * as conf says (copied); with sentinels a batch needs a replica's
 * acknowledgement. Never fails (out of memory aborts). */
void gw_metering_start_flusher(gw_metering_t *m, h2o_loop_t *loop, const gw_redis_conf_t *conf);
/* Sends what is due: the next batch if none is on the wire, and, while
 * batches wait for a replica, an INFO replication for their
 * acknowledgement. Seals first when `seal`. From the flusher's loop. */
void gw_metering_flush(gw_metering_t *m, int seal);
/* 1 while a MULTI/EXEC of the flusher awaits its answer. From the flusher's thread. */
int gw_metering_in_flight(const gw_metering_t *m);
/* Closes the flusher's connection and frees it (a batch in flight stays
 * pending). From the flusher's thread, after its loop stopped. No flusher: no-op. */
void gw_metering_stop_flusher(gw_metering_t *m);

#endif
