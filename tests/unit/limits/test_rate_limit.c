/* Unit tests for limits/rate_limit.c: req_rate's token buckets (burst 2 x
 * rate), one per sandbox, shared by threads without a lock. The clock is
 * passed in, so every count here is exact. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "limits/rate_limit.h"

#define SEC 1000000000ull
#define T0 (1000 * SEC) /* any start: a fresh bucket is full */

START_TEST(test_burst_then_rate)
{
    gw_rate_limit_t *l = gw_rate_limit_new();
    int i, admitted = 0;

    for (i = 0; i != 100; ++i)
        admitted += gw_rate_limit_take(l, "sbx", 10, T0) == 0;
    ck_assert_int_eq(admitted, 20); /* the burst: 2 x rate */
    /* refused with Retry-After of at least one second */
    ck_assert_uint_ge(gw_rate_limit_take(l, "sbx", 10, T0), 1);
    /* half a second later: 5 more tokens */
    for (i = 0, admitted = 0; i != 100; ++i)
        admitted += gw_rate_limit_take(l, "sbx", 10, T0 + SEC / 2) == 0;
    ck_assert_int_eq(admitted, 5);
    /* another sandbox has its own bucket; rate 0 is unlimited */
    ck_assert_uint_eq(gw_rate_limit_take(l, "other", 10, T0), 0);
    for (i = 0; i != 1000; ++i)
        ck_assert_uint_eq(gw_rate_limit_take(l, "free", 0, T0), 0);
    /* idle long enough: full again, not more than full */
    for (i = 0, admitted = 0; i != 100; ++i)
        admitted += gw_rate_limit_take(l, "sbx", 10, T0 + 3600 * SEC) == 0;
    ck_assert_int_eq(admitted, 20);
    gw_rate_limit_free(l);
}
END_TEST

START_TEST(test_retry_after_is_whole_seconds)
{
    gw_rate_limit_t *l = gw_rate_limit_new();
    uint32_t wait;

    /* rate 1, burst 2: the third request waits one second */
    ck_assert_uint_eq(gw_rate_limit_take(l, "slow", 1, T0), 0);
    ck_assert_uint_eq(gw_rate_limit_take(l, "slow", 1, T0), 0);
    wait = gw_rate_limit_take(l, "slow", 1, T0);
    ck_assert_uint_eq(wait, 1);
    /* after it, one token */
    ck_assert_uint_eq(gw_rate_limit_take(l, "slow", 1, T0 + wait * SEC), 0);
    ck_assert_uint_ge(gw_rate_limit_take(l, "slow", 1, T0 + wait * SEC), 1);
    gw_rate_limit_free(l);
}
END_TEST

START_TEST(test_many_sandboxes_share_the_table)
{
    gw_rate_limit_t *l = gw_rate_limit_new();
    char key[32];
    int i, refused = 0;

    /* more sandboxes than slots, each using one token: none is refused, and
     * their buckets (full again a second later) free the slots */
    for (i = 0; i != 3 * GW_RATE_LIMIT_SLOTS; ++i) {
        snprintf(key, sizeof(key), "s%d", i);
        refused += gw_rate_limit_take(l, key, 1, T0 + (uint64_t)(i / GW_RATE_LIMIT_SLOTS) * 10 * SEC) != 0;
    }
    ck_assert_int_eq(refused, 0);
    gw_rate_limit_free(l);
}
END_TEST

START_TEST(test_any_burst_and_how_full_it_is)
{
    gw_rate_limit_t *l = gw_rate_limit_new_watched();
    int i, admitted = 0;

    /* nothing taken yet: no bucket is empty */
    ck_assert_int_eq(gw_rate_limit_below(l, "10.0.0.1", 10, 100, 1, T0), 0);
    /* a bucket of 100 refilled at 10 a second: 100 at once, then one every 100 ms */
    for (i = 0; i != 150; ++i)
        admitted += gw_rate_limit_take_burst(l, "10.0.0.1", 10, 100, T0) == 0;
    ck_assert_int_eq(admitted, 100);
    ck_assert_int_eq(gw_rate_limit_below(l, "10.0.0.1", 10, 100, 1, T0), 1);
    /* the question takes nothing: still empty, and another address is not */
    ck_assert_int_eq(gw_rate_limit_below(l, "10.0.0.1", 10, 100, 1, T0), 1);
    ck_assert_int_eq(gw_rate_limit_below(l, "10.0.0.2", 10, 100, 1, T0), 0);
    /* 100 ms later one token is back: not empty, one take, empty again */
    ck_assert_int_eq(gw_rate_limit_below(l, "10.0.0.1", 10, 100, 1, T0 + SEC / 10), 0);
    ck_assert_uint_eq(gw_rate_limit_take_burst(l, "10.0.0.1", 10, 100, T0 + SEC / 10), 0);
    ck_assert_int_eq(gw_rate_limit_below(l, "10.0.0.1", 10, 100, 1, T0 + SEC / 10), 1);
    ck_assert_uint_ge(gw_rate_limit_take_burst(l, "10.0.0.1", 10, 100, T0 + SEC / 10), 1);
    /* below half the bucket until 50 tokens are back: 5 s */
    ck_assert_int_eq(gw_rate_limit_below(l, "10.0.0.1", 10, 100, 50, T0 + SEC / 10 + 4900 * (SEC / 1000)), 1);
    ck_assert_int_eq(gw_rate_limit_below(l, "10.0.0.1", 10, 100, 50, T0 + SEC / 10 + 5000 * (SEC / 1000)), 0);
    /* served streams do not refill it, time does: 10 s later it is full again */
    for (i = 0, admitted = 0; i != 150; ++i)
        admitted += gw_rate_limit_take_burst(l, "10.0.0.1", 10, 100, T0 + 11 * SEC) == 0;
    ck_assert_int_eq(admitted, 100);
    gw_rate_limit_free(l);

    /* a table not made watched never answers empty */
    l = gw_rate_limit_new();
    for (i = 0; i != 5; ++i)
        gw_rate_limit_take_burst(l, "k", 1, 1, T0);
    ck_assert_int_eq(gw_rate_limit_below(l, "k", 1, 1, 1, T0), 0);
    gw_rate_limit_free(l);
}
END_TEST

#define THREADS 4
#define TRIES 20000
static gw_rate_limit_t *shared;
static atomic_int admitted_total;

/* One worker: hammers the same sandbox at one frozen instant. */
static void *hammer(void *arg)
{
    int i, n = 0;
    (void)arg;
    for (i = 0; i != TRIES; ++i)
        n += gw_rate_limit_take(shared, "hot", 50, T0) == 0;
    atomic_fetch_add(&admitted_total, n);
    return NULL;
}

START_TEST(test_threads_share_one_bucket)
{
    pthread_t t[THREADS];
    int i;

    shared = gw_rate_limit_new();
    atomic_store(&admitted_total, 0);
    for (i = 0; i != THREADS; ++i)
        pthread_create(t + i, NULL, hammer, NULL);
    for (i = 0; i != THREADS; ++i)
        pthread_join(t[i], NULL);
    /* exactly the burst across all threads: no token is taken twice, none lost */
    ck_assert_int_eq(atomic_load(&admitted_total), 100);
    gw_rate_limit_free(shared);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rate_limit");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_burst_then_rate);
    tcase_add_test(tc, test_retry_after_is_whole_seconds);
    tcase_add_test(tc, test_many_sandboxes_share_the_table);
    tcase_add_test(tc, test_any_burst_and_how_full_it_is);
    tcase_add_test(tc, test_threads_share_one_bucket);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
