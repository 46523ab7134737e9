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
 * b: per record XADD <prefix>egress and INCRBY <prefix>egress:{<sandbox>}.
 * Records without a gateway name get `instance_id`. Returns the number of
 * commands emitted, or -1 as soon as emit returned -1. */
long gw_metering_emit_batch(const char *prefix, const char *instance_id, const gw_metering_batch_t *b, gw_metering_emit_cb emit,
                            void *arg);

/* Reports on stderr the commands of an EXEC that ran (an array reply) but
 * failed one by one (say INCRBY on a key that is not a number), and returns
 * their number (records_lost). They are not retried: a retry would fail the
 * same way and hold up every later batch. */
size_t gw_metering_report_exec_errors(const redisReply *reply);

/* An EXEC whose answer was lost is looked for in the stream before it is
 * sent again: XREVRANGE <prefix>egress <end> <since - this> COUNT
 * GW_METERING_SEARCH_PAGE, page after page (at most
 * GW_METERING_SEARCH_PAGES), for its first record's (gateway, seq). The
 * margin covers a primary whose clock is behind ours. */
#define GW_METERING_SEARCH_MARGIN_MS 10000
#define GW_METERING_SEARCH_PAGE 500
#define GW_METERING_SEARCH_PAGES 40

/* Reads one XREVRANGE page: 1 when an entry has fields gateway=`gateway`
 * and seq=`seq`, else 0 with *last (last_size bytes) set to the page's last
 * entry id (the next page ends before it; "" when the page was not full:
 * the search is over). -1: not an XREVRANGE reply. */
int gw_metering_search_page(const redisReply *reply, const char *gateway, uint64_t seq, char *last, size_t last_size);

#endif
