/*
 * metering/worker_meter.c: the one way a worker's bytes reach the queue:
 * billed with the project its route named, activity unless no_activity,
 * and everything handed over when the worker stops.
 */
#include "metering_test.h"
#include "metering/worker_meter.h"
#include "routing/ingress.h"

/* long enough that no tick fires: the test hands over with gw_worker_meter_free */
#define NO_TICK_MS 3600000

static gw_worker_meter_t *new_worker_meter(h2o_loop_t *loop, gw_metering_t *m)
{
    gw_worker_meter_conf_t conf = {.metering = m, .prefix = "lizard:", .flush_interval_ms = NO_TICK_MS};
    return gw_worker_meter_new(loop, &conf);
}

START_TEST(test_bytes_are_billed_with_their_route)
{
    h2o_loop_t *loop = h2o_evloop_create();
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_worker_meter_t *wm = new_worker_meter(loop, m);
    gw_metering_batch_t *b;
    const gw_metering_record_t *r;

    gw_worker_meter_set_route(wm, "sbx1", iov("proj-a"), 1000000);
    gw_worker_meter_set_route(wm, "sbx3", iov("proj-c"), GW_EGRESS_QUOTA_NONE);
    gw_worker_meter_add(wm, "sbx1", 0, 300, 0);
    gw_worker_meter_add(wm, "sbx3", 1, 0, 0);
    gw_worker_meter_add(wm, "sbx1", 5120, 0, 0);
    gw_worker_meter_add(wm, "sbx2", 7, 9, 1); /* never routed: project unknown */
    gw_worker_meter_free(wm);                 /* the worker stops: its counts go to the queue */
    ck_assert_uint_eq(gw_metering_seal(m, 0), 1);
    b = gw_metering_next_batch(m);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->num_records, 3);
    r = find(b, "sbx1");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->project, "proj-a");
    ck_assert_uint_eq(r->egress, 5120);
    ck_assert_uint_eq(r->ingress, 300);
    ck_assert_uint_eq(r->egress_quota, 1000000); /* the route's quota, with its project in one call */
    r = find(b, "sbx3");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->project, "proj-c");
    ck_assert_uint_eq(r->egress_quota, 0); /* no quota */
    r = find(b, "sbx2");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->project, "");
    ck_assert_uint_eq(r->egress, 7);
    ck_assert_uint_eq(r->ingress, 9);
    ck_assert_uint_eq(r->egress_quota, 0);
    batch_done(m, b, 1);
    gw_metering_free(m);
    h2o_evloop_destroy(loop);
}
END_TEST

START_TEST(test_activity_unless_no_activity)
{
    h2o_loop_t *loop = h2o_evloop_create();
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_worker_meter_t *wm = new_worker_meter(loop, m);

    gw_worker_meter_add(wm, "sbx1", 1, 0, 0);
    gw_worker_meter_add(wm, "sbx2", 1, 0, 1); /* X-Lizard-No-Activity: billed, not activity */
    gw_worker_meter_free(wm);
    ck_assert_ptr_nonnull(m->activity);
    ck_assert_uint_eq(gw_activity_num_pending(m->activity), 1);
    gw_metering_free(m);
    h2o_evloop_destroy(loop);
}
END_TEST

START_TEST(test_free_null)
{
    gw_worker_meter_free(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_meter");
    TCase *tc = tcase_create("worker_meter");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_bytes_are_billed_with_their_route);
    tcase_add_test(tc, test_activity_unless_no_activity);
    tcase_add_test(tc, test_free_null);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
