/* Unit tests for common/loop_timeout.c: one gw_timeout_t per (loop, duration), entries of several owners firing
 * in the order they expire, the last release giving it back to the loop (h2o_evloop_destroy asserts that none is
 * left), an adopted one kept. */
#include <check.h>
#include <stdlib.h>
#include "common/engine.h"
#include "common/loop_timeout.h"

static int order[4], num_fired;

typedef struct {
    gw_timer_t entry;
    int id;
} item_t;

static void on_item(gw_timer_t *e)
{
    order[num_fired++] = H2O_STRUCT_FROM_MEMBER(item_t, entry, e)->id;
}

START_TEST(one_timeout_per_duration_and_loop)
{
    h2o_loop_t *a = h2o_evloop_create(), *b = h2o_evloop_create();
    gw_timeout_t *a10 = gw_loop_timeout_acquire(a, 10), *a10again = gw_loop_timeout_acquire(a, 10);
    gw_timeout_t *a20 = gw_loop_timeout_acquire(a, 20), *b10 = gw_loop_timeout_acquire(b, 10);

    ck_assert_ptr_eq(a10, a10again);
    ck_assert_ptr_ne(a10, a20);
    ck_assert_ptr_ne(a10, b10);
    ck_assert_uint_eq(gw_timeout_ms(a10), 10);
    ck_assert_uint_eq(gw_timeout_ms(a20), 20);
    gw_loop_timeout_release(a, a10);
    ck_assert_ptr_eq(gw_loop_timeout_acquire(a, 10), a10); /* one reference was left */
    gw_loop_timeout_release(a, a10);
    gw_loop_timeout_release(a, a10again);
    gw_loop_timeout_release(a, a20);
    gw_loop_timeout_release(b, b10);
    gw_loop_timeout_release(b, NULL);
    h2o_evloop_destroy(a); /* asserts that the loop has no timeout left */
    h2o_evloop_destroy(b);
}
END_TEST

START_TEST(entries_of_two_owners_fire_in_their_order)
{
    h2o_loop_t *loop = h2o_evloop_create();
    gw_timeout_t *first = gw_loop_timeout_acquire(loop, 1), *second = gw_loop_timeout_acquire(loop, 1);
    item_t items[3] = {
        {.entry = {.cb = on_item}, .id = 1}, {.entry = {.cb = on_item}, .id = 2}, {.entry = {.cb = on_item}, .id = 3}};

    num_fired = 0;
    gw_timer_link(loop, first, &items[0].entry);
    gw_timer_link(loop, second, &items[1].entry);
    gw_timer_link(loop, first, &items[2].entry);
    while (num_fired != 3)
        h2o_evloop_run(loop, 10);
    ck_assert_int_eq(order[0], 1);
    ck_assert_int_eq(order[1], 2);
    ck_assert_int_eq(order[2], 3);
    gw_loop_timeout_release(loop, first);
    gw_loop_timeout_release(loop, second);
    h2o_evloop_destroy(loop);
}
END_TEST

START_TEST(an_adopted_timeout_is_shared_and_kept)
{
    h2o_loop_t *loop = h2o_evloop_create();
    gw_timeout_t own;

    gw_timeout_init(loop, &own, 1000);
    gw_loop_timeout_adopt(loop, &own);
    gw_timeout_t *t = gw_loop_timeout_acquire(loop, 1000);
    ck_assert_ptr_eq(t, &own);
    gw_loop_timeout_release(loop, t);
    ck_assert_ptr_eq(gw_loop_timeout_acquire(loop, 1000), &own); /* not disposed by the last user */
    gw_loop_timeout_release(loop, &own);
    /* the adopted one stays registered with this loop (a worker's context is never disposed): the loop is not
     * destroyed here, as a worker's is not */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loop_timeout");
    TCase *tc = tcase_create("loop_timeout");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, one_timeout_per_duration_and_loop);
    tcase_add_test(tc, entries_of_two_owners_fire_in_their_order);
    tcase_add_test(tc, an_adopted_timeout_is_shared_and_kept);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
