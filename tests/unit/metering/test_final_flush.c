/*
 * metering/final_flush.c: with Redis down, everything pending goes to the
 * spill file and comes back at the next start. (Written to a real Redis:
 * tests/integration, test_metering and test_operations.)
 */
#include "metering_test.h"
START_TEST(test_final_flush_spills_when_redis_is_down)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_stats_t st;
    gw_netaddr_t addr;
    const char *err;

    /* nothing listens on port 1 */
    ck_assert_int_eq(gw_netaddr_parse("127.0.0.1:1", 0, &addr, &err), 0);
    gw_redis_conf_t rconf = {.addr = addr};
    gw_meter_set_project(meter, "sx", iov("px"), NOW);
    gw_meter_add(meter, "sx", 123, 45, NOW);
    gw_metering_submit(m, meter, NOW + 1);
    ck_assert_int_eq(gw_metering_final_flush(m, &rconf, 500), 0);
    ck_assert_uint_eq(count_lines(spill), 1);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_written, 1);
    gw_metering_free(m);

    m = new_metering(spill, NOW + 10);
    gw_metering_batch_t *b = gw_metering_next_batch(m);
    ck_assert_uint_eq(b->num_records, 1);
    ck_assert_str_eq(b->records[0].project, "px");
    ck_assert_uint_eq(b->records[0].egress, 123);
    ck_assert_uint_eq(b->records[0].ingress, 45);
    ck_assert_uint_eq(b->records[0].seq, NOW * GW_METERING_SEQ_PER_MS);
    gw_metering_batch_done(m, b, 1);
    gw_metering_free(m);
    gw_meter_free(meter);
}
END_TEST

static Suite *final_flush_suite(void)
{
    Suite *s = suite_create("final_flush");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_final_flush_spills_when_redis_is_down);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(final_flush_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
