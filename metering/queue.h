/*
 * The queue: the process-wide gw_metering_t that workers hand their counts
 * to (one mutex). Counts merge into an open batch, one record per sandbox
 * and project, until it is sealed into batches with seq values; sealed
 * batches go to Redis in order (the flusher), each on its own: executed,
 * then (Sentinel) acknowledged by a replica, then out of the journal.
 */
#ifndef GW_METERING_QUEUE_H
#define GW_METERING_QUEUE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "common/hashtab.h"
#include "metering/activity.h"
#include "metering/meter.h"
#include "metering/record.h"
#include "metering/journal.h"
#include "metering/replication.h"
#include "metering/spill.h"

/* Sealed batches not yet executed (Redis down). At the cap nothing more is
 * sealed: new counts merge into the open (unsealed) batch, one record per
 * sandbox and project, so an outage of any length holds this many batches
 * (a few more when one flush needs several, and the journal's) plus one
 * record per sandbox that had traffic. Merging into a sealed batch instead
 * would change records whose seq may already be in Redis (a timed-out
 * EXEC), and a consumer dropping duplicates by seq would then lose the
 * added bytes. Batches executed and waiting for a replica do not count. */
#define GW_METERING_MAX_BATCHES 16
/* Records of batches executed and not acknowledged by a replica (Sentinel
 * with no replica in sync) kept, in memory and in the journal: about 25
 * MB of journal. Past it the oldest such batches are released as written
 * (the primary has them; only its loss before a replica syncs loses them),
 * said on stderr and counted (unacked_released). */
#define GW_METERING_MAX_UNACKED_RECORDS 100000
/* seq of the first record of a run is (wall-clock ms at start) * this; each
 * record takes the next value. */
#define GW_METERING_SEQ_PER_MS 1000

typedef struct st_gw_metering_conf_t {
    const char *prefix;           /* "lizard:" */
    const char *instance_id;      /* the `gateway` field */
    const char *spill_file;       /* the journal; NULL: none */
    uint64_t journal_interval_ms; /* how often the journal is written; 0: no thread (the caller writes it, tests) */
} gw_metering_conf_t;

/* For /metrics. */
typedef struct st_gw_metering_stats_t {
    uint64_t pending_records;    /* counted, not yet written (sealed or open) */
    uint64_t pending_batches;    /* sealed, not yet written */
    uint64_t unacked_batches;    /* executed, no replica's acknowledgement yet (Sentinel) */
    uint64_t unacked_bytes;      /* the egress bytes of those */
    uint64_t records_written;    /* records of batches written (EXEC answered; with Sentinel, acknowledged) */
    uint64_t flush_failures;     /* MULTI/EXEC that failed, timed out or could not be sent */
    uint64_t batches_reexecuted; /* executed again on a new primary that lacked them */
    uint64_t batches_held;       /* not executed again: the new primary held them */
    uint64_t unacked_released;   /* records released unacknowledged at GW_METERING_MAX_UNACKED_RECORDS */
    uint64_t journal_bytes;      /* the journal's size now */
    uint64_t journal_failures;   /* journal writes that failed (full disk, I/O error) */
    uint64_t spill_written;      /* records left in the journal at exit */
    uint64_t spill_replayed;     /* records (sealed or open) loaded from the journal at start */
    uint64_t spill_malformed;    /* journal entries skipped at start */
    uint64_t records_lost;       /* at exit: neither written to Redis nor to the journal; and commands Redis refused */
    uint64_t quota_reached;      /* sandboxes an INCRBY reply showed at or past their egress_quota, published (metering/quota.h) */
} gw_metering_stats_t;

typedef struct st_gw_metering_t {
    char *prefix;      /* owned copies of the conf */
    char *instance_id; /* ... */
    gw_metering_spill_t spill;
    gw_metering_journal_t journal;
    pthread_mutex_t mutex;
    /* under mutex */
    gw_hashtab_t open; /* not sealed yet, no seq: gw_metering_entry_t, one per (sandbox, project) */
    gw_metering_batch_t *head, *tail;
    size_t num_batches;
    size_t num_unsent; /* SEALED or SENDING */
    size_t unacked_records;
    uint64_t next_seq;
    gw_metering_stats_t stats;
    int releasing;           /* at GW_METERING_MAX_UNACKED_RECORDS: log once per streak */
    gw_activity_t *activity; /* the workers' last interval, handed over as they stop, for the final flush */
    /* metering/flusher.c's, on the flusher's thread only; NULL while none runs */
    struct st_gw_metering_flusher_t *flusher;
} gw_metering_t;

/* Copies conf, takes the journal's lock (held until gw_metering_free: one
 * process per journal), replays the journal (its batches go first; what was
 * open stays open), rewrites it, starts its writer thread, and picks the
 * first seq: now_ms * GW_METERING_SEQ_PER_MS, or above the highest seq in
 * the journal. NULL with *err (malloc'd) when another process holds the
 * lock, the lock file cannot be opened, or the journal cannot be read or
 * was written by a later version. */
gw_metering_t *gw_metering_new(const gw_metering_conf_t *conf, uint64_t now_ms, char **err);
/* Stops the journal's thread and frees everything, written or not (stop
 * the flusher first). NULL: no-op. */
void gw_metering_free(gw_metering_t *m);

/* Moves the meter's counts into the open batch (merging with what other
 * workers handed over for the same sandbox and project); to_ms = now_ms.
 * Called by the meter's thread. */
void gw_metering_submit(gw_metering_t *m, gw_meter_t *meter, uint64_t now_ms);

/* Moves what a stopping worker's activity recorded since its last flush
 * into m, for the final flush to write (ZADD GT, best-effort). Any thread. */
void gw_metering_submit_activity(gw_metering_t *m, gw_activity_t *a);

/* Cuts the open batch into sealed batches with seq values (journaled),
 * unless GW_METERING_MAX_BATCHES are waiting to be executed (force: even
 * then). Returns the number of batches sealed. */
size_t gw_metering_seal(gw_metering_t *m, int force);

/* The oldest batch to execute (SEALED), now SENDING; NULL when there is
 * none. Finish it with gw_metering_batch_executed or _failed. */
gw_metering_batch_t *gw_metering_next_batch(gw_metering_t *m);
/* Its EXEC failed: SEALED again, sent again as is. */
void gw_metering_batch_failed(gw_metering_t *m, gw_metering_batch_t *b);
/* Its EXEC's answer was lost (sent at sent_ms, wall clock): SEALED again,
 * and before it is sent again the stream is searched for it
 * (unknown_since_ms; the flusher's). */
void gw_metering_batch_unknown(gw_metering_t *m, gw_metering_batch_t *b, uint64_t sent_ms);
/* An unknown batch is not in the current primary's stream: executed again
 * (counted as such). */
void gw_metering_batch_lacking(gw_metering_t *m, gw_metering_batch_t *b);
/* An unknown batch was found in the current primary's stream: EXECUTED
 * there (at `offset`, that primary's offset now: an upper bound), counted as
 * held. */
void gw_metering_batch_found(gw_metering_t *m, gw_metering_batch_t *b, const char *replid, uint64_t offset, int need_replica);
/* Its EXEC was answered by the primary of history `replid`, whose
 * master_repl_offset was `offset` right after it (GW_METERING_OFFSET_UNKNOWN:
 * not learnt). Written now unless need_replica; else EXECUTED until a
 * replica acknowledges it (gw_metering_acked). */
void gw_metering_batch_executed(gw_metering_t *m, gw_metering_batch_t *b, const char *replid, uint64_t offset, int need_replica);
/* A primary was connected to (info: its INFO replication): each EXECUTED
 * batch it holds stays EXECUTED (now in its history), each it lacks is
 * SEALED again, to be executed on it (same seq). Counted and said. */
void gw_metering_primary_now(gw_metering_t *m, const struct st_gw_repl_info_t *info);
/* The primary of this very connection now calls its history info->replid
 * instead of old_replid (a primary takes a new replication id, keeping its
 * offsets, when its first replica attaches): batches executed there are in
 * the renamed history. */
void gw_metering_history_renamed(gw_metering_t *m, const char *old_replid, const gw_repl_info_t *info);
/* Every EXECUTED batch an online replica of that primary acknowledged is written. */
void gw_metering_acked(gw_metering_t *m, const struct st_gw_repl_info_t *info);
/* 1 when batches wait for a replica's acknowledgement. */
int gw_metering_has_unacked(gw_metering_t *m);
/* The writer of a SENDING batch is gone (the flusher's loop stopped): SEALED again. */
void gw_metering_requeue_in_flight(gw_metering_t *m);

/* Adds n to records_lost. Any thread. */
void gw_metering_count_lost(gw_metering_t *m, uint64_t n);

/* Adds n to quota_reached. Any thread. */
void gw_metering_count_quota_reached(gw_metering_t *m, uint64_t n);

/* Copies the counters into *out (gauges counted now). Any thread. */
void gw_metering_get_stats(gw_metering_t *m, gw_metering_stats_t *out);

#endif
