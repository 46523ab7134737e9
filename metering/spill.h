/*
 * The journal's file (metering.spill_file) outside its format: the lock
 * file next to it ("<path>.lock", flock) that keeps a second process off
 * the same path, the records of its entries (JSON objects, also the lines
 * of a spill file of version 1), and setting a file aside for a person.
 */
#ifndef GW_METERING_SPILL_H
#define GW_METERING_SPILL_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "metering/record.h"

typedef struct st_gw_metering_spill_t {
    char *path;  /* owned; NULL: no journal */
    int lock_fd; /* holds the flock on "<path>.lock" until gw_metering_spill_close; -1: none */
} gw_metering_spill_t;

/* Copies `path` (NULL: no journal; then nothing else happens) and takes
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

/* Reads a record from a JSON object: sealed (a "rec" entry, a version 1
 * spill line: gateway and seq required) or not (an "open" entry: neither).
 * executed_on (GW_METERING_REPLID_MAX + 1 bytes, or NULL) gets a version 1
 * line's "executed_on" ("" when none). Returns 0, or -1 with *err (static)
 * saying what is wrong; out's strings are the caller's
 * (gw_metering_record_dispose). */
int gw_metering_record_from_json(json_t *obj, int sealed, gw_metering_record_t *out, char *executed_on, const char **err);

/* The same from one spill line of version 1 (len bytes, without its newline). */
int gw_metering_parse_spill_line(const char *line, size_t len, gw_metering_record_t *out, char *executed_on, const char **err);

/* Renames `path` to "<path>.<why>-<unix time>" and says so on stderr.
 * Returns the new name (malloc'd), or NULL when there was no file or the
 * rename failed (said too, unless there was no file). */
char *gw_metering_spill_set_aside(const char *path, const char *why);

#endif
