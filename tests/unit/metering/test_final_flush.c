/*
 * metering/final_flush.c: written to a real redis-server over TCP and over a
 * unix socket with a password; with Redis down, everything pending stays
 * in the journal and comes back at the next start. (Sentinels, replicas and
 * SIGTERM: tests/integration, test_sentinel and test_operations.)
 */
#include "metering_test.h"
#include "tests/unit/redis_fixture.h"

/* Three sandboxes counted and flushed at exit to srv: every record lands
 * (XADD and INCRBY), and the journal is removed. */
static void flush_to(server_t *srv)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_redis_conf_t rconf = conf_for(srv);
    gw_metering_stats_t st;

    gw_meter_set_project(meter, "sa", iov("pa"), NOW);
    gw_meter_add(meter, "sa", 1000, 1, NOW);
    gw_meter_add(meter, "sb", 2000, 2, NOW);
    gw_metering_submit(m, meter, NOW + 1);
    gw_metering_seal(m, 0); /* one batch sealed before exit, one still open */
    gw_meter_add(meter, "sc", 3000, 3, NOW + 2);
    gw_metering_submit(m, meter, NOW + 3);
    /* generous: a sanitizer build on a loaded machine; what is checked is that it got there */
    ck_assert_int_eq(gw_metering_final_flush(m, &rconf, 10000), 0);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.records_written, 3);
    ck_assert_uint_eq(st.pending_records, 0);
    ck_assert_uint_eq(st.spill_written, 0);
    ck_assert(!file_exists(spill));
    ck_assert_int_eq(admin(srv, "XLEN lizard:egress"), 3);
    ck_assert_int_eq(admin(srv, "INCRBY lizard:egress:{sa} 0"), 1000);
    ck_assert_int_eq(admin(srv, "INCRBY lizard:egress:{sc} 0"), 3000);
    gw_metering_free(m);
    gw_meter_free(meter);
}

START_TEST(test_final_flush_writes_over_tcp)
{
    server_t srv;

    server_tcp(&srv);
    flush_to(&srv);
    server_cleanup(&srv);
}
END_TEST

START_TEST(test_final_flush_writes_over_a_unix_socket_with_auth)
{
    server_t srv = {.password = "s3cret"};

    server_start(&srv);
    flush_to(&srv);
    server_cleanup(&srv);
}
END_TEST

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
    ck_assert_uint_eq(count_lines(spill), 3); /* header, batch, record */
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
    batch_done(m, b, 1);
    gw_metering_free(m);
    gw_meter_free(meter);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {test_final_flush_writes_over_tcp, test_final_flush_writes_over_a_unix_socket_with_auth,
                            test_final_flush_spills_when_redis_is_down};
    return redis_fixture_main("final_flush", 60, setup, teardown, tests, sizeof(tests) / sizeof(tests[0]));
}
