/*
 * The per-sandbox table of wake and revocation: entries by id, one record
 * read in flight each, and in FRESH mode one more read owed when a read was
 * asked for meanwhile.
 */
#include <string.h>
#include "routing/sandbox_watch.h"

void gw_sandbox_watch_init(gw_sandbox_watch_t *w, gw_route_store_t *routes, gw_sandbox_watch_mode_t mode, gw_sandbox_watch_cb cb)
{
    *w = (gw_sandbox_watch_t){.routes = routes, .mode = mode, .cb = cb};
    gw_hashtab_init(&w->entries);
}

void gw_sandbox_watch_dispose(gw_sandbox_watch_t *w)
{
    gw_hashtab_dispose(&w->entries);
}

void gw_sandbox_watch_set_routes(gw_sandbox_watch_t *w, gw_route_store_t *routes)
{
    w->routes = routes;
}

gw_sandbox_watch_entry_t *gw_sandbox_watch_find(gw_sandbox_watch_t *w, const char *sandbox_id)
{
    gw_hashtab_node_t *n = gw_hashtab_find(&w->entries, sandbox_id, strlen(sandbox_id));
    return n != NULL ? H2O_STRUCT_FROM_MEMBER(gw_sandbox_watch_entry_t, node, n) : NULL;
}

gw_sandbox_watch_entry_t *gw_sandbox_watch_next(gw_sandbox_watch_t *w, gw_sandbox_watch_entry_t *e)
{
    gw_hashtab_node_t *n = e == NULL ? gw_hashtab_first(&w->entries) : gw_hashtab_next(&w->entries, &e->node);
    return n != NULL ? H2O_STRUCT_FROM_MEMBER(gw_sandbox_watch_entry_t, node, n) : NULL;
}

void gw_sandbox_watch_add(gw_sandbox_watch_t *w, gw_sandbox_watch_entry_t *e, const char *sandbox_id)
{
    size_t len = strnlen(sandbox_id, GW_SANDBOX_ID_MAX);

    memset(e, 0, sizeof(*e));
    e->watch = w;
    memcpy(e->id, sandbox_id, len); /* zeroed: NUL-terminated */
    gw_hashtab_insert(&w->entries, &e->node, e->id, len);
}

void gw_sandbox_watch_remove(gw_sandbox_watch_entry_t *e)
{
    gw_hashtab_remove(&e->watch->entries, &e->node);
    if (e->read != NULL)
        gw_route_lookup_cancel(e->read);
    e->read = NULL;
    e->read_again = 0;
}

static void on_read(void *data, gw_route_status_t status, gw_sandbox_t *record)
{
    gw_sandbox_watch_entry_t *e = data;
    int again = e->read_again;

    e->read = NULL;
    e->read_again = 0;
    /* from here on cb owns e's fate: it may be freed */
    if (e->watch->cb(e, status, record) && again)
        gw_sandbox_watch_read(e);
}

void gw_sandbox_watch_read(gw_sandbox_watch_entry_t *e)
{
    gw_sandbox_watch_t *w = e->watch;

    if (w->routes == NULL)
        return;
    if (e->read != NULL) {
        /* CACHED: the read in flight is answered after the publish that brought us here */
        if (w->mode == GW_SANDBOX_WATCH_FRESH)
            e->read_again = 1;
        return;
    }
    e->read = w->mode == GW_SANDBOX_WATCH_FRESH ? gw_route_store_lookup_fresh(w->routes, e->id, on_read, e)
                                                : gw_route_store_lookup(w->routes, e->id, on_read, e);
}

void gw_sandbox_watch_on_publish(gw_sandbox_watch_t *w, const char *sandbox_id)
{
    gw_sandbox_watch_entry_t *e;

    if (sandbox_id != NULL) {
        if ((e = gw_sandbox_watch_find(w, sandbox_id)) != NULL)
            gw_sandbox_watch_read(e);
        return;
    }
    /* reads are answered through the loop, never now: the table stays as it is during the walk */
    for (e = gw_sandbox_watch_next(w, NULL); e != NULL; e = gw_sandbox_watch_next(w, e))
        gw_sandbox_watch_read(e);
}
