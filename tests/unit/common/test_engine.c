/* Unit tests for common/engine.h and common/recycle.h, the layer between the gateway and its engine (issue 40):
 * the delay timer takes a new delay at each link and never fires a 0 at once, our free list keeps at most `max`
 * objects and hands the last one kept back first, and an unlinked timer unlinks as a no-op. */
#include <check.h>
#include <stdlib.h>
#include "common/engine.h"
#include "common/recycle.h"

static int fired;

static void on_fire(gw_timer_t *t)
{
    (void)t;
    ++fired;
}

static void run_until_fired(h2o_loop_t *loop, int want)
{
    int turns;

    for (turns = 0; fired < want && turns != 500; ++turns)
        h2o_evloop_run(loop, 10);
}

START_TEST(a_delay_timer_takes_any_delay_each_time)
{
    h2o_loop_t *loop = h2o_evloop_create();
    gw_delay_timer_t t;
    uint64_t at;

    fired = 0;
    gw_delay_timer_init(loop, &t, on_fire);
    ck_assert(!gw_timer_is_linked(&t.entry));
    gw_timer_unlink(&t.entry); /* unlinked: a no-op */
    at = h2o_now(loop);
    gw_delay_timer_link(loop, &t, 50);
    gw_delay_timer_link(loop, &t, 30); /* re-linked: the new delay, one firing */
    ck_assert_uint_eq(gw_timeout_ms(&t.timeout), 30);
    run_until_fired(loop, 1);
    ck_assert_int_eq(fired, 1);
    ck_assert_uint_ge(h2o_now(loop) - at, 30);
    ck_assert(!gw_timer_is_linked(&t.entry));
    gw_delay_timer_link(loop, &t, 0); /* taken as 1 ms: h2o 2.2.5 would fire a re-linked 0 in the same turn */
    ck_assert_uint_eq(gw_timeout_ms(&t.timeout), 1);
    run_until_fired(loop, 2);
    ck_assert_int_eq(fired, 2);
    gw_delay_timer_link(loop, &t, 10000);
    gw_delay_timer_dispose(loop, &t); /* unlinks what is linked */
    h2o_evloop_destroy(loop);         /* asserts that the loop has no timeout left */
}
END_TEST

START_TEST(the_free_list_keeps_at_most_max_last_in_first_out)
{
    gw_recycle_t r = {.max = 2};
    void *a = gw_recycle_alloc(&r, 32), *b = gw_recycle_alloc(&r, 32), *c = gw_recycle_alloc(&r, 32);

    ck_assert_uint_eq(r.cnt, 0);
    gw_recycle_free(&r, a);
    gw_recycle_free(&r, b);
    gw_recycle_free(&r, c); /* past max: freed (LeakSanitizer checks it) */
    ck_assert_uint_eq(r.cnt, 2);
    ck_assert_ptr_eq(gw_recycle_alloc(&r, 32), b);
    ck_assert_ptr_eq(gw_recycle_alloc(&r, 32), a);
    ck_assert_uint_eq(r.cnt, 0);
    gw_recycle_free(&r, a);
    gw_recycle_free(&r, b);
    gw_recycle_clear(&r); /* frees both; r stays usable */
    ck_assert_uint_eq(r.cnt, 0);
    a = gw_recycle_alloc(&r, 32);
    gw_recycle_free(&r, a);
    gw_recycle_clear(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("engine");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, a_delay_timer_takes_any_delay_each_time);
    tcase_add_test(tc, the_free_list_keeps_at_most_max_last_in_first_out);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
