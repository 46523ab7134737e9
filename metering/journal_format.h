/*
 * The journal's file format (version 2), written by metering/journal.c and
 * read back at start: a header line, then one entry per line, each
 * "<crc32 of the JSON, 8 hex digits> <JSON object>\n". Entries, by "t":
 *   batch  a sealed batch follows (first, last seq, records): everything
 *          unsealed before it went into it
 *   rec    one record of that batch (the spill file's fields)
 *   open   counts not sealed yet, added to what came before
 *   exec   the batch (first, last) was executed at (replid, offset)
 *   done   the batch (first, last) is written: it leaves the journal
 * A spill file of version 1 (JSON lines of records, no header) is read too.
 */
#ifndef GW_METERING_JOURNAL_FORMAT_H
#define GW_METERING_JOURNAL_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include "common/hashtab.h"
#include "metering/record.h"

#define GW_JOURNAL_VERSION 2
#define GW_JOURNAL_MAGIC "lizard-gateway metering journal "
/* Longer entries are reported as malformed and skipped. */
#define GW_JOURNAL_LINE_MAX 4096

/* Text that grows by appends; its owner bounds what goes in. */
typedef struct st_gw_jbuf_t {
    char *base;
    size_t len, cap;
} gw_jbuf_t;

void gw_jbuf_append(gw_jbuf_t *b, const char *s, size_t len);
void gw_jbuf_dispose(gw_jbuf_t *b);

/* Each appends one entry (or, for a batch, its entries) to out. Records
 * without a gateway get `instance_id`. */
void gw_journal_put_header(gw_jbuf_t *out);
void gw_journal_put_batch(gw_jbuf_t *out, const gw_metering_batch_t *b, const char *instance_id); /* exec too when EXECUTED */
void gw_journal_put_exec(gw_jbuf_t *out, const gw_metering_batch_t *b);
void gw_journal_put_done(gw_jbuf_t *out, const gw_metering_batch_t *b);
/* An open entry: r's sandbox, project and span with these counts. */
void gw_journal_put_open(gw_jbuf_t *out, const gw_metering_record_t *r, uint64_t egress, uint64_t ingress);

/* What a journal (or a spill file) holds. */
typedef struct st_gw_journal_replay_t {
    gw_metering_batch_t *head; /* sealed batches in seq order (through next; from_spill); EXECUTED when named by an exec */
    gw_hashtab_t open;         /* gw_metering_entry_t: counts not sealed yet, journaled_* set to them */
    size_t records;            /* records in head's batches */
    size_t malformed;          /* entries reported and skipped */
    uint64_t max_seq;          /* the highest seq seen (0: none) */
    int version;               /* 1 or 2; 0: empty */
} gw_journal_replay_t;

/* Reports one entry skipped: its line number (from 1) and why. */
typedef void (*gw_journal_report_cb)(void *arg, size_t lineno, const char *why);

/* Reads a whole file's text (len bytes, any bytes) into *out (initialised
 * here; dispose it in any case). Each malformed entry is reported and
 * skipped: the rest replays. Returns 0, or -1 with *err (static) when the
 * file was written by a later version (then *out holds nothing). */
int gw_journal_parse(const char *text, size_t len, gw_journal_replay_t *out, gw_journal_report_cb report, void *arg,
                     const char **err);
void gw_journal_replay_dispose(gw_journal_replay_t *r);

#endif
