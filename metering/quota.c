/*
 * The flusher's egress_quota watch (metering/quota.h): a table of the
 * sandboxes reported at or past their quota, with the quota they were
 * reported at.
 */
#include <stdlib.h>
#include <string.h>
#include "common/hashtab.h"
#include "metering/commands.h"
#include "metering/quota.h"

typedef struct st_reported_t {
    gw_hashtab_node_t node; /* key: sandbox */
    uint64_t quota;         /* the quota it was reported at */
    char sandbox[GW_SANDBOX_ID_MAX + 1];
} reported_t;

struct st_gw_quota_watch_t {
    gw_hashtab_t reported;
};

gw_quota_watch_t *gw_quota_watch_new(void)
{
    gw_quota_watch_t *w = h2o_mem_alloc(sizeof(*w));

    gw_hashtab_init(&w->reported);
    return w;
}

static void forget_all(gw_quota_watch_t *w)
{
    gw_hashtab_free_all(&w->reported, offsetof(reported_t, node));
}

void gw_quota_watch_free(gw_quota_watch_t *w)
{
    if (w == NULL)
        return;
    forget_all(w);
    gw_hashtab_dispose(&w->reported);
    free(w);
}

int gw_quota_watch_check(gw_quota_watch_t *w, const char *sandbox, uint64_t quota, uint64_t total)
{
    size_t len = strlen(sandbox);
    gw_hashtab_node_t *n = gw_hashtab_find(&w->reported, sandbox, len);
    reported_t *r = n != NULL ? H2O_STRUCT_FROM_MEMBER(reported_t, node, n) : NULL;

    if (quota == 0 || total < quota) {
        if (r != NULL) {
            gw_hashtab_remove(&w->reported, n);
            free(r);
        }
        return 0;
    }
    if (r != NULL) {
        if (r->quota == quota)
            return 0;
        r->quota = quota;
        return 1;
    }
    if (len > GW_SANDBOX_ID_MAX)
        return 1; /* never a record's: reported, not remembered */
    if (gw_hashtab_size(&w->reported) >= GW_QUOTA_WATCH_MAX)
        forget_all(w);
    r = h2o_mem_alloc(sizeof(*r));
    memcpy(r->sandbox, sandbox, len + 1);
    r->quota = quota;
    gw_hashtab_insert(&w->reported, &r->node, r->sandbox, len);
    return 1;
}

size_t gw_quota_watch_exec(gw_quota_watch_t *w, const gw_metering_batch_t *b, const redisReply *exec,
                           void (*reached)(void *arg, const char *sandbox), void *arg)
{
    size_t i, at = 0, calls = 0;

    for (i = 0; i != b->num_records; ++i) {
        const gw_metering_record_t *r = b->records + i;
        const redisReply *incrby;
        /* gw_metering_emit_batch: XADD then INCRBY */
        at += 2;
        if (at > exec->elements)
            break;
        incrby = exec->element[at - 1];
        if (r->egress_quota == 0 || incrby == NULL || incrby->type != REDIS_REPLY_INTEGER || incrby->integer < 0)
            continue;
        if (gw_quota_watch_check(w, r->sandbox, r->egress_quota, (uint64_t)incrby->integer)) {
            reached(arg, r->sandbox);
            ++calls;
        }
    }
    return calls;
}
