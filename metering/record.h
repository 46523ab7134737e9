/*
 * Metering records: one sandbox's bytes over a span of wall-clock time, as
 * written to Redis and to the journal; sealed batches of them; and the
 * table of records by sandbox id that the meter and the open batch keep.
 */
#ifndef GW_METERING_RECORD_H
#define GW_METERING_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include "common/hashtab.h"
#include "common/sandbox_id.h"

/* Longer project ids are cut to this many bytes, between two UTF-8
 * characters; bytes that are not well-formed UTF-8 become '?'. */
#define GW_METERING_PROJECT_MAX 256
/* Records per MULTI/EXEC; a flush with more sandboxes is cut into batches. */
#define GW_METERING_MAX_BATCH_RECORDS 1000
/* A Redis replication id (INFO replication master_replid): 40 hex digits. */
#define GW_METERING_REPLID_MAX 40

/* One XADD: a sandbox's bytes over [from_ms, to_ms] (wall-clock ms). */
typedef struct st_gw_metering_record_t {
    char sandbox[GW_SANDBOX_ID_MAX + 1];
    char *project; /* owned; "" when unknown; always cleaned (gw_metering_project_dup) */
    char *gateway; /* owned; NULL: this instance (conf.instance_id); set for records replayed from the journal */
    uint64_t egress;
    uint64_t ingress;
    uint64_t from_ms;
    uint64_t to_ms;
    uint64_t seq; /* assigned when sealed */
    /* The sandbox's egress_quota as its route said when these bytes were
     * counted (gw_quota_merge over workers); 0: none, or 0 itself, which
     * every route read refuses on its own. Not in the journal: the
     * flusher compares it with the INCRBY reply (metering/quota.h). */
    uint64_t egress_quota;
} gw_metering_record_t;

/* Where a sealed batch stands (metering/queue.h). */
enum {
    GW_METERING_BATCH_SEALED = 0, /* not executed on any primary we know of: to be sent */
    GW_METERING_BATCH_SENDING,    /* its MULTI/EXEC is on the wire */
    GW_METERING_BATCH_EXECUTED,   /* EXEC took it; with Sentinel it waits for a replica's acknowledgement */
};

/* An EXEC's offset was not learnt (the INFO after it failed): the next INFO
 * of the same primary gives an upper bound. */
#define GW_METERING_OFFSET_UNKNOWN UINT64_MAX

/* Sealed: its records and seq values never change until Redis took it. */
typedef struct st_gw_metering_batch_t {
    struct st_gw_metering_batch_t *next;
    gw_metering_record_t *records;
    size_t num_records;
    int from_spill; /* replayed from the journal (or a spill file of an older version) */
    int state;      /* GW_METERING_BATCH_* */
    /* EXECUTED: the replication history (master_replid) that holds it and
     * the primary's master_repl_offset right after its EXEC (in that
     * history's offsets, which a promoted replica continues); a batch of a
     * spill file of an older version carries the id only (offset 0). */
    char exec_replid[GW_METERING_REPLID_MAX + 1];
    uint64_t exec_offset;
    uint64_t first_seq, last_seq; /* the lowest and highest seq of its records: its name in the journal */
    /* SEALED after an EXEC whose answer was lost (the connection died), or
     * executed on a history unrelated to the new primary's: it may be there.
     * Wall-clock ms before which it was not executed (the stream is searched
     * from there); 0: it is not there. */
    uint64_t unknown_since_ms;
    uint64_t egress;    /* the sum of its records' egress (metrics) */
    uint64_t sealed_ms; /* its records' latest to_ms: it was executed after this (wall clock) */
} gw_metering_batch_t;

/* A record in a table keyed by its sandbox id (several may share one id
 * when their projects differ). */
typedef struct st_gw_metering_entry_t {
    gw_hashtab_node_t node; /* key: rec.sandbox */
    gw_metering_record_t rec;
    uint64_t last_ms; /* meter: last route or bytes seen */
    /* open batch: the part of rec's counts already in the journal (metering/journal.h) */
    uint64_t journaled_egress, journaled_ingress;
} gw_metering_entry_t;

/* Frees the record's strings (not r itself). */
void gw_metering_record_dispose(gw_metering_record_t *r);

/* 1 when the record counts bytes either way (only those are written). */
static inline int gw_metering_record_has_bytes(const gw_metering_record_t *r)
{
    return r->egress != 0 || r->ingress != 0;
}

/* Copies a project id (len bytes, not NUL-terminated) as it can be written
 * everywhere (JSON in the journal, a Redis field): at most
 * GW_METERING_PROJECT_MAX bytes, cut between characters, each byte that is
 * not part of well-formed UTF-8 (or is NUL) replaced by '?'. out holds
 * GW_METERING_PROJECT_MAX + 1 bytes; returns the length written before its NUL. */
size_t gw_metering_project_clean(const char *s, size_t len, char *out);
/* The same, malloc'd (h2o_mem_alloc: never NULL). */
char *gw_metering_project_dup(const char *s, size_t len);

/* An empty batch with room for `capacity` records; gw_metering_batch_free
 * frees it with its records' strings. free(NULL) is a no-op. */
gw_metering_batch_t *gw_metering_batch_new(size_t capacity);
/* Sets first_seq, last_seq, egress and sealed_ms from the records (once they are in). */
void gw_metering_batch_sum(gw_metering_batch_t *b);
void gw_metering_batch_free(gw_metering_batch_t *b);

/* The entry of `id` with `project` (NULL: any project), or NULL. */
gw_metering_entry_t *gw_metering_entry_find(const gw_hashtab_t *t, const char *id, const char *project);
/* A new entry with zero counts under `id` (copied; at most
 * GW_SANDBOX_ID_MAX bytes), taking ownership of `project` (malloc'd). */
gw_metering_entry_t *gw_metering_entry_add(gw_hashtab_t *t, const char *id, char *project);
/* Unlinks and frees an entry, its strings too. */
void gw_metering_entry_remove(gw_hashtab_t *t, gw_metering_entry_t *e);
/* Removes every entry, then disposes of the table. */
void gw_metering_entries_dispose(gw_hashtab_t *t);

#define GW_METERING_ENTRY(n) H2O_STRUCT_FROM_MEMBER(gw_metering_entry_t, node, n)

#endif
