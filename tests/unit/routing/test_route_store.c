/*
 * routing/route_store.c against a real redis-server started by the test on
 * loopback: cache hits without Redis, pub/sub eviction, single flight,
 * negative entries, TTLs, resubscription, outages, the size bound and the
 * lifecycle hook.
 */
#include <check.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include <h2o.h>
#include "common/redis.h"
#include "routing/route_store.h"
#include "tests/unit/redis_fixture.h"

/* Time here is the loop's clock (h2o_now), the one TTLs and deadlines are
 * set by, so lower bounds are exact under any load; "at once" means "on the
 * next loop turn". WAIT_MS only bounds waits for what must happen
 * (generous: a loaded machine, sanitizers). */
#define WAIT_MS 10000

#define TOKEN "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static void put_sandbox(const server_t *srv, const char *id, const char *lifecycle, const char *port3000)
{
    admin(srv, "DEL lizard:sbx:{%s}", id);
    admin(srv, "HSET lizard:sbx:{%s} state running addr 10.0.3.7 lifecycle %s project p1 token_sha256 %s port:3000 %s", id,
          lifecycle, TOKEN, port3000);
}

/* a store with its own Redis connections */

typedef struct {
    gw_redis_t *redis, *sub;
    gw_route_store_t *store;
    gw_route_store_counters_t counters;
    int sub_up; /* flushes seen: the subscription is confirmed */
    char lc_id[64], lc_new[64];
    int lc_calls, lc_null;
} fixture_t;

static void on_lifecycle(void *data, const char *id, const char *lifecycle)
{
    fixture_t *f = data;
    ++f->lc_calls;
    snprintf(f->lc_id, sizeof(f->lc_id), "%s", id);
    f->lc_null = lifecycle == NULL;
    snprintf(f->lc_new, sizeof(f->lc_new), "%s", lifecycle != NULL ? lifecycle : "");
}

/* subscribe 0: no subscriber, hence no cache */
static void fixture_init(fixture_t *f, const server_t *srv, gw_route_store_conf_t conf, int subscribe)
{
    memset(f, 0, sizeof(*f));
    gw_redis_conf_t rconf = conf_for(srv);
    rconf.reconnect_max_ms = 100; /* this suite's bound; test_redis.c uses 200 */
    f->redis = gw_redis_new((h2o_loop_t *)loop, &rconf);
    conf.prefix = "lizard:";
    if (conf.lookup_timeout_ms == 0)
        conf.lookup_timeout_ms = 2000; /* above any scheduling delay: only a frozen server misses it */
    conf.counters = &f->counters;
    conf.on_lifecycle = on_lifecycle;
    conf.lifecycle_data = f;
    f->store = gw_route_store_new((h2o_loop_t *)loop, f->redis, &conf);
    ck_assert_ptr_nonnull(f->store);
    if (subscribe) {
        f->sub = gw_redis_new((h2o_loop_t *)loop, &rconf);
        ck_assert_int_eq(gw_route_store_subscribe(f->store, f->sub), 0);
        /* the subscription is confirmed when the first flush happens */
        ck_assert(run_until_counter(&f->counters.flushes, 1, WAIT_MS));
    }
    ck_assert(wait_ready(f->redis, WAIT_MS));
}

static void fixture_dispose(fixture_t *f)
{
    gw_redis_free(f->sub); /* before the store, which it calls back */
    gw_route_store_free(f->store);
    gw_redis_free(f->redis);
}

typedef struct {
    int called;
    gw_route_status_t status;
    char lifecycle[64];
    gw_port_access_t port3000;
    uint64_t egress_total;
    int quota_reached;
    uint64_t at;
} result_t;

static void on_route(void *data, gw_route_status_t status, gw_sandbox_t *sandbox)
{
    result_t *res = data;
    ++res->called;
    res->status = status;
    res->at = h2o_now(loop);
    if (status == GW_ROUTE_FOUND) {
        ck_assert_ptr_nonnull(sandbox);
        snprintf(res->lifecycle, sizeof(res->lifecycle), "%s", sandbox->lifecycle.base);
        res->port3000 = gw_sandbox_port_access(sandbox, 3000);
        res->egress_total = sandbox->egress_total;
        res->quota_reached = gw_sandbox_quota_reached(sandbox);
    } else {
        ck_assert_ptr_null(sandbox);
    }
}

/* one lookup, run to its answer */
static result_t lookup(fixture_t *f, const char *id)
{
    result_t res = {0};
    ck_assert_ptr_nonnull(gw_route_store_lookup(f->store, id, on_route, &res));
    ck_assert_int_eq(res.called, 0); /* never from inside the call, hits included */
    ck_assert(run_until(&res.called, WAIT_MS));
    run_for(0);
    ck_assert_int_eq(res.called, 1);
    return res;
}

/* tests */

START_TEST(hit_makes_no_redis_call)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    put_sandbox(&srv, "sbx1", "lc1", "private");
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 60000, .stale_ttl_ms = 60000}, 1);

    result_t r = lookup(&f, "sbx1");
    ck_assert_int_eq(r.status, GW_ROUTE_FOUND);
    ck_assert_str_eq(r.lifecycle, "lc1");
    ck_assert_uint_eq(counter(&f.counters.fetches), 1);

    /* a frozen server cannot answer anything: hits still do, at once */
    ck_assert_int_eq(kill(srv.pid, SIGSTOP), 0);
    for (int i = 0; i != 100; ++i) {
        r = lookup(&f, "sbx1");
        ck_assert_int_eq(r.status, GW_ROUTE_FOUND);
        ck_assert_int_eq(r.port3000, GW_PORT_PRIVATE);
    }
    /* 100 hits, not 100 fetches waiting out their deadlines */
    ck_assert_uint_eq(counter(&f.counters.fetches), 1);
    ck_assert_uint_eq(counter(&f.counters.hits), 100);
    ck_assert_int_eq(kill(srv.pid, SIGCONT), 0);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(publish_evicts_at_once)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    put_sandbox(&srv, "sbx1", "lc1", "private");
    put_sandbox(&srv, "sbx2", "lc1", "private");
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 60000, .stale_ttl_ms = 60000}, 1);
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PRIVATE);
    ck_assert_int_eq(lookup(&f, "sbx2").port3000, GW_PORT_PRIVATE);

    /* changed without a message: the cache does not know yet */
    put_sandbox(&srv, "sbx1", "lc1", "public");
    put_sandbox(&srv, "sbx2", "lc1", "public");
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PRIVATE);

    /* the message evicts that sandbox only; upper case is the same id (hosts are case-insensitive) */
    ck_assert_int_eq(admin(&srv, "PUBLISH lizard:routes SBX1"), 1);
    admin(&srv, "PUBLISH lizard:routes nosuchsandbox");
    admin(&srv, "PUBLISH lizard:routes %s", "not/an id at all, and far too long to be one ..........................");
    ck_assert(run_until_counter(&f.counters.invalidations, 1, WAIT_MS));
    result_t r = lookup(&f, "sbx1");
    ck_assert_int_eq(r.status, GW_ROUTE_FOUND);
    ck_assert_int_eq(r.port3000, GW_PORT_PUBLIC);
    ck_assert_int_eq(lookup(&f, "sbx2").port3000, GW_PORT_PRIVATE);
    ck_assert_uint_eq(counter(&f.counters.invalidations), 1);

    /* deleted + message: not found at once */
    admin(&srv, "DEL lizard:sbx:{sbx2}");
    admin(&srv, "PUBLISH lizard:routes sbx2");
    ck_assert(run_until_counter(&f.counters.invalidations, 2, WAIT_MS));
    ck_assert_int_eq(lookup(&f, "sbx2").status, GW_ROUTE_NOT_FOUND);

    /* another prefix's channel is not ours */
    put_sandbox(&srv, "sbx1", "lc1", "private");
    admin(&srv, "PUBLISH other:routes sbx1");
    run_for(100);
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PUBLIC);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

/* The running total <prefix>egress:{<id>} comes with the record, in the same
 * fetch (one per miss: the fetches counter), and is read again after a publish. */
START_TEST(fetch_reads_the_running_total)
{
    server_t srv;
    fixture_t f;
    result_t r;

    server_tcp(&srv);
    put_sandbox(&srv, "sbx1", "lc1", "public");
    admin(&srv, "HSET lizard:sbx:{sbx1} egress_quota 1000");
    admin(&srv, "SET lizard:egress:{sbx1} 999");
    put_sandbox(&srv, "sbx2", "lc1", "public"); /* no quota, no total */
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 60000, .stale_ttl_ms = 60000}, 1);
    r = lookup(&f, "sbx1");
    ck_assert_uint_eq(r.egress_total, 999);
    ck_assert_int_eq(r.quota_reached, 0);
    r = lookup(&f, "sbx2");
    ck_assert_uint_eq(r.egress_total, 0);
    ck_assert_int_eq(r.quota_reached, 0);
    ck_assert_uint_eq(counter(&f.counters.fetches), 2);

    /* the total grows (another gateway's INCRBY): cached until a publish */
    admin(&srv, "INCRBY lizard:egress:{sbx1} 1");
    ck_assert_int_eq(lookup(&f, "sbx1").quota_reached, 0);
    admin(&srv, "PUBLISH lizard:routes sbx1");
    ck_assert(run_until_counter(&f.counters.invalidations, 1, WAIT_MS));
    r = lookup(&f, "sbx1");
    ck_assert_uint_eq(r.egress_total, 1000);
    ck_assert_int_eq(r.quota_reached, 1);
    ck_assert_uint_eq(counter(&f.counters.fetches), 3);

    /* a total that is not a number (a key of another type) is not known to have reached anything */
    admin(&srv, "DEL lizard:egress:{sbx1}");
    admin(&srv, "HSET lizard:egress:{sbx1} a b");
    admin(&srv, "PUBLISH lizard:routes sbx1");
    ck_assert(run_until_counter(&f.counters.invalidations, 2, WAIT_MS));
    r = lookup(&f, "sbx1");
    ck_assert_int_eq(r.status, GW_ROUTE_FOUND);
    ck_assert_uint_eq(r.egress_total, 0);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(concurrent_misses_share_one_fetch)
{
    server_t srv;
    fixture_t f;
    result_t res[50];

    server_tcp(&srv);
    put_sandbox(&srv, "sbx1", "lc1", "public");
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 60000, .negative_ttl_ms = 60000}, 1);

    memset(res, 0, sizeof(res));
    gw_route_lookup_t *cancelled = NULL;
    for (int i = 0; i != 50; ++i) {
        gw_route_lookup_t *l = gw_route_store_lookup(f.store, "sbx1", on_route, &res[i]);
        if (i == 7)
            cancelled = l;
    }
    /* one waiter gives up: the others still get their answer */
    gw_route_lookup_cancel(cancelled);
    ck_assert(run_until(&res[49].called, WAIT_MS));
    run_for(20);
    for (int i = 0; i != 50; ++i) {
        ck_assert_int_eq(res[i].called, i == 7 ? 0 : 1);
        if (i != 7)
            ck_assert_int_eq(res[i].status, GW_ROUTE_FOUND);
    }
    ck_assert_uint_eq(counter(&f.counters.fetches), 1);
    ck_assert_uint_eq(counter(&f.counters.coalesced), 49);

    /* the same for a sandbox that does not exist */
    memset(res, 0, sizeof(res));
    for (int i = 0; i != 50; ++i)
        gw_route_store_lookup(f.store, "nosuch", on_route, &res[i]);
    ck_assert(run_until(&res[49].called, WAIT_MS));
    for (int i = 0; i != 50; ++i)
        ck_assert_int_eq(res[i].status, GW_ROUTE_NOT_FOUND);
    ck_assert_uint_eq(counter(&f.counters.fetches), 2);

    /* every waiter cancelled: the fetch still fills the cache */
    put_sandbox(&srv, "sbx3", "lc1", "public");
    memset(res, 0, sizeof(res));
    gw_route_lookup_cancel(gw_route_store_lookup(f.store, "sbx3", on_route, &res[0]));
    run_for(100);
    ck_assert_int_eq(res[0].called, 0);
    ck_assert_uint_eq(counter(&f.counters.fetches), 3);
    ck_assert_int_eq(lookup(&f, "sbx3").status, GW_ROUTE_FOUND);
    ck_assert_uint_eq(counter(&f.counters.fetches), 3);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(negative_entries)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 60000, .negative_ttl_ms = 3000}, 1);

    uint64_t t0 = h2o_now(loop);
    ck_assert_int_eq(lookup(&f, "late").status, GW_ROUTE_NOT_FOUND);
    put_sandbox(&srv, "late", "lc1", "public"); /* no message */
    for (int i = 0; i != 20; ++i)
        ck_assert_int_eq(lookup(&f, "late").status, GW_ROUTE_NOT_FOUND);
    ck_assert_uint_lt(h2o_now(loop) - t0, 3000); /* else the next line says nothing */
    ck_assert_uint_eq(counter(&f.counters.fetches), 1);
    /* bounded by negative_ttl_ms */
    run_for(3050);
    ck_assert_int_eq(lookup(&f, "late").status, GW_ROUTE_FOUND);

    /* and a message ends it at once */
    ck_assert_int_eq(lookup(&f, "later").status, GW_ROUTE_NOT_FOUND);
    put_sandbox(&srv, "later", "lc1", "public");
    admin(&srv, "PUBLISH lizard:routes later");
    ck_assert(run_until_counter(&f.counters.invalidations, 1, WAIT_MS));
    ck_assert_int_eq(lookup(&f, "later").status, GW_ROUTE_FOUND);

    /* ids that cannot exist never reach Redis */
    uint64_t fetches = counter(&f.counters.fetches);
    ck_assert_int_eq(lookup(&f, "").status, GW_ROUTE_NOT_FOUND);
    ck_assert_int_eq(lookup(&f, "a123456789012345678901234567890123456789012345678901234567").status, GW_ROUTE_NOT_FOUND);
    ck_assert_uint_eq(counter(&f.counters.fetches), fetches);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(cache_ttl_bounds_staleness)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    put_sandbox(&srv, "sbx1", "lc1", "private");
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 3000, .stale_ttl_ms = 60000}, 1);
    uint64_t t0 = h2o_now(loop);
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PRIVATE);
    put_sandbox(&srv, "sbx1", "lc1", "public"); /* the message is "lost" */
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PRIVATE);
    ck_assert_uint_lt(h2o_now(loop) - t0, 3000); /* else the line above says nothing */
    run_for(3050);
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PUBLIC);
    ck_assert_uint_eq(counter(&f.counters.fetches), 2);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(resubscription_drops_everything)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    put_sandbox(&srv, "sbx1", "lc1", "private");
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 60000, .negative_ttl_ms = 60000, .stale_ttl_ms = 60000}, 1);
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PRIVATE);
    ck_assert_int_eq(lookup(&f, "ghost").status, GW_ROUTE_NOT_FOUND);
    put_sandbox(&srv, "sbx1", "lc1", "public");
    put_sandbox(&srv, "ghost", "lc1", "public");
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PRIVATE);
    ck_assert_int_eq(lookup(&f, "ghost").status, GW_ROUTE_NOT_FOUND);

    /* the subscription drops (messages may be lost) and comes back: nothing cached is trusted */
    ck_assert_int_eq(admin(&srv, "CLIENT KILL TYPE pubsub"), 1);
    ck_assert(run_until_counter(&f.counters.flushes, 2, WAIT_MS));
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PUBLIC);
    ck_assert_int_eq(lookup(&f, "ghost").status, GW_ROUTE_FOUND);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(outage_serves_cached_within_stale_ttl)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    put_sandbox(&srv, "hot", "lc1", "public");
    put_sandbox(&srv, "cold", "lc1", "public");
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 200, .stale_ttl_ms = 3000}, 1);
    uint64_t confirmed = h2o_now(loop); /* no later than the fetch was sent */
    ck_assert_int_eq(lookup(&f, "hot").status, GW_ROUTE_FOUND);

    server_kill(&srv);
    run_for(50);
    ck_assert_int_eq(gw_redis_is_ready(f.redis), 0);
    /* uncached: unavailable at once */
    result_t r = lookup(&f, "cold");
    ck_assert_int_eq(r.status, GW_ROUTE_UNAVAILABLE);
    /* cached, past cache_ttl_ms: still served (stale), at once */
    run_for(250);
    r = (result_t){0};
    gw_route_store_lookup(f.store, "hot", on_route, &r);
    h2o_evloop_run(loop, 0); /* one turn: no fetch waited for */
    ck_assert_int_eq(r.called, 1);
    ck_assert_int_eq(r.status, GW_ROUTE_FOUND);
    ck_assert_uint_ge(counter(&f.counters.stale), 1);
    ck_assert_uint_lt(r.at - confirmed, 3000); /* else the lines above say nothing */
    /* but not past stale_ttl_ms */
    run_for(3000 - (h2o_now(loop) - confirmed) + 50);
    ck_assert_int_eq(lookup(&f, "hot").status, GW_ROUTE_UNAVAILABLE);

    /* Redis returns: everything recovers by itself */
    server_start(&srv);
    put_sandbox(&srv, "cold", "lc2", "public");
    ck_assert(wait_ready(f.redis, WAIT_MS));
    r = lookup(&f, "cold");
    ck_assert_int_eq(r.status, GW_ROUTE_FOUND);
    ck_assert_str_eq(r.lifecycle, "lc2");
    ck_assert(run_until_counter(&f.counters.flushes, 2, WAIT_MS)); /* resubscribed */

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(frozen_redis_answers_by_the_deadline)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    put_sandbox(&srv, "hot", "lc1", "public");
    fixture_init(&f, &srv, (gw_route_store_conf_t){.lookup_timeout_ms = 1000, .cache_ttl_ms = 100, .stale_ttl_ms = 60000}, 1);
    ck_assert_int_eq(lookup(&f, "hot").status, GW_ROUTE_FOUND);
    run_for(150); /* expired: the next lookup asks Redis */
    ck_assert_int_eq(kill(srv.pid, SIGSTOP), 0);
    uint64_t t0 = h2o_now(loop);
    result_t hot = {0}, cold = {0};
    gw_route_store_lookup(f.store, "hot", on_route, &hot);
    gw_route_store_lookup(f.store, "cold", on_route, &cold);
    ck_assert(run_until(&hot.called, WAIT_MS));
    ck_assert(run_until(&cold.called, WAIT_MS));
    /* the expired route answers when the fetch fails; the unknown one cannot */
    ck_assert_int_eq(hot.status, GW_ROUTE_FOUND);
    ck_assert_int_eq(cold.status, GW_ROUTE_UNAVAILABLE);
    /* at the deadline, the server still frozen: nothing else could have answered */
    ck_assert_uint_ge(hot.at - t0, 1000);
    ck_assert_uint_ge(cold.at - t0, 1000);
    ck_assert_int_eq(kill(srv.pid, SIGCONT), 0);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(lifecycle_change_is_reported)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    put_sandbox(&srv, "sbx1", "lc1", "public");
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 60000}, 1);
    ck_assert_str_eq(lookup(&f, "sbx1").lifecycle, "lc1");
    ck_assert_int_eq(f.lc_calls, 0);

    /* a change that keeps the lifecycle says nothing */
    put_sandbox(&srv, "sbx1", "lc1", "private");
    admin(&srv, "PUBLISH lizard:routes sbx1");
    ck_assert(run_until_counter(&f.counters.invalidations, 1, WAIT_MS));
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PRIVATE);
    ck_assert_int_eq(f.lc_calls, 0);

    /* a new VM */
    put_sandbox(&srv, "sbx1", "lc2", "private");
    admin(&srv, "PUBLISH lizard:routes sbx1");
    ck_assert(run_until_counter(&f.counters.invalidations, 2, WAIT_MS));
    ck_assert_str_eq(lookup(&f, "sbx1").lifecycle, "lc2");
    ck_assert_int_eq(f.lc_calls, 1);
    ck_assert_str_eq(f.lc_id, "sbx1");
    ck_assert_str_eq(f.lc_new, "lc2");

    /* gone */
    admin(&srv, "DEL lizard:sbx:{sbx1}");
    admin(&srv, "PUBLISH lizard:routes sbx1");
    ck_assert(run_until_counter(&f.counters.invalidations, 3, WAIT_MS));
    ck_assert_int_eq(lookup(&f, "sbx1").status, GW_ROUTE_NOT_FOUND);
    ck_assert_int_eq(f.lc_calls, 2);
    ck_assert_int_eq(f.lc_null, 1);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(without_subscriber_nothing_is_cached)
{
    server_t srv;
    fixture_t f;

    server_tcp(&srv);
    put_sandbox(&srv, "sbx1", "lc1", "private");
    fixture_init(&f, &srv, (gw_route_store_conf_t){.cache_ttl_ms = 60000, .negative_ttl_ms = 60000}, 0);
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PRIVATE);
    put_sandbox(&srv, "sbx1", "lc1", "public");
    ck_assert_int_eq(lookup(&f, "sbx1").port3000, GW_PORT_PUBLIC);
    ck_assert_int_eq(lookup(&f, "nosuch").status, GW_ROUTE_NOT_FOUND);
    ck_assert_int_eq(lookup(&f, "nosuch").status, GW_ROUTE_NOT_FOUND);
    ck_assert_uint_eq(counter(&f.counters.fetches), 4);
    ck_assert_uint_eq(gw_route_store_num_entries(f.store), 0);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

START_TEST(size_is_bounded)
{
    server_t srv;
    fixture_t f;
    static result_t res[10000];
    char id[32];

    server_tcp(&srv);
    fixture_init(&f, &srv, (gw_route_store_conf_t){.lookup_timeout_ms = 10000, .cache_ttl_ms = 600000, .negative_ttl_ms = 600000},
                 1);
    /* a flood of random names, in batches so that each batch is answered */
    for (int batch = 0; batch != GW_ROUTE_CACHE_MAX_ENTRIES / 10000 + 1; ++batch) {
        memset(res, 0, sizeof(res));
        for (int i = 0; i != 10000; ++i) {
            snprintf(id, sizeof(id), "flood%d", batch * 10000 + i);
            ck_assert_ptr_nonnull(gw_route_store_lookup(f.store, id, on_route, &res[i]));
        }
        ck_assert(run_until(&res[9999].called, 20000));
        ck_assert_int_eq(res[0].status, GW_ROUTE_NOT_FOUND);
    }
    ck_assert_uint_eq(gw_route_store_num_entries(f.store), GW_ROUTE_CACHE_MAX_ENTRIES);
    ck_assert_uint_eq(counter(&f.counters.evictions), 10000);
    /* the oldest went; the newest are still there */
    uint64_t fetches = counter(&f.counters.fetches);
    snprintf(id, sizeof(id), "flood%d", GW_ROUTE_CACHE_MAX_ENTRIES + 9999);
    ck_assert_int_eq(lookup(&f, id).status, GW_ROUTE_NOT_FOUND);
    ck_assert_uint_eq(counter(&f.counters.fetches), fetches);
    ck_assert_int_eq(lookup(&f, "flood0").status, GW_ROUTE_NOT_FOUND);
    ck_assert_uint_eq(counter(&f.counters.fetches), fetches + 1);

    fixture_dispose(&f);
    server_cleanup(&srv);
}
END_TEST

/* one lookup after another against a real record, its callback keeping the sandbox */

typedef struct {
    int called;
    gw_route_status_t status;
    gw_sandbox_t *sandbox; /* retained */
    uint64_t at;
} lookup_result_t;

static void on_route_keep(void *data, gw_route_status_t status, gw_sandbox_t *sandbox)
{
    lookup_result_t *res = data;
    ++res->called;
    res->status = status;
    res->at = h2o_now(loop);
    if (status == GW_ROUTE_FOUND) {
        ck_assert_ptr_nonnull(sandbox);
        gw_sandbox_retain(sandbox);
        res->sandbox = sandbox;
    } else {
        ck_assert_ptr_null(sandbox);
    }
}

START_TEST(route_store_lookups)
{
    server_t srv;
    lookup_result_t res, res2;

    server_tcp(&srv);
    admin(&srv, "HSET lizard:sbx:{sbx7f3a9} state running addr 10.0.3.7 lifecycle lc1 project p1 "
                "token_sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 port:3000 private port:80 public");
    admin(&srv, "SET lizard:sbx:{wrongtype} oops");
    gw_redis_conf_t rconf = conf_for(&srv);
    gw_redis_t *r = gw_redis_new(loop, &rconf);
    ck_assert(wait_ready(r, WAIT_MS));
    gw_route_store_conf_t conf = {.prefix = "lizard:", .lookup_timeout_ms = 1000, .cache_ttl_ms = 10000};
    gw_route_store_t *store = gw_route_store_new((h2o_loop_t *)loop, r, &conf);
    ck_assert_ptr_nonnull(store);

    /* found */
    memset(&res, 0, sizeof(res));
    ck_assert_ptr_nonnull(gw_route_store_lookup(store, "sbx7f3a9", on_route_keep, &res));
    ck_assert_int_eq(res.called, 0);
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_int_eq(res.status, GW_ROUTE_FOUND);
    ck_assert_str_eq(res.sandbox->id, "sbx7f3a9");
    ck_assert_int_eq(res.sandbox->state, GW_SANDBOX_RUNNING);
    ck_assert_int_eq(res.sandbox->has_addr, 1);
    ck_assert_str_eq(res.sandbox->lifecycle.base, "lc1");
    ck_assert_str_eq(res.sandbox->project.base, "p1");
    ck_assert_int_eq(res.sandbox->has_token, 1);
    ck_assert_int_eq(gw_sandbox_port_access(res.sandbox, 3000), GW_PORT_PRIVATE);
    ck_assert_int_eq(gw_sandbox_port_access(res.sandbox, 80), GW_PORT_PUBLIC);
    ck_assert_int_eq(gw_sandbox_port_access(res.sandbox, 8080), GW_PORT_NOT_EXPOSED);
    ck_assert_uint_eq(res.sandbox->refcnt, 1); /* the store let go of its reference */
    gw_sandbox_release(res.sandbox);

    /* another prefix means another key: not found */
    gw_route_store_conf_t conf2 = conf;
    conf2.prefix = "other:";
    gw_route_store_t *store2 = gw_route_store_new((h2o_loop_t *)loop, r, &conf2);
    memset(&res, 0, sizeof(res));
    gw_route_store_lookup(store2, "sbx7f3a9", on_route_keep, &res);
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_int_eq(res.status, GW_ROUTE_NOT_FOUND);
    gw_route_store_free(store2);

    /* not found */
    memset(&res, 0, sizeof(res));
    gw_route_store_lookup(store, "nosuchsandbox", on_route_keep, &res);
    ck_assert_int_eq(res.called, 0);
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_int_eq(res.status, GW_ROUTE_NOT_FOUND);

    /* a key of the wrong type is a Redis error: unavailable, not "not found" */
    memset(&res, 0, sizeof(res));
    gw_route_store_lookup(store, "wrongtype", on_route_keep, &res);
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_int_eq(res.status, GW_ROUTE_UNAVAILABLE);

    /* cancelled: never called */
    memset(&res, 0, sizeof(res));
    memset(&res2, 0, sizeof(res2));
    gw_route_lookup_t *l = gw_route_store_lookup(store, "sbx7f3a9", on_route_keep, &res);
    gw_route_store_lookup(store, "sbx7f3a9", on_route_keep, &res2);
    gw_route_lookup_cancel(l);
    ck_assert(run_until(&res2.called, WAIT_MS));
    run_for(30);
    ck_assert_int_eq(res.called, 0);
    gw_sandbox_release(res2.sandbox);

    /* server stopped: unavailable by the deadline */
    ck_assert_int_eq(kill(srv.pid, SIGSTOP), 0);
    memset(&res, 0, sizeof(res));
    uint64_t t0 = h2o_now(loop);
    gw_route_store_lookup(store, "sbx7f3a9", on_route_keep, &res);
    ck_assert(run_until(&res.called, WAIT_MS));
    ck_assert_int_eq(res.status, GW_ROUTE_UNAVAILABLE);
    ck_assert_uint_ge(res.at - t0, 1000); /* at the deadline */
    ck_assert_int_eq(gw_redis_is_ready(r), 0);

    /* not connected: unavailable at once, but still from the loop */
    memset(&res, 0, sizeof(res));
    gw_route_store_lookup(store, "sbx7f3a9", on_route_keep, &res);
    ck_assert_int_eq(res.called, 0);
    h2o_evloop_run(loop, 0); /* one turn: no deadline waited for */
    ck_assert_int_eq(res.called, 1);
    ck_assert_int_eq(res.status, GW_ROUTE_UNAVAILABLE);
    /* ... and such an immediate answer can be cancelled too */
    memset(&res, 0, sizeof(res));
    l = gw_route_store_lookup(store, "sbx7f3a9", on_route_keep, &res);
    gw_route_lookup_cancel(l);
    run_for(30);
    ck_assert_int_eq(res.called, 0);

    /* a lookup open when the store is freed is dropped without a callback */
    ck_assert_int_eq(kill(srv.pid, SIGCONT), 0);
    ck_assert(wait_ready(r, WAIT_MS));
    memset(&res, 0, sizeof(res));
    gw_route_store_lookup(store, "sbx7f3a9", on_route_keep, &res);
    gw_route_store_free(store);
    run_for(50);
    ck_assert_int_eq(res.called, 0);

    gw_redis_free(r);
    server_cleanup(&srv);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {hit_makes_no_redis_call,
                            publish_evicts_at_once,
                            fetch_reads_the_running_total,
                            concurrent_misses_share_one_fetch,
                            negative_entries,
                            cache_ttl_bounds_staleness,
                            resubscription_drops_everything,
                            outage_serves_cached_within_stale_ttl,
                            frozen_redis_answers_by_the_deadline,
                            lifecycle_change_is_reported,
                            without_subscriber_nothing_is_cached,
                            size_is_bounded,
                            route_store_lookups};
    return redis_fixture_main("route_store", 60, NULL, NULL, tests, sizeof(tests) / sizeof(tests[0]));
}
