/*
 * Open exchanges and tunnels by sandbox, and what happens to them after a
 * publish: one bucket per sandbox with something open, holding the items and
 * at most one record read in flight. A publish during that read needs no
 * read more: the route store answers it with a fetch sent after the publish
 * (routing/route_store.h), so the last publish is always followed by a read
 * that postdates it, within one round trip.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "auth/token.h"
#include "common/recycle.h"
#include "limits/revocation.h"
#include "routing/sandbox_watch.h"

typedef struct st_gw_revocation_bucket_t {
    gw_sandbox_watch_entry_t entry; /* in owner->watch: the id and the record read in flight */
    gw_revocation_t *owner;
    h2o_linklist_t items; /* gw_revocable_t.link */
    size_t count;
    unsigned checking : 1; /* inside gw_revocation_check: not freed by remove */
} bucket_t;

struct st_gw_revocation_t {
    h2o_loop_t *loop;
    gw_sandbox_watch_t watch;      /* of bucket_t, CACHED reads (see above) */
    gw_recycle_t bucket_allocator; /* of bucket_t: a sandbox with one exchange at a time gets one per request */
};

int gw_grant_recheck(const gw_grant_t *grant, const gw_sandbox_t *now_record, uint64_t now_unix)
{
    const gw_sandbox_t *then = grant->record;

    if (now_record == NULL)
        return GW_ERR_SANDBOX_NOT_FOUND;
    /* in the order a new request meets them (docs/request-path.md, "What a request goes through") */
    switch (gw_sandbox_port_access(now_record, grant->port)) {
    case GW_PORT_PUBLIC:
        break;
    case GW_PORT_PRIVATE:
        switch (grant->kind) {
        case GW_GRANT_PUBLIC:
            return GW_ERR_MISSING_TOKEN;
        case GW_GRANT_PREFLIGHT:
            break;
        case GW_GRANT_COOKIE:
        case GW_GRANT_TOKEN:
            /* a credential that matched the old hash matches the new one only if the hash is the same (the
             * cookie binds the hash too) */
            if (!then->has_token || !now_record->has_token ||
                !gw_token_equal(then->token_sha256, now_record->token_sha256, sizeof(then->token_sha256)))
                return GW_ERR_INVALID_TOKEN;
            if (grant->kind == GW_GRANT_COOKIE && now_unix >= grant->expires_at)
                return GW_ERR_INVALID_TOKEN;
            break;
        case GW_GRANT_LINK:
            /* a link does not depend on the access token: the control plane revokes links with link_epoch */
            if (!now_record->link_epoch_ok || now_record->link_epoch != grant->link_epoch || now_unix >= grant->expires_at)
                return GW_ERR_INVALID_TOKEN;
            if (grant->view_only && !gw_sandbox_port_is_rfb(now_record, grant->port))
                return GW_ERR_INVALID_TOKEN;
            break;
        }
        break;
    default:
        return GW_ERR_PORT_NOT_EXPOSED;
    }
    if (now_record->state != GW_SANDBOX_RUNNING)
        return GW_ERR_SANDBOX_NOT_RUNNING;
    if (then->lifecycle.len != now_record->lifecycle.len ||
        memcmp(then->lifecycle.base, now_record->lifecycle.base, then->lifecycle.len) != 0)
        return GW_ERR_SANDBOX_NOT_RUNNING;
    return -1;
}

/* the table */

static bucket_t *find(gw_revocation_t *r, const char *id)
{
    gw_sandbox_watch_entry_t *e = gw_sandbox_watch_find(&r->watch, id);
    return e != NULL ? H2O_STRUCT_FROM_MEMBER(bucket_t, entry, e) : NULL;
}

static void bucket_free(gw_revocation_t *r, bucket_t *b)
{
    gw_sandbox_watch_remove(&b->entry);
    gw_recycle_free(&r->bucket_allocator, b);
}

static void check_bucket(gw_revocation_t *r, bucket_t *b, const gw_sandbox_t *record, uint64_t now_unix);

/* gw_sandbox_watch_cb; CACHED reads owe no read again: 0 */
static int on_record(gw_sandbox_watch_entry_t *entry, gw_route_status_t status, gw_sandbox_t *record)
{
    bucket_t *b = H2O_STRUCT_FROM_MEMBER(bucket_t, entry, entry);
    gw_revocation_t *r = b->owner;

    switch (status) {
    case GW_ROUTE_FOUND:
        check_bucket(r, b, record, (uint64_t)time(NULL));
        break;
    case GW_ROUTE_NOT_FOUND:
        check_bucket(r, b, NULL, (uint64_t)time(NULL));
        break;
    default:
        /* Redis cannot tell now: what is open stays open, as cached routes keep serving */
        if (b->count == 0)
            bucket_free(r, b);
        break;
    }
    return 0;
}

gw_revocation_t *gw_revocation_new(h2o_loop_t *loop, gw_route_store_t *routes)
{
    gw_revocation_t *r = h2o_mem_alloc(sizeof(*r));

    memset(r, 0, sizeof(*r));
    gw_sandbox_watch_init(&r->watch, routes, GW_SANDBOX_WATCH_CACHED, on_record);
    r->bucket_allocator.max = GW_RECYCLE_MAX;
    r->loop = loop;
    return r;
}

void gw_revocation_set_routes(gw_revocation_t *r, gw_route_store_t *routes)
{
    gw_sandbox_watch_set_routes(&r->watch, routes);
}

void gw_revocation_free(gw_revocation_t *r)
{
    gw_sandbox_watch_entry_t *e;

    if (r == NULL)
        return;
    while ((e = gw_sandbox_watch_next(&r->watch, NULL)) != NULL) {
        bucket_t *b = H2O_STRUCT_FROM_MEMBER(bucket_t, entry, e);
        /* items outlive the registry only at process exit: detach them */
        while (!h2o_linklist_is_empty(&b->items)) {
            gw_revocable_t *item = H2O_STRUCT_FROM_MEMBER(gw_revocable_t, link, b->items.next);
            h2o_linklist_unlink(&item->link);
            item->bucket = NULL;
        }
        bucket_free(r, b);
    }
    gw_sandbox_watch_dispose(&r->watch);
    gw_recycle_clear(&r->bucket_allocator);
    free(r);
}

void gw_revocation_add(gw_revocation_t *r, gw_revocable_t *item)
{
    const char *id = item->grant.record->id;
    bucket_t *b = find(r, id);

    if (b == NULL) {
        b = gw_recycle_alloc(&r->bucket_allocator, sizeof(*b));
        b->owner = r;
        h2o_linklist_init_anchor(&b->items);
        b->count = 0;
        b->checking = 0;
        gw_sandbox_watch_add(&r->watch, &b->entry, id); /* zeroes the entry */
    }
    h2o_linklist_insert(&b->items, &item->link);
    ++b->count;
    item->bucket = b;
}

void gw_revocation_remove(gw_revocation_t *r, gw_revocable_t *item)
{
    bucket_t *b = item->bucket;

    if (h2o_linklist_is_linked(&item->link))
        h2o_linklist_unlink(&item->link);
    if (b == NULL)
        return;
    item->bucket = NULL;
    if (--b->count == 0 && !b->checking)
        bucket_free(r, b);
}

size_t gw_revocation_count(gw_revocation_t *r, const char *sandbox_id)
{
    bucket_t *b = find(r, sandbox_id);
    return b != NULL ? b->count : 0;
}

static void check_bucket(gw_revocation_t *r, bucket_t *b, const gw_sandbox_t *record, uint64_t now_unix)
{
    h2o_linklist_t doomed, *pos, *next;
    int code;

    /* Refused items leave the bucket first: a revoke callback closes one
     * exchange or tunnel, which may end others (an HTTP/2 connection). */
    h2o_linklist_init_anchor(&doomed);
    for (pos = b->items.next; pos != &b->items; pos = next) {
        gw_revocable_t *item = H2O_STRUCT_FROM_MEMBER(gw_revocable_t, link, pos);
        next = pos->next;
        if (gw_grant_recheck(&item->grant, record, now_unix) == -1)
            continue;
        h2o_linklist_unlink(&item->link);
        h2o_linklist_insert(&doomed, &item->link);
        item->bucket = NULL;
        --b->count;
    }
    b->checking = 1;
    while (!h2o_linklist_is_empty(&doomed)) {
        gw_revocable_t *item = H2O_STRUCT_FROM_MEMBER(gw_revocable_t, link, doomed.next);
        h2o_linklist_unlink(&item->link);
        code = gw_grant_recheck(&item->grant, record, now_unix);
        item->on_revoke(item, (gw_error_code_t)code);
    }
    b->checking = 0;
    if (b->count == 0 && !gw_sandbox_watch_reading(&b->entry))
        bucket_free(r, b);
}

void gw_revocation_check(gw_revocation_t *r, const char *sandbox_id, const gw_sandbox_t *record, uint64_t now_unix)
{
    bucket_t *b = find(r, sandbox_id);

    if (b != NULL)
        check_bucket(r, b, record, now_unix);
}

void gw_revocation_on_publish(void *_r, const char *sandbox_id)
{
    gw_revocation_t *r = _r;

    gw_sandbox_watch_on_publish(&r->watch, sandbox_id);
}
