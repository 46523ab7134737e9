/* Unit tests for gateway/conn_limit.c: per-sandbox connection slots. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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

#define THREADS 4
#define MAX 3
#define ROUNDS 200

static gw_conn_limit_t *shared;
static atomic_int held;      /* slots held now, by the threads' own count */
static atomic_int most_held; /* the most ever held at once */
static atomic_int granted, refused;
static atomic_int granted_in_round[ROUNDS];
static pthread_barrier_t barrier;

/* Counted up after a grant and down before the release: never more than the
 * limiter holds, so above MAX means the limiter let one too many through. */
static void hold(void)
{
    int now = atomic_fetch_add(&held, 1) + 1, most = atomic_load(&most_held);
    while (now > most && !atomic_compare_exchange_weak(&most_held, &most, now))
        ;
}

static void *hammer(void *arg)
{
    (void)arg;
    for (int i = 0; i != 20000; ++i) {
        if (gw_conn_limit_acquire(shared, "hot")) {
            hold();
            atomic_fetch_add(&granted, 1);
            sched_yield(); /* hold it a while: the others meet the limit */
            atomic_fetch_sub(&held, 1);
            gw_conn_limit_release(shared, "hot");
        } else {
            atomic_fetch_add(&refused, 1);
        }
    }
    return NULL;
}

/* Free-running: workers take and give back slots at once; at no moment are
 * more than MAX held, and the count ends at zero (one mutex: race-free by
 * construction). */
START_TEST(test_threads_never_exceed_the_limit)
{
    pthread_t t[THREADS];

    shared = gw_conn_limit_new(MAX);
    for (int i = 0; i != THREADS; ++i)
        pthread_create(t + i, NULL, hammer, NULL);
    for (int i = 0; i != THREADS; ++i)
        pthread_join(t[i], NULL);
    int most = atomic_load(&most_held), total = atomic_load(&granted) + atomic_load(&refused);
    ck_assert_int_le(most, MAX);
    ck_assert_int_ge(most, 1);
    ck_assert_int_eq(total, THREADS * 20000);
    ck_assert_uint_eq(gw_conn_limit_count(shared, "hot"), 0);
    gw_conn_limit_free(shared);
}
END_TEST

static void *rounds(void *arg)
{
    (void)arg;
    for (int r = 0; r != ROUNDS; ++r) {
        int got = gw_conn_limit_acquire(shared, "round");
        if (got) {
            hold();
            atomic_fetch_add(&granted_in_round[r], 1);
        }
        /* every thread has asked and nobody has let go */
        pthread_barrier_wait(&barrier);
        if (got) {
            atomic_fetch_sub(&held, 1);
            gw_conn_limit_release(shared, "round");
        }
        /* every slot is back before the next round */
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

/* In lock step, whatever the scheduling: THREADS ask at once while nobody
 * releases, so exactly MAX are granted in every round, never more. */
START_TEST(test_threads_in_rounds_get_exactly_the_limit)
{
    pthread_t t[THREADS];

    shared = gw_conn_limit_new(MAX);
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    for (int i = 0; i != THREADS; ++i)
        pthread_create(t + i, NULL, rounds, NULL);
    for (int i = 0; i != THREADS; ++i)
        pthread_join(t[i], NULL);
    for (int r = 0; r != ROUNDS; ++r) {
        int n = atomic_load(&granted_in_round[r]);
        ck_assert_msg(n == MAX, "round %d: %d granted", r, n);
    }
    int most = atomic_load(&most_held);
    ck_assert_int_le(most, MAX);
    ck_assert_uint_eq(gw_conn_limit_count(shared, "round"), 0);
    pthread_barrier_destroy(&barrier);
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
    tcase_add_test(tc, test_threads_never_exceed_the_limit);
    tcase_add_test(tc, test_threads_in_rounds_get_exactly_the_limit);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
