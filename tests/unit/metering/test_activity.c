/*
 * metering/activity.c against a real redis-server: the latest time per
 * sandbox, ZADD GT (never backwards, whichever gateway wrote last), one
 * command per GW_ACTIVITY_MAX_PER_COMMAND members, forgotten after a flush,
 * and the bound on remembered sandboxes.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include <h2o.h>
#include "metering/activity.h"
#include "tests/unit/redis_fixture.h"

static long long score(const server_t *srv, const char *id)
{
    redisContext *c = admin_connect(srv);
    ck_assert_ptr_nonnull(c);
    redisReply *r = redisCommand(c, "ZSCORE lizard:activity %s", id);
    ck_assert_ptr_nonnull(r);
    long long v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : -1;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static gw_redis_t *connect_redis(const server_t *srv)
{
    gw_redis_conf_t conf = conf_for(srv);
    gw_redis_t *r = gw_redis_new((h2o_loop_t *)loop, &conf);
    ck_assert(wait_ready(r, 3000));
    return r;
}

START_TEST(latest_time_never_backwards)
{
    server_t srv;
    server_tcp(&srv);
    gw_redis_t *redis = connect_redis(&srv);
    gw_activity_t *a = gw_activity_new();

    gw_activity_touch(a, "sbxa", 1000);
    gw_activity_touch(a, "sbxb", 2000);
    gw_activity_touch(a, "sbxa", 1500);
    gw_activity_touch(a, "sbxa", 500); /* an older time never wins */
    ck_assert_uint_eq(gw_activity_num_pending(a), 2);
    /* another gateway wrote a newer time for sbxb */
    admin(&srv, "ZADD lizard:activity 9000 sbxb");
    ck_assert_uint_eq(gw_activity_flush(a, redis, "lizard:"), 2);
    ck_assert_uint_eq(gw_activity_num_pending(a), 0);
    run_for(200);
    ck_assert_int_eq(score(&srv, "sbxa"), 1500);
    ck_assert_int_eq(score(&srv, "sbxb"), 9000); /* GT */

    /* nothing new: nothing sent */
    ck_assert_uint_eq(gw_activity_flush(a, redis, "lizard:"), 0);
    /* the entry touched last before the flush is gone with it: touching the
     * same sandbox again makes a new one (the one-entry memo was cleared) */
    gw_activity_touch(a, "sbxa", 1600);
    ck_assert_uint_eq(gw_activity_num_pending(a), 1);
    ck_assert_uint_eq(gw_activity_flush(a, redis, "lizard:"), 1);
    gw_activity_touch(a, "sbxb", 9500);
    gw_activity_flush(a, redis, "lizard:");
    run_for(200);
    ck_assert_int_eq(score(&srv, "sbxb"), 9500);

    gw_activity_free(a);
    gw_redis_free(redis);
    server_cleanup(&srv);
}
END_TEST

START_TEST(many_sandboxes_and_the_bound)
{
    server_t srv;
    server_tcp(&srv);
    gw_redis_t *redis = connect_redis(&srv);
    gw_activity_t *a = gw_activity_new();
    char id[32];
    size_t i, n = 2 * GW_ACTIVITY_MAX_PER_COMMAND + 7;

    for (i = 0; i != n; ++i) {
        snprintf(id, sizeof(id), "s%zu", i);
        gw_activity_touch(a, id, 1000 + i);
    }
    ck_assert_uint_eq(gw_activity_flush(a, redis, "lizard:"), n);
    run_for(300);
    ck_assert_int_eq(admin(&srv, "ZCARD lizard:activity"), (long long)n);
    ck_assert_int_eq(score(&srv, "s0"), 1000);
    snprintf(id, sizeof(id), "s%zu", n - 1);
    ck_assert_int_eq(score(&srv, id), (long long)(1000 + n - 1));

    for (i = 0; i != GW_ACTIVITY_MAX_SANDBOXES + 5; ++i) {
        snprintf(id, sizeof(id), "b%zu", i);
        gw_activity_touch(a, id, 1);
    }
    ck_assert_uint_eq(gw_activity_num_pending(a), GW_ACTIVITY_MAX_SANDBOXES);
    ck_assert_uint_eq(gw_activity_dropped(a), 5);
    /* freed with entries pending: nothing leaks */
    gw_activity_free(a);
    gw_redis_free(redis);
    server_cleanup(&srv);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {latest_time_never_backwards, many_sandboxes_and_the_bound};
    return redis_fixture_main("activity", 60, NULL, NULL, tests, sizeof(tests) / sizeof(tests[0]));
}
