/*
 * Metering: the bytes each sandbox moved, written to Redis for billing as
 * XADD <prefix>egress + INCRBY <prefix>egress:{<id>}, one MULTI/EXEC per
 * batch. Workers count into their own gw_meter_t without a lock; every
 * flush interval they hand their counts to the process-wide gw_metering_t,
 * whose flusher (on worker 0's loop) sends sealed batches one at a time in
 * seq order, retries a failed one unchanged (same seq values), and at exit
 * writes what Redis did not take to the spill file replayed on next start.
 */
#ifndef GW_GATEWAY_METERING_H
#define GW_GATEWAY_METERING_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include "routing/host.h"
#include "common/netaddr.h"
#include "common/redis.h"

/* Sandboxes one worker's meter remembers (with their project). Beyond it the
 * idle ones seen longest ago are forgotten; counts not yet handed over are
 * never dropped. */
#define GW_METER_MAX_SANDBOXES 100000
/* Sealed batches waiting for Redis. At the cap nothing more is sealed: new
 * counts merge into the open (unsealed) batch, one record per sandbox, so
 * an outage of any length holds this many batches (a few more when one
 * flush needs several, and the spill file's) plus one record per sandbox
 * that had traffic. Merging into a sealed batch instead would
 * change records whose seq may already be in Redis (a timed-out EXEC), and
 * a consumer dropping duplicates by seq would then lose the added bytes. */
#define GW_METERING_MAX_BATCHES 16
/* Records per MULTI/EXEC; a flush with more sandboxes is cut into batches. */
#define GW_METERING_MAX_BATCH_RECORDS 1000
/* Longer project ids are cut to this many bytes, between two UTF-8
 * characters; bytes that are not well-formed UTF-8 become '?'. */
#define GW_METERING_PROJECT_MAX 256
/* Deadline of one MULTI/EXEC on the event loop. */
#define GW_METERING_EXEC_TIMEOUT_MS 5000
/* With replicas, a batch counts as written once WAIT 1 <this> after its
 * EXEC reports a replica that has it; otherwise it is waited for again, or
 * sent again (same seq) to the next primary if this one goes away. */
#define GW_METERING_WAIT_MS 1000
/* Longer spill lines are reported as malformed and skipped. */
#define GW_METERING_SPILL_LINE_MAX 4096
/* seq of the first record of a run is (wall-clock ms at start) * this; each
 * record takes the next value. */
#define GW_METERING_SEQ_PER_MS 1000

typedef struct st_gw_meter_t gw_meter_t;
typedef struct st_gw_metering_t gw_metering_t;

/* One XADD: a sandbox's bytes over [from_ms, to_ms] (wall-clock ms). */
typedef struct st_gw_metering_record_t {
    char sandbox[GW_SANDBOX_ID_MAX + 1];
    char *project; /* owned; "" when unknown */
    char *gateway; /* owned; NULL: this instance (conf.instance_id); set for records replayed from a spill file */
    uint64_t egress;
    uint64_t ingress;
    uint64_t from_ms;
    uint64_t to_ms;
    uint64_t seq; /* assigned when sealed */
} gw_metering_record_t;

/* Sealed: its records and seq values never change until Redis took it. */
typedef struct st_gw_metering_batch_t {
    struct st_gw_metering_batch_t *next;
    gw_metering_record_t *records;
    size_t num_records;
    int from_spill; /* replayed from the spill file */
} gw_metering_batch_t;

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
} gw_metering_stats_t;

/* --- per worker, no lock: only the owning thread touches a meter ---------- */

/* NULL only on OOM. */
gw_meter_t *gw_meter_new(void);
/* NULL is a no-op. Counts not handed over are lost: submit first. */
void gw_meter_free(gw_meter_t *m);

/* Remembers the project of a sandbox (from its route), used by every
 * record of it from now on. `project` is copied. */
void gw_meter_set_project(gw_meter_t *m, const char *sandbox_id, h2o_iovec_t project, uint64_t now_ms);

/* Adds bytes moved for a sandbox at now_ms. A sandbox whose project was
 * never set (or forgotten) is counted with project "". */
void gw_meter_add(gw_meter_t *m, const char *sandbox_id, uint64_t egress, uint64_t ingress, uint64_t now_ms);

/* Sandboxes remembered (tests). */
size_t gw_meter_num_sandboxes(const gw_meter_t *m);

/* --- process-wide (thread-safe) ------------------------------------------- */

/* Copies conf, takes an exclusive lock on "<spill_file>.lock" (flock, held
 * until gw_metering_free: one process per spill file), loads the spill file
 * (its records keep their seq and gateway and go first; malformed lines are
 * reported on stderr and skipped, and the file is then kept as
 * "<spill_file>.malformed-<unix time>" instead of being removed) and picks
 * the first seq: now_ms * GW_METERING_SEQ_PER_MS, or above the highest
 * spilled seq. NULL with *err (malloc'd) when another process holds the
 * lock, the lock file cannot be opened, or on OOM. */
gw_metering_t *gw_metering_new(const gw_metering_conf_t *conf, uint64_t now_ms, char **err);
/* For --check: -1 with *err (malloc'd) when a running gateway of another
 * instance than `instance_id` holds the lock of `spill_file` (two gateways
 * must not share one); 0 otherwise: no lock file, nobody holds it, or the
 * holder is this instance (its config checked again while it runs).
 * Creates nothing. */
int gw_metering_check_spill(const char *spill_file, const char *instance_id, char **err);
/* Frees everything, written or not (stop the flusher first). NULL: no-op. */
void gw_metering_free(gw_metering_t *m);

/* Moves the meter's counts into the open batch (merging with what other
 * workers handed over for the same sandbox and project); to_ms = now_ms.
 * Called by the meter's thread. */
void gw_metering_submit(gw_metering_t *m, gw_meter_t *meter, uint64_t now_ms);

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

/* The flusher, on the calling thread's loop (worker 0) with a Redis
 * connection of its own (conf is copied), so that a large MULTI/EXEC never
 * delays route lookups. Returns 0 or -1 (OOM). */
int gw_metering_start_flusher(gw_metering_t *m, h2o_loop_t *loop, const gw_redis_conf_t *conf);
/* Seals and sends the next batch if none is in flight. From the flusher's loop. */
void gw_metering_flush(gw_metering_t *m);
/* 1 while a MULTI/EXEC of the flusher awaits its answer. From the flusher's thread. */
int gw_metering_in_flight(const gw_metering_t *m);
/* Closes the flusher's connection (a batch in flight stays pending). From
 * the flusher's thread, after its loop stopped. */
void gw_metering_stop_flusher(gw_metering_t *m);

/* At exit, with no loop running: seals everything and writes it to Redis
 * with a blocking connection (to conf->addr, or to the primary the
 * sentinels name), all within timeout_ms; a batch counts as written as in
 * the flusher (EXEC, and WAIT when the primary has replicas); what could not
 * be written goes to the spill file. Returns 0 when everything was written
 * or spilled, -1 when records were lost (reported on stderr). */
int gw_metering_final_flush(gw_metering_t *m, const gw_redis_conf_t *conf, uint64_t timeout_ms);

/* Writes every pending record to the spill file (replacing it through
 * "<spill_file>.tmp.<pid>": records loaded from it are pending too), one
 * JSON object per line, fsync'd. A record that cannot be encoded is reported
 * and skipped (stats.spill_malformed), the others are written. Returns 0,
 * or -1 with *err (malloc'd) when the file could not be written. Pending
 * records stay pending. */
int gw_metering_write_spill(gw_metering_t *m, char **err);

/* Parses one spill line (without its newline). Returns 0, or -1 with *err
 * (static) saying what is wrong; out's strings are owned by the caller. */
int gw_metering_parse_spill_line(const char *line, size_t len, gw_metering_record_t *out, const char **err);

void gw_metering_get_stats(gw_metering_t *m, gw_metering_stats_t *out);

#endif
