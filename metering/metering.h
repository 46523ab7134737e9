/*
 * Metering: the bytes each sandbox moved, written to Redis for billing as
 * XADD <prefix>egress + INCRBY <prefix>egress:{<id>}, one MULTI/EXEC per
 * batch. Workers count into their own gw_meter_t without a lock; every
 * flush interval they hand their counts to the process-wide gw_metering_t,
 * whose flusher (on worker 0's loop) sends sealed batches one at a time in
 * seq order, retries a failed one unchanged (same seq values), and at exit
 * writes what Redis did not take to the spill file replayed on next start.
 *
 * The module's files, one job each:
 *   record       records, batches, tables of records; project ids cleaned
 *   meter        one worker's counts (gw_meter_t)
 *   queue        the process-wide open batch and sealed batches (gw_metering_t)
 *   commands     the commands of a batch, shared by both writers
 *   flusher      the MULTI/EXEC writer on the event loop
 *   final_flush  the blocking writer at exit
 *   spill        the spill file: lock, replay, write
 *   activity     last traffic per sandbox (ZADD GT), with each flush
 *   worker_meter one worker's meter and activity, the way bytes enter them,
 *                and their hand-over every flush interval
 */
#ifndef GW_METERING_METERING_H
#define GW_METERING_METERING_H

#include "metering/final_flush.h"
#include "metering/flusher.h"
#include "metering/meter.h"
#include "metering/queue.h"
#include "metering/spill.h"

#endif
