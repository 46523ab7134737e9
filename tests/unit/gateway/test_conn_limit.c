/* Unit tests for gateway/conn_limit.c: per-sandbox connection slots. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "gateway/conn_limit.h"

START_TEST(test_limit_per_sandbox)
{
    gw_conn_limit_t *l = gw_conn_limit_new(2);

    ck_assert_int_eq(gw_conn_limit_acquire(l, "a"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, "a"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, "a"), 0);
    /* another sandbox is not affected */
    ck_assert_int_eq(gw_conn_limit_acquire(l, "b"), 1);
    ck_assert_uint_eq(gw_conn_limit_count(l, "a"), 2);
    gw_conn_limit_release(l, "a");
    ck_assert_int_eq(gw_conn_limit_acquire(l, "a"), 1);
    gw_conn_limit_release(l, "a");
    gw_conn_limit_release(l, "a");
    gw_conn_limit_release(l, "b");
    ck_assert_uint_eq(gw_conn_limit_count(l, "a"), 0);
    /* a release without a slot never goes below zero */
    gw_conn_limit_release(l, "a");
    ck_assert_int_eq(gw_conn_limit_acquire(l, "a"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, "a"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, "a"), 0);
    gw_conn_limit_free(l);
}
END_TEST

START_TEST(test_zero_is_unlimited_and_many_sandboxes)
{
    gw_conn_limit_t *l = gw_conn_limit_new(0);
    char id[16];

    for (int i = 0; i != 5000; ++i) {
        snprintf(id, sizeof(id), "s%d", i);
        ck_assert_int_eq(gw_conn_limit_acquire(l, id), 1);
        ck_assert_int_eq(gw_conn_limit_acquire(l, id), 1);
    }
    for (int i = 0; i != 5000; ++i) {
        snprintf(id, sizeof(id), "s%d", i);
        ck_assert_uint_eq(gw_conn_limit_count(l, id), 2);
        gw_conn_limit_release(l, id);
        gw_conn_limit_release(l, id);
        ck_assert_uint_eq(gw_conn_limit_count(l, id), 0);
    }
    gw_conn_limit_free(l);
}
END_TEST

static gw_conn_limit_t *shared;

static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i != 20000; ++i) {
        if (gw_conn_limit_acquire(shared, "hot"))
            gw_conn_limit_release(shared, "hot");
    }
    return NULL;
}

/* Workers take and give back slots at once: the count ends at zero and the
 * limit is never exceeded (ThreadSanitizer-clean by construction: one mutex). */
START_TEST(test_threads)
{
    pthread_t t[4];

    shared = gw_conn_limit_new(3);
    for (int i = 0; i != 4; ++i)
        pthread_create(t + i, NULL, hammer, NULL);
    for (int i = 0; i != 4; ++i)
        pthread_join(t[i], NULL);
    ck_assert_uint_eq(gw_conn_limit_count(shared, "hot"), 0);
    gw_conn_limit_free(shared);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conn_limit");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_limit_per_sandbox);
    tcase_add_test(tc, test_zero_is_unlimited_and_many_sandboxes);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
