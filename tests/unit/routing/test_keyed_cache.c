/*
 * routing/keyed_cache.c on its own, with a value type of the test's (a
 * counted string read from a hash's "v" field) against a real redis-server:
 * the callback contract (later, exactly once, within the deadline), single
 * flight, negative entries, a publish that removes or revokes (keep_revoked
 * and on_fetched), a flush, the key bound, the size bound, and that every
 * reference the cache took is given back.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include <h2o.h>
#include "common/redis.h"
#include "routing/keyed_cache.h"
#include "tests/unit/redis_fixture.h"

#define WAIT_MS 10000 /* bounds waits for what must happen (a loaded machine, sanitizers) */

typedef struct {
    int refs;
    char v[32];
} value_t;

static int live_values; /* value_t not yet freed */

typedef struct {
    gw_redis_t *redis;
    gw_keyed_cache_t *cache;
    gw_keyed_cache_counters_t counters;
    int listening;
    int fetched_calls;
    char fetched_before[32], fetched_after[32]; /* "-": NULL */
} fixture_t;

static int parse(void *ctx, const char *key, const redisReply *reply, void **value)
{
    (void)ctx;
    (void)key;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY)
        return -1;
    *value = NULL;
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        if (strcmp(reply->element[i]->str, "v") == 0) {
            value_t *v = calloc(1, sizeof(*v));
            v->refs = 1;
            snprintf(v->v, sizeof(v->v), "%s", reply->element[i + 1]->str);
            ++live_values;
            *value = v;
        }
    }
    return 0;
}

static void retain(void *value)
{
    ++((value_t *)value)->refs;
}

static void release(void *value)
{
    value_t *v = value;
    if (--v->refs == 0) {
        --live_values;
        free(v);
    }
}

static int listening(void *ctx)
{
    return ((fixture_t *)ctx)->listening;
}

static void on_fetched(void *ctx, const char *key, void *before, void *after)
{
    fixture_t *f = ctx;
    (void)key;
    ++f->fetched_calls;
    snprintf(f->fetched_before, sizeof(f->fetched_before), "%s", before != NULL ? ((value_t *)before)->v : "-");
    snprintf(f->fetched_after, sizeof(f->fetched_after), "%s", after != NULL ? ((value_t *)after)->v : "-");
}

typedef struct {
    int called;
    gw_keyed_status_t status;
    char v[32];
} result_t;

typedef void (*test_cb)(result_t *res, gw_keyed_status_t status, const value_t *value);

static void on_answer(result_t *res, gw_keyed_status_t status, const value_t *value)
{
    ++res->called;
    res->status = status;
    if (status == GW_KEYED_FOUND) {
        ck_assert_ptr_nonnull(value);
        ck_assert_int_gt(value->refs, 0);
        snprintf(res->v, sizeof(res->v), "%s", value->v);
    } else {
        ck_assert_ptr_null(value);
    }
}

static void answer(gw_keyed_fn cb, void *data, gw_keyed_status_t status, void *value)
{
    ((test_cb)cb)(data, status, value);
}

static void fixture_init(fixture_t *f, const server_t *srv, gw_keyed_cache_conf_t conf)
{
    memset(f, 0, sizeof(*f));
    gw_redis_conf_t rconf = conf_for(srv);
    rconf.reconnect_max_ms = 100;
    f->redis = gw_redis_new((h2o_loop_t *)loop, &rconf);
    f->listening = 1;
    conf.kind = "t"; /* keys t:{<key>} */
    if (conf.key_max == 0)
        conf.key_max = 16;
    if (conf.max_entries == 0)
        conf.max_entries = 1000;
    if (conf.lookup_timeout_ms == 0)
        conf.lookup_timeout_ms = 2000;
    conf.counters = &f->counters;
    conf.ctx = f;
    conf.parse = parse;
    conf.retain = retain;
    conf.release = release;
    conf.listening = listening;
    conf.answer = answer;
    conf.on_fetched = on_fetched;
    f->cache = gw_keyed_cache_new((h2o_loop_t *)loop, f->redis, &conf);
    gw_keyed_cache_set_caching(f->cache, 1);
    ck_assert(wait_ready(f->redis, WAIT_MS));
}

static void fixture_dispose(fixture_t *f)
{
    gw_keyed_cache_free(f->cache);
    gw_redis_free(f->redis);
    ck_assert_int_eq(live_values, 0); /* every reference given back */
}

static gw_keyed_lookup_t *start(fixture_t *f, const char *key, int fresh, result_t *res)
{
    return gw_keyed_cache_lookup(f->cache, key, strlen(key), fresh, (gw_keyed_fn)on_answer, res);
}

static result_t lookup(fixture_t *f, const char *key)
{
    result_t res = {0};
    start(f, key, 0, &res);
    ck_assert_int_eq(res.called, 0); /* never from inside the call, hits included */
    ck_assert(run_until(&res.called, WAIT_MS));
    run_for(0);
    ck_assert_int_eq(res.called, 1);
    return res;
}

static const gw_keyed_cache_conf_t CACHING = {.cache_ttl_ms = 600000, .negative_ttl_ms = 600000, .stale_ttl_ms = 600000};

START_TEST(hits_single_flight_and_negative_entries)
{
    server_t srv;
    fixture_t f;
    result_t res[5] = {{0}};

    server_tcp(&srv);
    admin(&srv, "HSET t:{a} v one");
    fixture_init(&f, &srv, CACHING);

    for (int i = 0; i != 5; ++i)
        start(&f, "a", 0, &res[i]);
    ck_assert(run_until(&res[4].called, WAIT_MS));
    for (int i = 0; i != 5; ++i) {
        ck_assert_int_eq(res[i].called, 1);
        ck_assert_int_eq(res[i].status, GW_KEYED_FOUND);
        ck_assert_str_eq(res[i].v, "one");
    }
    ck_assert_uint_eq(counter(&f.counters.fetches), 1);
    ck_assert_uint_eq(counter(&f.counters.coalesced), 4);

    /* a hit makes no call, even to a frozen server */
    ck_assert_int_eq(kill(srv.pid, SIGSTOP), 0);
    ck_assert_str_eq(lookup(&f, "a").v, "one");
    ck_assert_int_eq(kill(srv.pid, SIGCONT), 0);
    ck_assert_uint_eq(counter(&f.counters.fetches), 1);
    ck_assert_uint_eq(counter(&f.counters.hits), 1);

    /* "not found" is remembered */
    ck_assert_int_eq(lookup(&f, "none").status, GW_KEYED_NOT_FOUND);
    ck_assert_int_eq(lookup(&f, "none").status, GW_KEYED_NOT_FOUND);
    ck_assert_uint_eq(counter(&f.counters.fetches), 2);

    /* not listening: nothing answers as fresh */
    f.listening = 0;
    ck_assert_str_eq(lookup(&f, "a").v, "one");
    ck_assert_uint_eq(counter(&f.counters.fetches), 3);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(keys_out_of_bounds_are_never_fetched)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    fixture_init(&f, &srv, CACHING);
    ck_assert_int_eq(lookup(&f, "").status, GW_KEYED_NOT_FOUND);
    ck_assert_int_eq(lookup(&f, "seventeen-bytes-x").status, GW_KEYED_NOT_FOUND);
    ck_assert_int_eq(lookup(&f, "sixteen-bytes-xx").status, GW_KEYED_NOT_FOUND);
    ck_assert_uint_eq(counter(&f.counters.fetches), 1); /* only the one within key_max */
    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

/* keep_revoked 0: a publish removes the entry; 1: keeps its value for on_fetched */
static void publish_case(int keep_revoked)
{
    server_t srv;
    fixture_t f;
    gw_keyed_cache_conf_t conf = CACHING;

    conf.keep_revoked = keep_revoked;
    server_tcp(&srv);
    admin(&srv, "HSET t:{a} v one");
    fixture_init(&f, &srv, conf);
    ck_assert_str_eq(lookup(&f, "a").v, "one");
    ck_assert_int_eq(f.fetched_calls, 1);
    ck_assert_str_eq(f.fetched_before, "-");

    admin(&srv, "HSET t:{a} v two");
    ck_assert_str_eq(lookup(&f, "a").v, "one"); /* no publish yet: the cache answers */
    ck_assert_int_eq(gw_keyed_cache_invalidate(f.cache, "a", 1), 1);
    ck_assert_uint_eq(gw_keyed_cache_num_entries(f.cache), (keep_revoked ? 1 : 0));
    ck_assert_int_eq(gw_keyed_cache_invalidate(f.cache, "b", 1), 0);
    ck_assert_str_eq(lookup(&f, "a").v, "two");
    ck_assert_int_eq(f.fetched_calls, 2);
    ck_assert_str_eq(f.fetched_before, keep_revoked ? "one" : "-");
    ck_assert_str_eq(f.fetched_after, "two");
    ck_assert_uint_eq(counter(&f.counters.invalidations), 1);
    fixture_dispose(&f);
    server_cleanup(&srv);
}

START_TEST(publish_removes)
{
    publish_case(0);
}
END_TEST

START_TEST(publish_revokes)
{
    publish_case(1);
}
END_TEST

START_TEST(publish_redoes_a_fetch_in_flight_and_a_deferred_hit)
{
    server_t srv;
    fixture_t f;
    result_t in_flight = {0}, deferred = {0};

    server_tcp(&srv);
    admin(&srv, "HSET t:{a} v one");
    admin(&srv, "HSET t:{b} v one");
    fixture_init(&f, &srv, CACHING);
    ck_assert_str_eq(lookup(&f, "b").v, "one");

    /* sent before the change, answered after the publish: its answer is not given */
    start(&f, "a", 0, &in_flight);
    start(&f, "b", 0, &deferred); /* a hit waiting for the loop */
    admin(&srv, "HSET t:{a} v two");
    admin(&srv, "HSET t:{b} v two");
    gw_keyed_cache_invalidate(f.cache, "a", 1);
    gw_keyed_cache_invalidate(f.cache, "b", 1);
    ck_assert(run_until(&in_flight.called, WAIT_MS));
    ck_assert(run_until(&deferred.called, WAIT_MS));
    run_for(0);
    ck_assert_int_eq(in_flight.called, 1);
    ck_assert_str_eq(in_flight.v, "two");
    ck_assert_int_eq(deferred.called, 1);
    ck_assert_str_eq(deferred.v, "two");
    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(flush_and_outage)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    admin(&srv, "HSET t:{a} v one");
    fixture_init(&f, &srv, CACHING);
    ck_assert_str_eq(lookup(&f, "a").v, "one");
    ck_assert_int_eq(lookup(&f, "none").status, GW_KEYED_NOT_FOUND);
    gw_keyed_cache_flush(f.cache);
    ck_assert_uint_eq(gw_keyed_cache_num_entries(f.cache), 1); /* the negative entry went, the value stays */

    /* Redis gone: the value stands in (stale), "not found" is not known any more */
    server_kill(&srv);
    ck_assert_str_eq(lookup(&f, "a").v, "one");
    ck_assert_uint_eq(counter(&f.counters.stale), 1);
    ck_assert_int_eq(lookup(&f, "none").status, GW_KEYED_UNAVAILABLE);
    ck_assert_uint_eq(counter(&f.counters.unavailable), 1);
    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(frozen_redis_answers_by_the_deadline)
{
    server_t srv;
    fixture_t f;
    result_t res = {0};

    server_tcp(&srv);
    fixture_init(&f, &srv, (gw_keyed_cache_conf_t){.lookup_timeout_ms = 300});
    ck_assert_int_eq(kill(srv.pid, SIGSTOP), 0);
    uint64_t t0 = h2o_now(loop);
    start(&f, "a", 0, &res);
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_int_eq(kill(srv.pid, SIGCONT), 0);
    ck_assert_int_eq(res.status, GW_KEYED_UNAVAILABLE);
    ck_assert_uint_ge(h2o_now(loop) - t0, 300);
    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(size_is_bounded_and_cancel_is_silent)
{
    server_t srv;
    fixture_t f;
    static result_t res[50];
    char key[16];

    server_tcp(&srv);
    fixture_init(&f, &srv, (gw_keyed_cache_conf_t){.max_entries = 20, .cache_ttl_ms = 600000, .negative_ttl_ms = 600000});
    for (int i = 0; i != 50; ++i) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_eq(lookup(&f, key).status, GW_KEYED_NOT_FOUND);
    }
    ck_assert_uint_eq(gw_keyed_cache_num_entries(f.cache), 20);
    ck_assert_uint_eq(counter(&f.counters.evictions), 30);

    memset(res, 0, sizeof(res));
    gw_keyed_lookup_cancel(start(&f, "k49", 0, &res[0]));   /* a hit */
    gw_keyed_lookup_cancel(start(&f, "fresh", 0, &res[1])); /* a fetch */
    run_for(200);
    ck_assert_int_eq(res[0].called + res[1].called, 0);
    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {hits_single_flight_and_negative_entries,
                            keys_out_of_bounds_are_never_fetched,
                            publish_removes,
                            publish_revokes,
                            publish_redoes_a_fetch_in_flight_and_a_deferred_hit,
                            flush_and_outage,
                            frozen_redis_answers_by_the_deadline,
                            size_is_bounded_and_cancel_is_silent};
    return redis_fixture_main("keyed_cache", 60, NULL, NULL, tests, sizeof(tests) / sizeof(tests[0]));
}
