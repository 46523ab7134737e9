/*
 * What metering says to Redis inside one MULTI/EXEC, and how it reads the
 * answers; shared by the flusher (on the loop) and the final flush
 * (blocking), so that both write exactly the same commands.
 */
#ifndef GW_METERING_COMMANDS_H
#define GW_METERING_COMMANDS_H

#include <stddef.h>
#include <hiredis/hiredis.h>
#include "metering/record.h"

/* Queues one command; argv's strings live only until it returns. Returns 0,
 * or -1 to stop (the command could not be queued). */
typedef int (*gw_metering_emit_cb)(void *arg, int argc, const char **argv, const size_t *argvlen);

/* Calls emit for every command that goes between MULTI and EXEC for batch
 * b: first the per-record commands (XADD <prefix>egress, INCRBY
 * <prefix>egress:{<sandbox>}), then the per-flush ones. Records without a
 * gateway name get `instance_id`. `replid` is the master_replid of the
 * primary the batch goes to (NULL: unknown): a record executed there
 * already (executed_on) gets only INCRBY <key> 0, never its XADD and
 * INCRBY again. Returns the number of commands emitted, or -1 as soon as
 * emit returned -1. */
long gw_metering_emit_batch(const char *prefix, const char *instance_id, const gw_metering_batch_t *b, const char *replid,
                            gw_metering_emit_cb emit, void *arg);

/* 1 when record r was executed on the primary of `replid` already (NULL:
 * unknown, 0): gw_metering_emit_batch sends it INCRBY <key> 0 alone. */
int gw_metering_executed_here(const gw_metering_record_t *r, const char *replid);

/* The master_replid of an INFO replication reply into replid
 * (GW_METERING_REPLID_MAX + 1 bytes). 0, or -1 when the reply is not a
 * primary's or has none. */
int gw_metering_info_replid(const redisReply *reply, char *replid);

/* After an EXEC of b on the primary of `replid`: every record is in that
 * primary's data set (executed_on), whether or not a replica has it yet. */
void gw_metering_mark_executed(gw_metering_batch_t *b, const char *replid);

/* Reports on stderr the commands of an EXEC that ran (an array reply) but
 * failed one by one (say INCRBY on a key that is not a number), and returns
 * their number (records_lost). They are not retried: a retry would fail the
 * same way and hold up every later batch. */
size_t gw_metering_report_exec_errors(const redisReply *reply);

/* The number of replicas a ROLE reply lists (connected and in sync), or -1
 * when it is not a primary's (NULL: no reply). */
long gw_metering_role_replicas(const redisReply *reply);

#endif
