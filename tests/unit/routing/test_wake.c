/*
 * routing/wake.c against a real redis-server started by the test: the resume
 * request (SET NX, then XADD only when the SET won), waiters released by a
 * publish or by the fallback re-read, deadlines, bounds, cancellation and
 * teardown with requests still held (leak detection is on for unit tests).
 */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include <h2o.h>
#include "common/redis.h"
#include "routing/route_store.h"
#include "routing/wake.h"
#include "tests/unit/redis_fixture.h"

#define TOKEN "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static void put_sandbox(const server_t *srv, const char *id, const char *state, const char *resume)
{
    admin(srv, "DEL lizard:sbx:{%s}", id);
    admin(srv, "HSET lizard:sbx:{%s} state %s addr 10.0.3.7 lifecycle lc1 project p1 token_sha256 %s port:3000 private resume %s",
          id, state, TOKEN, resume);
}

static long long resume_entries(const server_t *srv)
{
    return admin(srv, "XLEN lizard:resume");
}

/* One worker's worth: lookup and subscriber connections, a route store, a registry. */
typedef struct {
    gw_redis_t *redis, *sub;
    gw_route_store_t *store;
    gw_route_store_counters_t store_counters;
    gw_wake_t *wake;
} worker_t;

static gw_wake_counters_t counters;

static void worker_init(worker_t *w, const server_t *srv, gw_wake_conf_t conf)
{
    memset(w, 0, sizeof(*w));
    gw_redis_conf_t rconf = conf_for(srv);
    w->redis = gw_redis_new((h2o_loop_t *)loop, &rconf);
    gw_route_store_conf_t sconf = {.prefix = "lizard:",
                                   .lookup_timeout_ms = 500,
                                   .cache_ttl_ms = 10000,
                                   .negative_ttl_ms = 1000,
                                   .stale_ttl_ms = 60000,
                                   .counters = &w->store_counters};
    w->store = gw_route_store_new((h2o_loop_t *)loop, w->redis, &sconf);
    conf.prefix = "lizard:";
    if (conf.instance_id == NULL)
        conf.instance_id = "gw-test";
    if (conf.timeout_ms == 0)
        conf.timeout_ms = 10000;
    if (conf.max_per_sandbox == 0)
        conf.max_per_sandbox = 256;
    if (conf.max_per_worker == 0)
        conf.max_per_worker = 4096;
    if (conf.max_bytes == 0)
        conf.max_bytes = 64 * 1024 * 1024;
    conf.command_timeout_ms = 500;
    conf.counters = &counters;
    w->wake = gw_wake_new((h2o_loop_t *)loop, w->redis, w->store, &conf);
    /* the registry hears publishes through the store, as in the gateway */
    w->sub = gw_redis_new((h2o_loop_t *)loop, &rconf);
    ck_assert_int_eq(gw_route_store_subscribe(w->store, w->sub), 0);
    ck_assert(run_until_counter(&w->store_counters.flushes, 1, 3000)); /* subscribed: the cache is on */
    ck_assert(wait_ready(w->redis, 3000));
}

static void worker_dispose(worker_t *w)
{
    gw_redis_free(w->sub);
    gw_wake_free(w->wake);
    gw_route_store_free(w->store);
    gw_redis_free(w->redis);
}

typedef struct {
    int called;
    gw_wake_result_t result;
    gw_sandbox_state_t state;
    gw_wake_hold_result_t refused;
} result_t;

static void on_woken(void *data, gw_wake_result_t result, gw_sandbox_t *record)
{
    result_t *r = data;
    ++r->called;
    r->result = result;
    if (result == GW_WAKE_SETTLED) {
        ck_assert_ptr_nonnull(record);
        r->state = record->state;
    } else {
        ck_assert_ptr_null(record);
    }
}

static gw_wake_waiter_t *hold(gw_wake_t *w, const gw_sandbox_t *rec, size_t body_bytes, result_t *res)
{
    gw_wake_hold_result_t refused = GW_WAKE_HELD;
    gw_wake_waiter_t *h = gw_wake_hold(w, rec, body_bytes, on_woken, res, &refused);
    ck_assert_int_eq(h != NULL, refused == GW_WAKE_HELD);
    res->refused = refused;
    return h;
}

/* The record as a request found it. */
static gw_sandbox_t *record(const char *id, gw_sandbox_state_t state, int resume_auto)
{
    gw_sandbox_t *s = calloc(1, sizeof(*s));
    snprintf(s->id, sizeof(s->id), "%s", id);
    s->state = state;
    s->resume_auto = resume_auto;
    s->refcnt = 1;
    s->lifecycle = h2o_iovec_init(H2O_STRLIT(""));
    s->project = h2o_iovec_init(H2O_STRLIT(""));
    return s;
}

/* The route store delivers publishes to its on_invalidate; the tests call the registry the same way. */
static void publish(const server_t *srv, worker_t *w, const char *id)
{
    admin(srv, "PUBLISH lizard:routes %s", id);
    gw_wake_on_publish(w->wake, id);
}

static void reset_counters(void)
{
    memset(&counters, 0, sizeof(counters));
}

START_TEST(applies)
{
    static const struct {
        gw_sandbox_state_t state;
        int resume_auto, want;
    } cases[] = {{GW_SANDBOX_PAUSED, 1, 1},  {GW_SANDBOX_PAUSED, 0, 0},  {GW_SANDBOX_STARTING, 0, 1},
                 {GW_SANDBOX_STOPPED, 1, 0}, {GW_SANDBOX_RUNNING, 1, 0}, {GW_SANDBOX_STATE_UNKNOWN, 1, 0}};
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        gw_sandbox_t *s = record("a1", cases[i].state, cases[i].resume_auto);
        ck_assert_int_eq(gw_wake_applies(s), cases[i].want);
        gw_sandbox_release(s);
    }
}
END_TEST

START_TEST(resume_request_then_publish_releases_all)
{
    server_t srv;
    worker_t w;
    result_t res[3] = {{0}};

    server_tcp(&srv);
    reset_counters();
    worker_init(&w, &srv, (gw_wake_conf_t){.instance_id = "gw-a"});
    put_sandbox(&srv, "sbx1", "paused", "auto");
    gw_sandbox_t *rec = record("sbx1", GW_SANDBOX_PAUSED, 1);
    for (int i = 0; i != 3; ++i)
        ck_assert_ptr_nonnull(hold(w.wake, rec, 0, res + i));
    ck_assert_uint_eq(gw_wake_num_held(w.wake, "sbx1"), 3);
    ck_assert_int_eq(atomic_load(&counters.held), 3);
    ck_assert(run_until_counter(&counters.resume_requests, 1, 3000));
    run_for(200);
    /* one request for three waiters; the lock names this gateway and expires */
    ck_assert_int_eq(resume_entries(&srv), 1);
    ck_assert_int_gt(admin(&srv, "PTTL lizard:resume:{sbx1}"), 25000);
    ck_assert_int_eq(res[0].called + res[1].called + res[2].called, 0);

    /* the control plane: starting (still held), then running */
    admin(&srv, "HSET lizard:sbx:{sbx1} state starting");
    publish(&srv, &w, "sbx1");
    run_for(200);
    ck_assert_int_eq(res[0].called, 0);
    admin(&srv, "HSET lizard:sbx:{sbx1} state running");
    publish(&srv, &w, "sbx1");
    ck_assert(run_until(&res[2].called, 3000));
    for (int i = 0; i != 3; ++i) {
        ck_assert_int_eq(res[i].called, 1);
        ck_assert_int_eq(res[i].result, GW_WAKE_SETTLED);
        ck_assert_int_eq(res[i].state, GW_SANDBOX_RUNNING);
    }
    ck_assert_uint_eq(gw_wake_num_held(w.wake, NULL), 0);
    ck_assert_int_eq(atomic_load(&counters.held), 0);
    ck_assert_uint_eq(atomic_load(&counters.wake_count), 1);
    ck_assert_int_eq(resume_entries(&srv), 1);
    gw_sandbox_release(rec);
    worker_dispose(&w);
    server_cleanup(&srv);
}
END_TEST

START_TEST(two_workers_one_resume_request)
{
    server_t srv;
    worker_t a, b;
    result_t ra = {0}, rb = {0};

    server_tcp(&srv);
    reset_counters();
    worker_init(&a, &srv, (gw_wake_conf_t){.instance_id = "gw-a"});
    worker_init(&b, &srv, (gw_wake_conf_t){.instance_id = "gw-b"});
    put_sandbox(&srv, "sbx2", "paused", "auto");
    gw_sandbox_t *rec = record("sbx2", GW_SANDBOX_PAUSED, 1);
    ck_assert_ptr_nonnull(hold(a.wake, rec, 0, &ra));
    ck_assert_ptr_nonnull(hold(b.wake, rec, 0, &rb));
    ck_assert(run_until_counter(&counters.resume_deduped, 1, 3000));
    run_for(100);
    ck_assert_uint_eq(atomic_load(&counters.resume_requests), 1);
    ck_assert_int_eq(resume_entries(&srv), 1);
    admin(&srv, "HSET lizard:sbx:{sbx2} state running");
    publish(&srv, &a, "sbx2");
    gw_wake_on_publish(b.wake, "sbx2");
    ck_assert(run_until(&ra.called, 3000));
    ck_assert(run_until(&rb.called, 3000));
    gw_sandbox_release(rec);
    worker_dispose(&a);
    worker_dispose(&b);
    server_cleanup(&srv);
}
END_TEST

START_TEST(lost_publish_is_made_up_by_the_recheck)
{
    server_t srv;
    worker_t w;
    result_t res = {0};

    server_tcp(&srv);
    reset_counters();
    worker_init(&w, &srv, (gw_wake_conf_t){.recheck_ms = 100});
    put_sandbox(&srv, "sbx3", "starting", "auto");
    gw_sandbox_t *rec = record("sbx3", GW_SANDBOX_STARTING, 1);
    ck_assert_ptr_nonnull(hold(w.wake, rec, 0, &res));
    /* the route store caches the record: only a fresh read sees the change */
    run_for(300);
    ck_assert_int_eq(res.called, 0);
    admin(&srv, "HSET lizard:sbx:{sbx3} state running"); /* no publish */
    ck_assert(run_until(&res.called, 3000));
    ck_assert_int_eq(res.result, GW_WAKE_SETTLED);
    ck_assert_int_eq(res.state, GW_SANDBOX_RUNNING);
    /* starting is waited for without a resume request */
    ck_assert_int_eq(resume_entries(&srv), 0);
    gw_sandbox_release(rec);
    worker_dispose(&w);
    server_cleanup(&srv);
}
END_TEST

START_TEST(other_outcomes)
{
    server_t srv;
    worker_t w;
    result_t stopped = {0}, gone = {0}, late = {0};

    server_tcp(&srv);
    reset_counters();
    worker_init(&w, &srv, (gw_wake_conf_t){.timeout_ms = 300});
    put_sandbox(&srv, "sbx4", "paused", "auto");
    put_sandbox(&srv, "sbx5", "paused", "auto");
    put_sandbox(&srv, "sbx6", "paused", "auto");
    gw_sandbox_t *r4 = record("sbx4", GW_SANDBOX_PAUSED, 1), *r5 = record("sbx5", GW_SANDBOX_PAUSED, 1),
                 *r6 = record("sbx6", GW_SANDBOX_PAUSED, 1);
    ck_assert_ptr_nonnull(hold(w.wake, r4, 0, &stopped));
    ck_assert_ptr_nonnull(hold(w.wake, r5, 0, &gone));
    ck_assert_ptr_nonnull(hold(w.wake, r6, 0, &late));
    /* stopped meanwhile: settled, and the caller refuses it */
    admin(&srv, "HSET lizard:sbx:{sbx4} state stopped");
    publish(&srv, &w, "sbx4");
    admin(&srv, "DEL lizard:sbx:{sbx5}");
    publish(&srv, &w, "sbx5");
    ck_assert(run_until(&gone.called, 3000));
    ck_assert(run_until(&stopped.called, 3000));
    ck_assert_int_eq(stopped.result, GW_WAKE_SETTLED);
    ck_assert_int_eq(stopped.state, GW_SANDBOX_STOPPED);
    ck_assert_int_eq(gone.result, GW_WAKE_NOT_FOUND);
    /* nobody resumes sbx6: its deadline */
    ck_assert(run_until(&late.called, 3000));
    ck_assert_int_eq(late.result, GW_WAKE_TIMEOUT);
    ck_assert_uint_eq(atomic_load(&counters.timeouts), 1);
    ck_assert_uint_eq(gw_wake_num_held(w.wake, NULL), 0);
    gw_sandbox_release(r4);
    gw_sandbox_release(r5);
    gw_sandbox_release(r6);
    worker_dispose(&w);
    server_cleanup(&srv);
}
END_TEST

START_TEST(bounds_cancel_and_teardown)
{
    server_t srv;
    worker_t w;
    result_t res[5] = {{0}};
    gw_wake_waiter_t *h[5];

    server_tcp(&srv);
    reset_counters();
    worker_init(&w, &srv, (gw_wake_conf_t){.max_per_sandbox = 2, .max_per_worker = 3});
    put_sandbox(&srv, "sbx7", "paused", "auto");
    put_sandbox(&srv, "sbx8", "paused", "auto");
    gw_sandbox_t *r7 = record("sbx7", GW_SANDBOX_PAUSED, 1), *r8 = record("sbx8", GW_SANDBOX_PAUSED, 1);
    ck_assert_ptr_nonnull(h[0] = hold(w.wake, r7, 0, res + 0));
    ck_assert_ptr_nonnull(h[1] = hold(w.wake, r7, 0, res + 1));
    ck_assert_ptr_null(hold(w.wake, r7, 0, res + 2)); /* per sandbox */
    ck_assert_ptr_nonnull(h[3] = hold(w.wake, r8, 0, res + 3));
    ck_assert_ptr_null(hold(w.wake, r8, 0, res + 4)); /* per worker */
    ck_assert_uint_eq(atomic_load(&counters.refused), 2);

    /* a client leaves: its place is free again, nothing is called */
    gw_wake_cancel(h[0], 1);
    ck_assert_ptr_nonnull(h[2] = hold(w.wake, r7, 0, res + 2));
    gw_wake_cancel(h[3], 1);
    gw_wake_cancel(h[1], 1);
    ck_assert_uint_eq(atomic_load(&counters.abandoned), 3);
    ck_assert_uint_eq(gw_wake_num_held(w.wake, "sbx8"), 0);
    ck_assert_uint_eq(gw_wake_num_held(w.wake, NULL), 1);
    run_for(100);

    /* freed with a request still held (and its SET maybe in flight): no callback, nothing leaks */
    worker_dispose(&w);
    for (int i = 0; i != 5; ++i)
        ck_assert_int_eq(res[i].called, 0);
    gw_sandbox_release(r7);
    gw_sandbox_release(r8);
    server_cleanup(&srv);
}
END_TEST

/* Held bodies against max_bytes: a body past the budget is refused (and
 * still asks for its sandbox's resume), a bodiless request is held whatever
 * the budget, a leaving client gives its bytes back. */
START_TEST(bytes_budget)
{
    server_t srv;
    worker_t w;
    result_t res[6] = {{0}};
    gw_wake_waiter_t *h[6];

    server_tcp(&srv);
    reset_counters();
    worker_init(&w, &srv, (gw_wake_conf_t){.max_bytes = 1000});
    put_sandbox(&srv, "sbx11", "paused", "auto");
    put_sandbox(&srv, "sbx12", "paused", "auto");
    gw_sandbox_t *r11 = record("sbx11", GW_SANDBOX_PAUSED, 1), *r12 = record("sbx12", GW_SANDBOX_PAUSED, 1);
    ck_assert_ptr_nonnull(h[0] = hold(w.wake, r11, 600, res + 0));
    ck_assert_ptr_nonnull(h[1] = hold(w.wake, r11, 400, res + 1)); /* exactly the budget */
    ck_assert_uint_eq(gw_wake_held_bytes(w.wake), 1000);
    ck_assert_ptr_null(hold(w.wake, r11, 1, res + 2));
    ck_assert_int_eq(res[2].refused, GW_WAKE_OVER_BYTES);
    ck_assert_ptr_nonnull(h[3] = hold(w.wake, r11, 0, res + 3)); /* a GET still waits */
    /* another sandbox, nothing held for it: refused, and its resume is asked all the same */
    ck_assert_ptr_null(hold(w.wake, r12, 2000, res + 4));
    ck_assert_int_eq(res[4].refused, GW_WAKE_OVER_BYTES);
    ck_assert_uint_eq(gw_wake_num_held(w.wake, "sbx12"), 0);
    ck_assert(run_until_counter(&counters.resume_requests, 2, 3000));
    run_for(200); /* the XADDs' answers */
    ck_assert_int_eq(resume_entries(&srv), 2);
    ck_assert_uint_eq(atomic_load(&counters.refused_bytes), 2);
    ck_assert_uint_eq(atomic_load(&counters.refused), 0);
    ck_assert_int_eq(atomic_load(&counters.held_bytes), 1000);

    gw_wake_cancel(h[0], 1);
    ck_assert_uint_eq(gw_wake_held_bytes(w.wake), 400);
    ck_assert_ptr_nonnull(h[5] = hold(w.wake, r11, 600, res + 5));
    /* woken: every held request is answered, the bytes go back */
    admin(&srv, "HSET lizard:sbx:{sbx11} state running");
    publish(&srv, &w, "sbx11");
    ck_assert(run_until(&res[5].called, 3000));
    ck_assert_int_eq(res[1].called + res[3].called + res[5].called, 3);
    ck_assert_uint_eq(gw_wake_held_bytes(w.wake), 0);
    ck_assert_int_eq(atomic_load(&counters.held_bytes), 0);
    for (int i = 0; i != 6; ++i)
        if (i != 1 && i != 3 && i != 5)
            ck_assert_int_eq(res[i].called, 0);

    worker_dispose(&w);
    gw_sandbox_release(r11);
    gw_sandbox_release(r12);
    server_cleanup(&srv);
}
END_TEST

START_TEST(expire_all_answers_at_once)
{
    server_t srv;
    worker_t w;
    result_t res[2] = {{0}};

    server_tcp(&srv);
    reset_counters();
    worker_init(&w, &srv, (gw_wake_conf_t){0});
    put_sandbox(&srv, "sbx9", "starting", "auto");
    gw_sandbox_t *r9 = record("sbx9", GW_SANDBOX_STARTING, 0), *r10 = record("sbx10", GW_SANDBOX_STARTING, 0);
    ck_assert_ptr_nonnull(hold(w.wake, r9, 0, res + 0));
    ck_assert_ptr_nonnull(hold(w.wake, r10, 0, res + 1));
    gw_wake_expire_all(w.wake);
    ck_assert_int_eq(res[0].called, 1);
    ck_assert_int_eq(res[1].called, 1);
    ck_assert_int_eq(res[0].result, GW_WAKE_TIMEOUT);
    ck_assert_uint_eq(gw_wake_num_held(w.wake, NULL), 0);
    /* held after that: answered at the next loop turn, not at the 10 s deadline */
    result_t late = {0};
    ck_assert_ptr_nonnull(hold(w.wake, r9, 0, &late));
    ck_assert_int_eq(late.called, 0);
    ck_assert(run_until(&late.called, 1000));
    ck_assert_int_eq(late.result, GW_WAKE_TIMEOUT);
    gw_sandbox_release(r9);
    gw_sandbox_release(r10);
    worker_dispose(&w);
    server_cleanup(&srv);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {applies,
                            resume_request_then_publish_releases_all,
                            two_workers_one_resume_request,
                            lost_publish_is_made_up_by_the_recheck,
                            other_outcomes,
                            bounds_cancel_and_teardown,
                            expire_all_answers_at_once,
                            bytes_budget};
    return redis_fixture_main("wake", 60, NULL, NULL, tests, sizeof(tests) / sizeof(tests[0]));
}
