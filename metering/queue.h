/*
 * The queue: the process-wide gw_metering_t that workers hand their counts
 * to (one mutex). Counts merge into an open batch, one record per sandbox
 * and project, until it is sealed into batches with seq values; sealed
 * batches wait in order for Redis (the flusher) or the spill file.
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
#include "metering/spill.h"

/* Sealed batches waiting for Redis. At the cap nothing more is sealed: new
 * counts merge into the open (unsealed) batch, one record per sandbox, so
 * an outage of any length holds this many batches (a few more when one
 * flush needs several, and the spill file's) plus one record per sandbox
 * that had traffic. Merging into a sealed batch instead would
 * change records whose seq may already be in Redis (a timed-out EXEC), and
 * a consumer dropping duplicates by seq would then lose the added bytes. */
#define GW_METERING_MAX_BATCHES 16
/* seq of the first record of a run is (wall-clock ms at start) * this; each
 * record takes the next value. */
#define GW_METERING_SEQ_PER_MS 1000

typedef struct st_gw_metering_conf_t {
    const char *prefix;      /* "lizard:" */
    const char *instance_id; /* the `gateway` field */
    const char *spill_file;  /* NULL: none */
} gw_metering_conf_t;

/* For /metrics. */
typedef struct st_gw_metering_stats_t {
    uint64_t pending_records; /* counted, not yet written (sealed or open) */
    uint64_t pending_batches; /* sealed */
    uint64_t records_written; /* records of batches whose EXEC succeeded */
    uint64_t flush_failures;  /* MULTI/EXEC that failed, timed out or could not be sent */
    uint64_t spill_written;   /* records written to the spill file */
    uint64_t spill_replayed;  /* records loaded from the spill file at start */
    uint64_t spill_malformed; /* spill lines skipped at start, and records that could not be written to it */
    uint64_t records_lost;    /* at exit: neither written to Redis nor to the spill file */
    uint64_t quota_reached;   /* sandboxes an INCRBY reply showed at or past their egress_quota, published (metering/quota.h) */
} gw_metering_stats_t;

typedef struct st_gw_metering_t {
    char *prefix;      /* owned copies of the conf */
    char *instance_id; /* ... */
    gw_metering_spill_t spill;
    pthread_mutex_t mutex;
    /* under mutex */
    gw_hashtab_t open; /* not sealed yet, no seq: gw_metering_entry_t, one per (sandbox, project) */
    gw_metering_batch_t *head, *tail;
    size_t num_batches;
    int head_in_flight;
    uint64_t next_seq;
    gw_metering_stats_t stats;
    gw_activity_t *activity; /* the workers' last interval, handed over as they stop, for the final flush */
    /* metering/flusher.c's, on the flusher's thread only; NULL while none runs */
    struct st_gw_metering_flusher_t *flusher;
} gw_metering_t;

/* Copies conf, takes the spill file's lock (held until gw_metering_free:
 * one process per spill file), loads the spill file (its records go first)
 * and picks the first seq: now_ms * GW_METERING_SEQ_PER_MS, or above the
 * highest spilled seq. NULL with *err (malloc'd) when another process holds
 * the lock or the lock file cannot be opened. */
gw_metering_t *gw_metering_new(const gw_metering_conf_t *conf, uint64_t now_ms, char **err);
/* Frees everything, written or not (stop the flusher first). NULL: no-op. */
void gw_metering_free(gw_metering_t *m);

/* Moves the meter's counts into the open batch (merging with what other
 * workers handed over for the same sandbox and project); to_ms = now_ms.
 * Called by the meter's thread. */
void gw_metering_submit(gw_metering_t *m, gw_meter_t *meter, uint64_t now_ms);

/* Moves what a stopping worker's activity recorded since its last flush
 * into m, for the final flush to write (ZADD GT, best-effort). Any thread. */
void gw_metering_submit_activity(gw_metering_t *m, gw_activity_t *a);

/* Cuts the open batch into sealed batches and assigns seq values, unless
 * GW_METERING_MAX_BATCHES are already waiting (force: even then). Returns
 * the number of batches sealed. */
size_t gw_metering_seal(gw_metering_t *m, int force);

/* The oldest sealed batch, marked in flight; NULL when there is none or it
 * is already in flight. Finish it with gw_metering_batch_done. */
gw_metering_batch_t *gw_metering_next_batch(gw_metering_t *m);
/* ok: Redis took it (freed; the spill file is removed once all its replayed
 * records are written). !ok: it stays first, to be sent again as is. */
void gw_metering_batch_done(gw_metering_t *m, gw_metering_batch_t *b, int ok);
/* The writer of the batch in flight is gone (the flusher's loop stopped):
 * the batch is handed out again, same seq. */
void gw_metering_requeue_in_flight(gw_metering_t *m);

/* Seals everything and writes every pending record to the spill file
 * (metering/spill.h: records loaded from it are pending too). Returns 0, or
 * -1 with *err (malloc'd) when there is no spill file or it could not be
 * written. Pending records stay pending. */
int gw_metering_write_spill(gw_metering_t *m, char **err);

/* Adds n to records_lost. Any thread. */
void gw_metering_count_lost(gw_metering_t *m, uint64_t n);

/* Adds n to quota_reached. Any thread. */
void gw_metering_count_quota_reached(gw_metering_t *m, uint64_t n);

/* Copies the counters into *out (pending_batches counted now). Any thread. */
void gw_metering_get_stats(gw_metering_t *m, gw_metering_stats_t *out);

#endif
