/*
 * A worker's last-seen times by sandbox, emptied at every flush into ZADD
 * commands (GT: a gateway that flushes late never moves another's newer
 * time backwards).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/hashtab.h"
#include "metering/activity.h"
#include "common/sandbox_id.h"

typedef struct st_seen_t {
    gw_hashtab_node_t node; /* key: id */
    uint64_t unix_ms;
    char id[GW_SANDBOX_ID_MAX + 1];
} seen_t;

struct st_gw_activity_t {
    gw_hashtab_t seen; /* of seen_t */
    seen_t *last;      /* the entry touched last, or NULL: a request's byte reports name one sandbox in a row */
    uint64_t dropped;
};

gw_activity_t *gw_activity_new(void)
{
    gw_activity_t *a = h2o_mem_alloc(sizeof(*a));

    gw_hashtab_init(&a->seen);
    a->last = NULL;
    a->dropped = 0;
    return a;
}

static void forget_all(gw_activity_t *a)
{
    a->last = NULL;
    gw_hashtab_free_all(&a->seen, offsetof(seen_t, node));
}

void gw_activity_free(gw_activity_t *a)
{
    if (a == NULL)
        return;
    forget_all(a);
    gw_hashtab_dispose(&a->seen);
    free(a);
}

void gw_activity_touch(gw_activity_t *a, const char *sandbox_id, uint64_t unix_ms)
{
    size_t len = strlen(sandbox_id);
    gw_hashtab_node_t *n;
    seen_t *e;

    if ((e = a->last) == NULL || strcmp(e->id, sandbox_id) != 0)
        e = (n = gw_hashtab_find(&a->seen, sandbox_id, len)) != NULL ? H2O_STRUCT_FROM_MEMBER(seen_t, node, n) : NULL;
    if (e != NULL) {
        if (e->unix_ms < unix_ms)
            e->unix_ms = unix_ms;
        a->last = e;
        return;
    }
    if (gw_hashtab_size(&a->seen) >= GW_ACTIVITY_MAX_SANDBOXES || len > GW_SANDBOX_ID_MAX) {
        ++a->dropped;
        return;
    }
    e = h2o_mem_alloc(sizeof(*e));
    memcpy(e->id, sandbox_id, len + 1);
    e->unix_ms = unix_ms;
    gw_hashtab_insert(&a->seen, &e->node, e->id, len);
    a->last = e;
}

static void on_zadd(void *data, const char *err, redisReply *reply)
{
    (void)data;
    (void)reply;
    if (err != NULL)
        fprintf(stderr, "activity: ZADD: %s\n", err); /* best-effort: the next flush carries newer times */
}

/* One ZADD of up to GW_ACTIVITY_MAX_PER_COMMAND members. */
typedef struct st_zadd_t {
    const char *argv[3 + 2 * GW_ACTIVITY_MAX_PER_COMMAND];
    size_t argvlen[3 + 2 * GW_ACTIVITY_MAX_PER_COMMAND];
    char scores[GW_ACTIVITY_MAX_PER_COMMAND][24];
    int argc;
} zadd_t;

static void zadd_send(zadd_t *z, gw_activity_emit_cb emit, void *arg, size_t *commands)
{
    if (z->argc > 3 && emit(arg, z->argc, z->argv, z->argvlen) == 0)
        ++*commands;
    z->argc = 3;
}

size_t gw_activity_emit(gw_activity_t *a, const char *prefix, gw_activity_emit_cb emit, void *arg)
{
    size_t sent = 0, commands = 0;
    gw_hashtab_node_t *n;
    zadd_t *z;

    if (gw_hashtab_size(&a->seen) == 0)
        return 0;
    z = h2o_mem_alloc(sizeof(*z));
    h2o_iovec_t key = h2o_concat(NULL, h2o_iovec_init(prefix, strlen(prefix)), h2o_iovec_init(H2O_STRLIT("activity")));
    z->argv[0] = "ZADD";
    z->argvlen[0] = 4;
    z->argv[1] = key.base;
    z->argvlen[1] = key.len;
    z->argv[2] = "GT";
    z->argvlen[2] = 2;
    z->argc = 3;
    /* emit formats the command before it returns: the strings need not outlive it */
    for (n = gw_hashtab_first(&a->seen); n != NULL; n = gw_hashtab_next(&a->seen, n)) {
        seen_t *e = H2O_STRUCT_FROM_MEMBER(seen_t, node, n);
        char *score = z->scores[sent % GW_ACTIVITY_MAX_PER_COMMAND];
        z->argv[z->argc] = score;
        z->argvlen[z->argc++] = (size_t)snprintf(score, sizeof(z->scores[0]), "%llu", (unsigned long long)e->unix_ms);
        z->argv[z->argc] = e->id;
        z->argvlen[z->argc++] = n->key.len;
        if (++sent % GW_ACTIVITY_MAX_PER_COMMAND == 0)
            zadd_send(z, emit, arg, &commands);
    }
    zadd_send(z, emit, arg, &commands);
    free(key.base);
    free(z);
    forget_all(a);
    return commands;
}

static int send_async(void *arg, int argc, const char **argv, const size_t *argvlen)
{
    return gw_redis_command_argv(arg, GW_ACTIVITY_TIMEOUT_MS, on_zadd, NULL, argc, argv, argvlen) != NULL ? 0 : -1;
}

size_t gw_activity_flush(gw_activity_t *a, gw_redis_t *redis, const char *prefix)
{
    size_t sandboxes = gw_hashtab_size(&a->seen);

    gw_activity_emit(a, prefix, send_async, redis);
    return sandboxes;
}

void gw_activity_merge(gw_activity_t *into, gw_activity_t *from)
{
    gw_hashtab_node_t *n;

    for (n = gw_hashtab_first(&from->seen); n != NULL; n = gw_hashtab_next(&from->seen, n)) {
        seen_t *e = H2O_STRUCT_FROM_MEMBER(seen_t, node, n);
        gw_activity_touch(into, e->id, e->unix_ms);
    }
    forget_all(from);
}

size_t gw_activity_num_pending(const gw_activity_t *a)
{
    return gw_hashtab_size(&a->seen);
}

uint64_t gw_activity_dropped(const gw_activity_t *a)
{
    return a->dropped;
}
