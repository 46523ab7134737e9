/*
 * Unit tests for observe/metrics.c: the exposition is complete and valid
 * whatever its size (it was cut at 16 KiB once), a bound is refused rather
 * than cut, the Redis readiness follows each worker's reports, and what
 * each worker counts in its own block is shown summed.
 */
#define _GNU_SOURCE /* memmem */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "observe/metrics.h"

#define NUM_WORKERS 256

static gw_metrics_t metrics;
static h2o_context_t *contexts;
static h2o_mem_pool_t pool;

static void setup(void)
{
    size_t i;

    h2o_mem_init_pool(&pool);
    gw_metrics_init(&metrics, NUM_WORKERS);
    contexts = calloc(NUM_WORKERS, sizeof(*contexts));
    for (i = 0; i != NUM_WORKERS; ++i)
        metrics.workers[i].ctx = &contexts[i];
}

static void teardown(void)
{
    gw_metrics_dispose(&metrics);
    free(contexts);
    h2o_mem_clear_pool(&pool);
}

/* 1 when `line` is a sample of the text format: name, optional {labels}, a space, an unsigned integer. */
static int is_sample(const char *line, size_t len)
{
    const char *p = line, *end = line + len;

    if (p == end || !(*p >= 'a' && *p <= 'z'))
        return 0;
    while (p != end && ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
        ++p;
    if (p != end && *p == '{') {
        const char *close = memchr(p, '}', end - p);
        if (close == NULL || memchr(p, '\n', close - p) != NULL || close[-1] != '"')
            return 0;
        p = close + 1;
    }
    if (p == end || *p++ != ' ' || p == end)
        return 0;
    for (; p != end; ++p)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

START_TEST(exposition_over_16_kib_is_whole_and_valid)
{
    h2o_iovec_t out;
    const char *p, *end, *last_line = NULL;
    size_t lines = 0, samples = 0;

    gw_metrics_set_redis(&metrics, NUM_WORKERS - 1, 1);
    atomic_store(&metrics.workers[0].requests, 42);
    ck_assert_int_eq(gw_metrics_render(&metrics, &pool, GW_METRICS_MAX_BYTES, &out), 0);
    /* the old fixed buffer was 16 KiB: this exposition must not fit in it */
    ck_assert_uint_gt(out.len, 16384);
    ck_assert_int_eq(out.base[out.len - 1], '\n');
    for (p = out.base, end = out.base + out.len; p != end;) {
        const char *eol = memchr(p, '\n', end - p);
        ck_assert_ptr_nonnull(eol);
        if (eol - p >= 7 && (memcmp(p, "# HELP ", 7) == 0 || memcmp(p, "# TYPE ", 7) == 0)) {
            /* a comment */
        } else {
            ck_assert_msg(is_sample(p, eol - p), "not a sample: %.*s", (int)(eol - p), p);
            ++samples;
        }
        last_line = p;
        ++lines;
        p = eol + 1;
    }
    ck_assert_uint_gt(samples, 2 * NUM_WORKERS);
    ck_assert_ptr_nonnull(memmem(out.base, out.len, H2O_STRLIT("\nlizard_requests_total 42\n")));
    /* the last family, to its last worker */
    ck_assert(memcmp(last_line, H2O_STRLIT("lizard_worker_redis_connected{worker=\"255\"} 1\n")) == 0);
}
END_TEST

START_TEST(exposition_over_its_bound_is_refused_not_cut)
{
    h2o_iovec_t out = {NULL, 0};

    ck_assert_int_eq(gw_metrics_render(&metrics, &pool, 4096, &out), -1);
    ck_assert_ptr_null(out.base);
}
END_TEST

START_TEST(redis_ready_when_every_worker_is_connected)
{
    size_t i;

    ck_assert(!gw_metrics_redis_ready(&metrics));
    for (i = 0; i != NUM_WORKERS; ++i)
        gw_metrics_set_redis(&metrics, i, 1);
    ck_assert(gw_metrics_redis_ready(&metrics));
    /* a repeated report does not count twice */
    gw_metrics_set_redis(&metrics, 3, 1);
    gw_metrics_set_redis(&metrics, 3, 0);
    ck_assert(!gw_metrics_redis_ready(&metrics));
    gw_metrics_set_redis(&metrics, 3, 0);
    gw_metrics_set_redis(&metrics, 3, 1);
    ck_assert(gw_metrics_redis_ready(&metrics));
}
END_TEST

/* 1 when the exposition holds `line` (a whole line: "\n" included, and a line break or the start before it). */
static int has_line(h2o_iovec_t text, const char *line)
{
    size_t len = strlen(line);
    const char *p = text.base, *end = text.base + text.len, *hit;

    while ((hit = memmem(p, end - p, line, len)) != NULL) {
        if (hit == text.base || hit[-1] == '\n')
            return 1;
        p = hit + 1;
    }
    return 0;
}

START_TEST(two_workers_counts_are_summed)
{
    gw_metrics_t two;
    h2o_context_t ctx[2];
    h2o_iovec_t out;

    gw_metrics_init(&two, 2);
    two.workers[0].ctx = &ctx[0];
    two.workers[1].ctx = &ctx[1];
    memset(ctx, 0, sizeof(ctx));
    /* each block fills whole cache lines of its own */
    ck_assert_uint_eq(sizeof(gw_metrics_worker_t) % GW_CACHE_LINE, 0);
    ck_assert_uint_eq((uintptr_t)&two.workers[0] % GW_CACHE_LINE, 0);
    ck_assert_uint_eq((uintptr_t)&two.workers[1] % GW_CACHE_LINE, 0);
    ck_assert_ptr_eq(gw_metrics_worker_of(&two, &ctx[1]), &two.workers[1]);

    GW_COUNTER_ADD(&two.workers[0].requests, 3);
    GW_COUNTER_ADD(&two.workers[1].requests, 4);
    GW_COUNTER_ADD(&two.workers[0].responses_by_class[2], 5);
    GW_COUNTER_ADD(&two.workers[1].responses_by_class[2], 6);
    GW_COUNTER_ADD(&two.workers[1].errors_by_code[GW_ERR_SANDBOX_NOT_FOUND], 2);
    GW_COUNTER_ADD(&two.workers[0].in_flight, 1);
    GW_COUNTER_ADD(&two.workers[1].in_flight, 2);
    GW_COUNTER_ADD(&two.workers[0].routes.hits, 10);
    GW_COUNTER_ADD(&two.workers[1].routes.hits, 20);
    GW_COUNTER_ADD(&two.workers[0].proxy.ingress_bytes, 1000);
    GW_COUNTER_ADD(&two.workers[1].proxy.ingress_bytes, 234);
    GW_COUNTER_ADD(&two.workers[0].proxy.websockets_open, 2);
    GW_COUNTER_ADD(&two.workers[1].proxy.websockets_open, 1);
    GW_COUNTER_ADD(&two.workers[1].wake.held, 1);
    GW_COUNTER_ADD(&two.workers[0].wake.wake_ms_buckets[0], 1);
    GW_COUNTER_ADD(&two.workers[1].wake.wake_ms_buckets[1], 1);
    GW_COUNTER_ADD(&two.workers[1].refused_per_worker, 1);
    atomic_store(&two.workers[1].client_connections, 9);
    ck_assert_uint_eq(gw_metrics_in_flight(&two), 3);

    ck_assert_int_eq(gw_metrics_render(&two, &pool, GW_METRICS_MAX_BYTES, &out), 0);
    ck_assert(has_line(out, "lizard_requests_total 7\n"));
    ck_assert(has_line(out, "lizard_responses_total{class=\"2xx\"} 11\n"));
    ck_assert(has_line(out, "lizard_errors_total{code=\"sandbox_not_found\"} 2\n"));
    ck_assert(has_line(out, "lizard_in_flight_requests 3\n"));
    ck_assert(has_line(out, "lizard_route_cache_total{result=\"hit\"} 30\n"));
    ck_assert(has_line(out, "lizard_proxied_bytes_total{direction=\"ingress\"} 1234\n"));
    ck_assert(has_line(out, "lizard_websockets_open 3\n"));
    ck_assert(has_line(out, "lizard_wake_held_requests 1\n"));
    ck_assert(has_line(out, "lizard_wake_milliseconds_bucket{le=\"250\"} 1\n"));
    ck_assert(has_line(out, "lizard_wake_milliseconds_bucket{le=\"500\"} 2\n"));
    ck_assert(has_line(out, "lizard_wake_milliseconds_count 2\n"));
    ck_assert(has_line(out, "lizard_refused_connections_total{limit=\"worker\"} 1\n"));
    /* per-worker gauges stay per worker */
    ck_assert(has_line(out, "lizard_worker_client_connections{worker=\"0\"} 0\n"));
    ck_assert(has_line(out, "lizard_worker_client_connections{worker=\"1\"} 9\n"));
    gw_metrics_dispose(&two);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, exposition_over_16_kib_is_whole_and_valid);
    tcase_add_test(tc, exposition_over_its_bound_is_refused_not_cut);
    tcase_add_test(tc, redis_ready_when_every_worker_is_connected);
    tcase_add_test(tc, two_workers_counts_are_summed);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
