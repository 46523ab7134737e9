/*
 * The spill file: the records Redis did not take by exit, one JSON object
 * per line, replayed first at the next start. A lock file next to it
 * ("<path>.lock", flock) keeps a second process off the same path.
 */
#ifndef GW_METERING_SPILL_H
#define GW_METERING_SPILL_H

#include <stddef.h>
#include <stdint.h>
#include "metering/record.h"

/* Longer spill lines are reported as malformed and skipped. */
#define GW_METERING_SPILL_LINE_MAX 4096

typedef struct st_gw_metering_spill_t {
    char *path;          /* owned; NULL: no spill file */
    int lock_fd;         /* holds the flock on "<path>.lock" until gw_metering_spill_close; -1: none */
    int unreadable;      /* the file exists but could not be read: only ever append to it */
    int malformed_lines; /* the file has lines that were skipped: set it aside, never delete it */
    size_t batches;      /* loaded batches not yet written to Redis (the caller counts them down) */
} gw_metering_spill_t;

/* Copies `path` (NULL: no spill file; then nothing else happens) and takes
 * an exclusive lock on "<path>.lock", writing "instance <instance_id>" into
 * it for gw_metering_check_spill. Returns 0, or -1 with *err (malloc'd) when
 * another process holds the lock or the lock file cannot be opened; then
 * close s all the same. */
int gw_metering_spill_open(gw_metering_spill_t *s, const char *path, const char *instance_id, char **err);
/* Releases the lock (the lock file stays, or a newcomer could lock a
 * removed one) and frees the path. */
void gw_metering_spill_close(gw_metering_spill_t *s);

/* For --check: -1 with *err (malloc'd) when a running gateway of another
 * instance than `instance_id` holds the lock of `spill_file` (two gateways
 * must not share one); 0 otherwise: no lock file, nobody holds it, or the
 * holder is this instance (its config checked again while it runs).
 * Creates nothing. */
int gw_metering_check_spill(const char *spill_file, const char *instance_id, char **err);

/* Reads the file a previous run left into sealed batches (from_spill, linked
 * through next; the caller owns them), counted in s->batches. Records keep
 * their seq and gateway. Malformed lines are reported on stderr, counted in
 * *malformed and skipped; an empty or wholly malformed file is removed or
 * set aside ("<path>.malformed-<unix time>"). *loaded: records read;
 * *max_seq: their highest seq (0: none). NULL: nothing to replay. */
gw_metering_batch_t *gw_metering_spill_load(gw_metering_spill_t *s, size_t *loaded, size_t *malformed, uint64_t *max_seq);

/* Writes the records of the batches from `head` on (records without a
 * gateway get `instance_id`), replacing the file through
 * "<path>.tmp.<pid>" and fsync'd; a file that could not be read is appended
 * to instead. A record that cannot be encoded is reported and skipped.
 * Returns 0 with *written and *skipped, or -1 with *err (malloc'd). */
int gw_metering_spill_write(gw_metering_spill_t *s, const gw_metering_batch_t *head, const char *instance_id, size_t *written,
                            size_t *skipped, char **err);

/* Every record loaded from the file is in Redis now: removes the file, or
 * sets it aside when it had malformed lines (for a person to look at). */
void gw_metering_spill_replayed(gw_metering_spill_t *s);

/* Parses one spill line (len bytes, without its newline). Returns 0, or -1
 * with *err (static) saying what is wrong; out's strings are owned by the
 * caller (gw_metering_record_dispose). */
int gw_metering_parse_spill_line(const char *line, size_t len, gw_metering_record_t *out, const char **err);

#endif
