/* Unit tests for limits/conn_limit.c: connection slots per key, counted per
 * worker and summed on read. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "limits/conn_limit.h"

START_TEST(test_limit_per_sandbox)
{
    gw_conn_limit_t *l = gw_conn_limit_new(2, 1);

    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "a"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "a"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "a"), 0);
    /* another sandbox is not affected */
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "b"), 1);
    ck_assert_uint_eq(gw_conn_limit_count(l, "a"), 2);
    gw_conn_limit_release(l, 0, "a");
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "a"), 1);
    gw_conn_limit_release(l, 0, "a");
    gw_conn_limit_release(l, 0, "a");
    gw_conn_limit_release(l, 0, "b");
    ck_assert_uint_eq(gw_conn_limit_count(l, "a"), 0);
    /* a release without a slot never goes below zero */
    gw_conn_limit_release(l, 0, "a");
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "a"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "a"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "a"), 0);
    /* freed with slots still held: nothing leaks (LSan in the ASan tree) */
    gw_conn_limit_free(l);
}
END_TEST

START_TEST(test_key_too_long)
{
    gw_conn_limit_t *l = gw_conn_limit_new(0, 1);
    char key[GW_CONN_LIMIT_KEY_MAX + 2];

    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, key), 0);
    gw_conn_limit_release(l, 0, key);
    ck_assert_uint_eq(gw_conn_limit_count(l, key), 0);
    key[sizeof(key) - 2] = '\0';
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, key), 1);
    gw_conn_limit_release(l, 0, key);
    gw_conn_limit_free(l);
}
END_TEST

START_TEST(test_zero_is_unlimited_and_many_sandboxes)
{
    gw_conn_limit_t *l = gw_conn_limit_new(0, 3);
    char id[16];

    for (int i = 0; i != 5000; ++i) {
        snprintf(id, sizeof(id), "s%d", i);
        ck_assert_int_eq(gw_conn_limit_acquire(l, i % 3, id), 1);
        ck_assert_int_eq(gw_conn_limit_acquire(l, (i + 1) % 3, id), 1);
    }
    for (int i = 0; i != 5000; ++i) {
        snprintf(id, sizeof(id), "s%d", i);
        ck_assert_uint_eq(gw_conn_limit_count(l, id), 2);
        gw_conn_limit_release(l, i % 3, id);
        gw_conn_limit_release(l, (i + 1) % 3, id);
        ck_assert_uint_eq(gw_conn_limit_count(l, id), 0);
    }
    gw_conn_limit_free(l);
}
END_TEST

/* Two workers share one limit: their counts add up, a refusal on one leaves
 * nothing behind, a release on one makes room for the other. */
START_TEST(test_two_workers_share_the_limit)
{
    gw_conn_limit_t *l = gw_conn_limit_new(3, 2);

    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "s"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 1, "s"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "s"), 1);
    ck_assert_uint_eq(gw_conn_limit_count(l, "s"), 3);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 1, "s"), 0);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "s"), 0);
    ck_assert_uint_eq(gw_conn_limit_count(l, "s"), 3);
    /* a slot given back by worker 0 is taken by worker 1 */
    gw_conn_limit_release(l, 0, "s");
    ck_assert_uint_eq(gw_conn_limit_count(l, "s"), 2);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 1, "s"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "s"), 0);
    /* a release by a worker that holds nothing of the key changes nothing */
    gw_conn_limit_release(l, 0, "other");
    ck_assert_uint_eq(gw_conn_limit_count(l, "s"), 3);
    /* worker 0 gives back its last slot: worker 1 still holds two */
    gw_conn_limit_release(l, 0, "s");
    ck_assert_uint_eq(gw_conn_limit_count(l, "s"), 2);
    gw_conn_limit_release(l, 0, "s"); /* nothing held there any more */
    ck_assert_uint_eq(gw_conn_limit_count(l, "s"), 2);
    gw_conn_limit_release(l, 1, "s");
    gw_conn_limit_release(l, 1, "s");
    ck_assert_uint_eq(gw_conn_limit_count(l, "s"), 0);
    /* every entry is gone (LSan would see what is not): a new round starts
     * from zero on both workers */
    ck_assert_int_eq(gw_conn_limit_acquire(l, 1, "s"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 1, "s"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 1, "s"), 1);
    ck_assert_int_eq(gw_conn_limit_acquire(l, 0, "s"), 0);
    for (int i = 0; i != 3; ++i)
        gw_conn_limit_release(l, 1, "s");
    ck_assert_uint_eq(gw_conn_limit_count(l, "s"), 0);
    gw_conn_limit_free(l);
}
END_TEST

#define THREADS 4
#define MAX 3      /* below THREADS: every acquire near the limit, exact */
#define HOT_MAX 10 /* above THREADS: acquires far from it lock nothing */
#define ITERATIONS 20000

static gw_conn_limit_t *shared;
static atomic_int held;      /* slots of "hot" held now, by the threads' own count */
static atomic_int most_held; /* the most ever held at once */
static atomic_int granted, refused;

/* Counted up after a grant and down before the release: never more than the
 * limiter holds, so above the bound means the limiter let too many through. */
static void hold(void)
{
    int now = atomic_fetch_add(&held, 1) + 1, most = atomic_load(&most_held);
    while (now > most && !atomic_compare_exchange_weak(&most_held, &most, now))
        ;
}

/* One worker thread: takes and gives back slots of one hot key, shared with
 * every thread, and of a key of its own (unlimited by the others). */
static void *hammer(void *arg)
{
    size_t worker = (size_t)(uintptr_t)arg;
    char own[16];
    int got[2];

    snprintf(own, sizeof(own), "own%zu", worker);
    for (int i = 0; i != ITERATIONS; ++i) {
        int got_own = gw_conn_limit_acquire(shared, worker, own);
        ck_assert_int_eq(got_own, 1); /* nobody else holds it */
        /* two slots at a time, so that the count moves across the limit's
         * fast and locked ranges */
        for (int j = 0; j != 2; ++j) {
            if ((got[j] = gw_conn_limit_acquire(shared, worker, "hot"))) {
                hold();
                atomic_fetch_add(&granted, 1);
            } else {
                atomic_fetch_add(&refused, 1);
            }
        }
        sched_yield(); /* hold them a while: the others meet the limit */
        for (int j = 0; j != 2; ++j) {
            if (got[j]) {
                atomic_fetch_sub(&held, 1);
                gw_conn_limit_release(shared, worker, "hot");
            }
        }
        if (got_own)
            gw_conn_limit_release(shared, worker, own);
    }
    return NULL;
}

/* Free-running: workers take and give back slots at once; at no moment are
 * more than HOT_MAX + (THREADS - 1) held (the bound of conn_limit.h), and
 * every count ends at zero with every entry freed. */
START_TEST(test_threads_stay_within_the_bound)
{
    pthread_t t[THREADS];

    shared = gw_conn_limit_new(HOT_MAX, THREADS);
    for (uintptr_t i = 0; i != THREADS; ++i)
        pthread_create(t + i, NULL, hammer, (void *)i);
    for (int i = 0; i != THREADS; ++i)
        pthread_join(t[i], NULL);
    int most = atomic_load(&most_held), total = atomic_load(&granted) + atomic_load(&refused);
    ck_assert_int_le(most, HOT_MAX + THREADS - 1);
    ck_assert_int_ge(most, 1);
    ck_assert_int_ge(atomic_load(&granted), 1);
    ck_assert_int_eq(total, 2 * THREADS * ITERATIONS);
    ck_assert_uint_eq(gw_conn_limit_count(shared, "hot"), 0);
    for (int i = 0; i != THREADS; ++i) {
        char own[16];
        snprintf(own, sizeof(own), "own%d", i);
        ck_assert_uint_eq(gw_conn_limit_count(shared, own), 0);
    }
    gw_conn_limit_free(shared);
}
END_TEST

#define ROUNDS 200
static atomic_int granted_in_round[ROUNDS];
static pthread_barrier_t barrier;

static void *rounds(void *arg)
{
    size_t worker = (size_t)(uintptr_t)arg;

    for (int r = 0; r != ROUNDS; ++r) {
        int got = gw_conn_limit_acquire(shared, worker, "round");
        if (got)
            atomic_fetch_add(&granted_in_round[r], 1);
        /* every thread has asked and nobody has let go */
        pthread_barrier_wait(&barrier);
        if (got)
            gw_conn_limit_release(shared, worker, "round");
        /* every slot is back before the next round */
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

/* In lock step, whatever the scheduling: THREADS ask at once while nobody
 * releases. MAX is below THREADS, so every acquire is near the limit and
 * locked: exactly MAX are granted in every round. */
START_TEST(test_threads_in_rounds_get_exactly_the_limit)
{
    pthread_t t[THREADS];

    shared = gw_conn_limit_new(MAX, THREADS);
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, THREADS), 0);
    for (uintptr_t i = 0; i != THREADS; ++i)
        pthread_create(t + i, NULL, rounds, (void *)i);
    for (int i = 0; i != THREADS; ++i)
        pthread_join(t[i], NULL);
    for (int r = 0; r != ROUNDS; ++r) {
        int n = atomic_load(&granted_in_round[r]);
        ck_assert_msg(n == MAX, "round %d: %d granted", r, n);
    }
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
    tcase_add_test(tc, test_key_too_long);
    tcase_add_test(tc, test_zero_is_unlimited_and_many_sandboxes);
    tcase_add_test(tc, test_two_workers_share_the_limit);
    tcase_add_test(tc, test_threads_stay_within_the_bound);
    tcase_add_test(tc, test_threads_in_rounds_get_exactly_the_limit);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
