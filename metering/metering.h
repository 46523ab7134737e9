/*
 * Metering: the bytes each sandbox moved, written to Redis for billing as
 * XADD <prefix>egress + INCRBY <prefix>egress:{<id>}, one MULTI/EXEC per
 * batch. Workers count into their own gw_meter_t without a lock; every
 * journal interval they hand their counts to the process-wide
 * gw_metering_t, whose journal thread appends what changed to the journal
 * and fsyncs; every flush interval its flusher (on worker 0's loop) seals
 * the counts into batches and sends them as they form, in seq order, one
 * EXEC after another, never waiting for an earlier batch's replica; a batch
 * leaves the journal once written (with Sentinel: acknowledged by a
 * replica). After a failover, a batch is executed again only where the new
 * primary lacks it (replication id and offset). A failed batch is retried
 * unchanged (same seq values); at exit what Redis did not take stays in the
 * journal, replayed at the next start.
 *
 * The module's files, one job each:
 *   record       records, batches, tables of records; project ids cleaned
 *   meter        one worker's counts (gw_meter_t)
 *   queue        the process-wide open batch and sealed batches (gw_metering_t)
 *   commands     the commands of a batch, shared by both writers
 *   flusher      the MULTI/EXEC writer on the event loop
 *   final_flush  the blocking writer at exit
 *   replication  INFO replication: does a primary hold a batch, did a replica acknowledge it
 *   journal      the journal's file and thread: replay, appends, rewrites
 *   journal_format  its entries, written and read
 *   spill        the journal's lock, records as JSON, setting a file aside
 *   activity     last traffic per sandbox (ZADD GT), with each flush
 *   worker_meter one worker's meter and activity, the way bytes enter them,
 *                and their hand-over every flush interval
 */
#ifndef GW_METERING_METERING_H
#define GW_METERING_METERING_H

#include "metering/final_flush.h"
#include "metering/flusher.h"
#include "metering/journal.h"
#include "metering/meter.h"
#include "metering/queue.h"
#include "metering/spill.h"

#endif
