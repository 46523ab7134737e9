/*
 * upstream/held.c: the ledger the response memory budgets are checked
 * against. Its sums stay exact through any sequence of moves, a connection
 * that holds nothing is forgotten, and the victim rule resets, over the
 * worker's budget, any response that holds bytes and, over one
 * connection's, only that connection's.
 */
#include <check.h>
#include <stdlib.h>
#include "upstream/held.h"

/* Random moves of 64 responses over 8 connections against a model. */
START_TEST(test_sums_stay_exact)
{
    enum { RESPONSES = 64, CONNS = 8 };
    size_t held[RESPONSES] = {0}, model_conn[CONNS] = {0}, model_total = 0;
    gw_held_t *h = gw_held_new();
    unsigned seed = 7;
    int i, r, c, live;

    for (i = 0; i != 100000; ++i) {
        size_t now;
        r = rand_r(&seed) % RESPONSES;
        c = r % CONNS;
        now = rand_r(&seed) % 4 == 0 ? 0 : (size_t)(rand_r(&seed) % 300000);
        gw_held_move(h, (uint64_t)(c + 1) * 4096, held[r], now);
        model_conn[c] = model_conn[c] - held[r] + now;
        model_total = model_total - held[r] + now;
        held[r] = now;
        ck_assert_uint_eq(gw_held_total(h), model_total);
        ck_assert_uint_eq(gw_held_of(h, (uint64_t)(c + 1) * 4096), model_conn[c]);
    }
    for (c = 0, live = 0; c != CONNS; ++c)
        live += model_conn[c] != 0;
    ck_assert_uint_eq(gw_held_connections(h), (size_t)live);

    /* everything taken by the clients: nothing left, no connection remembered */
    for (r = 0; r != RESPONSES; ++r)
        gw_held_move(h, (uint64_t)(r % CONNS + 1) * 4096, held[r], 0);
    ck_assert_uint_eq(gw_held_total(h), 0);
    ck_assert_uint_eq(gw_held_connections(h), 0);
    ck_assert_uint_eq(gw_held_of(h, 4096), 0);
    gw_held_free(h);
}
END_TEST

/* Many short connections: only those holding something take an entry. */
START_TEST(test_connections_that_hold_nothing_are_forgotten)
{
    gw_held_t *h = gw_held_new();
    uint64_t conn;

    for (conn = 1; conn != 200001; ++conn) {
        gw_held_move(h, conn, 0, 1000);
        gw_held_move(h, conn, 1000, 0);
    }
    gw_held_move(h, 42, 0, 5);
    ck_assert_uint_eq(gw_held_connections(h), 1);
    ck_assert_uint_eq(gw_held_total(h), 5);
    gw_held_move(h, 42, 5, 5); /* no change: nothing moves */
    ck_assert_uint_eq(gw_held_of(h, 42), 5);
    gw_held_free(h);
}
END_TEST

START_TEST(test_budgets_and_victims)
{
    gw_held_t *h = gw_held_new();
    const uint64_t a = 1, b = 2;
    const size_t conn_max = 100, worker_max = 250;

    gw_held_move(h, a, 0, 90);
    gw_held_move(h, b, 0, 90);
    ck_assert(!gw_held_over(h, a, conn_max, worker_max));

    /* a over its own budget, the worker within its: only a's responses go */
    gw_held_move(h, a, 90, 120);
    ck_assert(gw_held_over(h, a, conn_max, worker_max));
    ck_assert(!gw_held_over(h, b, conn_max, worker_max));
    ck_assert(gw_held_is_victim(h, a, worker_max, a, 120));
    ck_assert(!gw_held_is_victim(h, a, worker_max, b, 90));
    ck_assert(!gw_held_is_victim(h, a, worker_max, a, 0)); /* a response holding nothing frees nothing */

    /* the worker over its budget: anyone's response that holds bytes */
    gw_held_move(h, b, 90, 99);
    gw_held_move(h, 3, 0, 40);
    ck_assert_uint_eq(gw_held_total(h), 259);
    ck_assert(gw_held_over(h, b, conn_max, worker_max));
    ck_assert(gw_held_is_victim(h, b, worker_max, a, 120));
    ck_assert(gw_held_is_victim(h, b, worker_max, 3, 40));
    ck_assert(!gw_held_is_victim(h, b, worker_max, 3, 0));

    /* after resetting a's response both hold */
    gw_held_move(h, a, 120, 0);
    ck_assert(!gw_held_over(h, a, conn_max, worker_max));
    ck_assert(!gw_held_over(h, b, conn_max, worker_max));
    gw_held_free(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("held");
    TCase *tc = tcase_create("held");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_sums_stay_exact);
    tcase_add_test(tc, test_connections_that_hold_nothing_are_forgotten);
    tcase_add_test(tc, test_budgets_and_victims);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
