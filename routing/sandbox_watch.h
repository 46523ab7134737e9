/*
 * Watching sandboxes: a table of per-sandbox entries (embedded in the
 * owner's own bucket), each with at most one record read in flight, read
 * again when a publish names the sandbox. What wake (routing/wake.c) and
 * revocation (limits/revocation.c) both keep per sandbox; what they do with
 * the record is theirs.
 */
#ifndef GW_ROUTING_SANDBOX_WATCH_H
#define GW_ROUTING_SANDBOX_WATCH_H

#include "common/hashtab.h"
#include "common/sandbox_id.h"
#include "routing/route_store.h"

typedef struct st_gw_sandbox_watch_t gw_sandbox_watch_t;
typedef struct st_gw_sandbox_watch_entry_t gw_sandbox_watch_entry_t;

typedef enum {
    /* gw_route_store_lookup: the store answers a publish during the read
     * with a fetch sent after it, so a read in flight is left as it is */
    GW_SANDBOX_WATCH_CACHED = 0,
    /* gw_route_store_lookup_fresh: a read asked for while one is in flight
     * is sent once that one is answered (the `read_again` bit), so the last
     * ask is always followed by a read sent after it */
    GW_SANDBOX_WATCH_FRESH,
} gw_sandbox_watch_mode_t;

/* The answer of `entry`'s read, `record` borrowed for the call (as
 * gw_route_cb). Always called later from the loop, never from inside
 * gw_sandbox_watch_read or gw_sandbox_watch_on_publish; exactly once per
 * read sent, unless the entry is removed first (which cancels the read).
 * When it is called the entry has no read in flight. It may remove and
 * free the entry and any other; it returns 1 when `entry` is still in the
 * table and wants the read asked for meanwhile (FRESH only), else 0 (then
 * the pending ask is dropped and the entry must not be touched). */
typedef int (*gw_sandbox_watch_cb)(gw_sandbox_watch_entry_t *entry, gw_route_status_t status, gw_sandbox_t *record);

/* Embedded in the owner's bucket (H2O_STRUCT_FROM_MEMBER gets it back). */
struct st_gw_sandbox_watch_entry_t {
    /* private */
    gw_hashtab_node_t node; /* in watch->entries, key: id */
    gw_sandbox_watch_t *watch;
    gw_route_lookup_t *read; /* the record read in flight, or NULL */
    unsigned read_again : 1; /* FRESH: a read was asked for while `read` was in flight */
    char id[GW_SANDBOX_ID_MAX + 1];
};

/* Embedded in the owner; fields private. */
struct st_gw_sandbox_watch_t {
    gw_hashtab_t entries; /* of gw_sandbox_watch_entry_t */
    gw_route_store_t *routes;
    gw_sandbox_watch_mode_t mode;
    gw_sandbox_watch_cb cb;
};

/* `routes` is borrowed; NULL: no read is sent until gw_sandbox_watch_set_routes. */
void gw_sandbox_watch_init(gw_sandbox_watch_t *w, gw_route_store_t *routes, gw_sandbox_watch_mode_t mode, gw_sandbox_watch_cb cb);
/* The table must be empty (remove every entry first). */
void gw_sandbox_watch_dispose(gw_sandbox_watch_t *w);
void gw_sandbox_watch_set_routes(gw_sandbox_watch_t *w, gw_route_store_t *routes);

/* The entry of `sandbox_id` (NUL-terminated), or NULL. */
gw_sandbox_watch_entry_t *gw_sandbox_watch_find(gw_sandbox_watch_t *w, const char *sandbox_id);
/* Zeroes `e` and puts it in the table under `sandbox_id` (its first
 * GW_SANDBOX_ID_MAX bytes, copied); no entry of that id may be there. */
void gw_sandbox_watch_add(gw_sandbox_watch_t *w, gw_sandbox_watch_entry_t *e, const char *sandbox_id);
/* Takes `e` out of the table and cancels its read (cb is not called for it
 * again); then the owner may free it. Any time, from cb too. */
void gw_sandbox_watch_remove(gw_sandbox_watch_entry_t *e);

/* Sends a read of the entry's record, unless one is in flight (FRESH: then
 * one more is sent once it is answered). */
void gw_sandbox_watch_read(gw_sandbox_watch_entry_t *e);
/* gw_sandbox_watch_read on the entry of `sandbox_id`, if there is one;
 * NULL: on every entry (a resubscription). Adds and removes none. What an
 * owner's gw_route_invalidate_cb calls. */
void gw_sandbox_watch_on_publish(gw_sandbox_watch_t *w, const char *sandbox_id);

static inline const char *gw_sandbox_watch_id(const gw_sandbox_watch_entry_t *e)
{
    return e->id;
}
/* 1 while a read of the entry is in flight. */
static inline int gw_sandbox_watch_reading(const gw_sandbox_watch_entry_t *e)
{
    return e->read != NULL;
}
/* The first entry, or the one after `e` (NULL at the end), in no order. */
gw_sandbox_watch_entry_t *gw_sandbox_watch_next(gw_sandbox_watch_t *w, gw_sandbox_watch_entry_t *e);

#endif
