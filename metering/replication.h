/*
 * What a primary says of its replication (INFO replication), and the two
 * questions metering asks of it: does this primary hold a batch that an
 * EXEC put at (replid, offset) of some history, and has a replica
 * acknowledged it.
 */
#ifndef GW_METERING_REPLICATION_H
#define GW_METERING_REPLICATION_H

#include <stddef.h>
#include <stdint.h>
#include "metering/record.h"

typedef struct st_gw_repl_info_t {
    int is_primary;                           /* role:master */
    char replid[GW_METERING_REPLID_MAX + 1];  /* master_replid */
    char replid2[GW_METERING_REPLID_MAX + 1]; /* master_replid2 ("" when none) */
    uint64_t offset;                          /* master_repl_offset */
    uint64_t second_offset;                   /* second_repl_offset; 0: none (-1 in INFO) */
    size_t online_replicas;                   /* slaveN lines with state=online */
    uint64_t best_ack;                        /* the highest offset an online replica acknowledged; 0: none */
} gw_repl_info_t;

/* Parses the text of an INFO replication reply (len bytes). Returns 0, or
 * -1 when it has no role, master_replid or master_repl_offset. */
int gw_repl_info_parse(const char *text, size_t len, gw_repl_info_t *out);

/* 1 when the primary described by `now` holds what the primary of history
 * `replid` had at `offset` (0: unknown, from an older spill file): the same
 * history up to now, or the history it was promoted from up to its
 * promotion (master_replid2, second_repl_offset > offset). 0 otherwise. */
int gw_repl_holds(const gw_repl_info_t *now, const char *replid, uint64_t offset);

/* 1 when the primary described by `now` certainly lacks it: promoted from
 * that history before `offset` (known). Neither this nor gw_repl_holds: an
 * unrelated history (a replica restarted from its own disk), which may hold
 * it all the same. */
int gw_repl_lacks(const gw_repl_info_t *now, const char *replid, uint64_t offset);

/* 1 when an online replica of the primary described by `now` acknowledged
 * everything up to `offset` of history `replid` (WAIT counts the same). */
int gw_repl_acked(const gw_repl_info_t *now, const char *replid, uint64_t offset);

#endif
