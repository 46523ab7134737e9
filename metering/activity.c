/*
 * A worker's last-seen times by sandbox, emptied at every flush into ZADD
 * commands (GT: a gateway that flushes late never moves another's newer
 * time backwards).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "khash.h"
#include "metering/activity.h"
#include "routing/host.h"

KHASH_MAP_INIT_STR(gw_activity_seen, uint64_t)

struct st_gw_activity_t {
    khash_t(gw_activity_seen) * seen; /* keys owned */
    uint64_t dropped;
};

gw_activity_t *gw_activity_new(void)
{
    gw_activity_t *a = h2o_mem_alloc(sizeof(*a));

    a->seen = kh_init(gw_activity_seen);
    a->dropped = 0;
    return a;
}

static void forget_all(gw_activity_t *a)
{
    const char *key;
    uint64_t v;

    kh_foreach(a->seen, key, v, {
        (void)v;
        free((char *)key);
    });
    kh_clear(gw_activity_seen, a->seen);
}

void gw_activity_free(gw_activity_t *a)
{
    if (a == NULL)
        return;
    forget_all(a);
    kh_destroy(gw_activity_seen, a->seen);
    free(a);
}

void gw_activity_touch(gw_activity_t *a, const char *sandbox_id, uint64_t unix_ms)
{
    khiter_t it = kh_get(gw_activity_seen, a->seen, sandbox_id);
    int ret;

    if (it == kh_end(a->seen)) {
        if (kh_size(a->seen) >= GW_ACTIVITY_MAX_SANDBOXES) {
            ++a->dropped;
            return;
        }
        it = kh_put(gw_activity_seen, a->seen, h2o_strdup(NULL, sandbox_id, SIZE_MAX).base, &ret);
        kh_val(a->seen, it) = unix_ms;
    } else if (kh_val(a->seen, it) < unix_ms) {
        kh_val(a->seen, it) = unix_ms;
    }
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

static void zadd_send(zadd_t *z, gw_redis_t *redis)
{
    if (z->argc > 3)
        gw_redis_command_argv(redis, GW_ACTIVITY_TIMEOUT_MS, on_zadd, NULL, z->argc, z->argv, z->argvlen);
    z->argc = 3;
}

size_t gw_activity_flush(gw_activity_t *a, gw_redis_t *redis, const char *prefix)
{
    size_t n = kh_size(a->seen), sent = 0;
    zadd_t *z;
    const char *id;
    uint64_t ms;

    if (n == 0)
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
    /* hiredis formats the command before gw_redis_command_argv returns: the strings need not outlive it */
    kh_foreach(a->seen, id, ms, {
        int len = snprintf(z->scores[sent % GW_ACTIVITY_MAX_PER_COMMAND], 24, "%llu", (unsigned long long)ms);
        z->argv[z->argc] = z->scores[sent % GW_ACTIVITY_MAX_PER_COMMAND];
        z->argvlen[z->argc++] = (size_t)len;
        z->argv[z->argc] = id;
        z->argvlen[z->argc++] = strlen(id);
        if (++sent % GW_ACTIVITY_MAX_PER_COMMAND == 0)
            zadd_send(z, redis);
    });
    zadd_send(z, redis);
    free(key.base);
    free(z);
    forget_all(a);
    return sent;
}

size_t gw_activity_num_pending(const gw_activity_t *a)
{
    return kh_size(a->seen);
}

uint64_t gw_activity_dropped(const gw_activity_t *a)
{
    return a->dropped;
}
