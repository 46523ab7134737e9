/*
 * metering/replication.c and what the queue does with it: INFO replication
 * read, whether a primary holds a batch (same history, or promoted from it
 * past the batch's offset), a replica's acknowledgement; batches that wait
 * for one never hold later ones back; after a failover a batch the new
 * primary holds is not executed again and one it lacks is; the bound on
 * batches waiting for a replica.
 */
#include "metering_test.h"

#define R1 "1111111111111111111111111111111111111111"
#define R2 "2222222222222222222222222222222222222222"
#define R3 "3333333333333333333333333333333333333333"

static const char INFO_PRIMARY[] = "# Replication\r\n"
                                   "role:master\r\n"
                                   "connected_slaves:2\r\n"
                                   "slave0:ip=127.0.0.1,port=6380,state=online,offset=4000,lag=0\r\n"
                                   "slave1:ip=127.0.0.1,port=6381,state=wait_bgsave,offset=0,lag=0\r\n"
                                   "master_failover_state:no-failover\r\n"
                                   "master_replid:" R2 "\r\n"
                                   "master_replid2:" R1 "\r\n"
                                   "master_repl_offset:5000\r\n"
                                   "second_repl_offset:3001\r\n"
                                   "repl_backlog_active:1\r\n";

START_TEST(test_info_parse)
{
    gw_repl_info_t info;
    static const char replica[] = "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_replid:" R1
                                  "\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:7\r\n"
                                  "second_repl_offset:-1\r\n";

    ck_assert_int_eq(gw_repl_info_parse(INFO_PRIMARY, sizeof(INFO_PRIMARY) - 1, &info), 0);
    ck_assert(info.is_primary);
    ck_assert_str_eq(info.replid, R2);
    ck_assert_str_eq(info.replid2, R1);
    ck_assert_uint_eq(info.offset, 5000);
    ck_assert_uint_eq(info.second_offset, 3001);
    ck_assert_uint_eq(info.online_replicas, 1); /* the one in its first sync holds nothing */
    ck_assert_uint_eq(info.best_ack, 4000);
    ck_assert_int_eq(gw_repl_info_parse(replica, sizeof(replica) - 1, &info), 0);
    ck_assert(!info.is_primary);
    ck_assert_str_eq(info.replid2, "");
    ck_assert_uint_eq(info.second_offset, 0);
    ck_assert_int_eq(gw_repl_info_parse("role:master\r\n", 13, &info), -1);
    ck_assert_int_eq(gw_repl_info_parse("role:master\r\nmaster_replid:xyz\r\nmaster_repl_offset:1\r\n", 52, &info), -1);
    /* every prefix of a reply is read or refused, never past its end */
    for (size_t k = 0; k != sizeof(INFO_PRIMARY) - 1; ++k)
        gw_repl_info_parse(INFO_PRIMARY, k, &info);
}
END_TEST

START_TEST(test_holds_and_acked)
{
    gw_repl_info_t info;

    gw_repl_info_parse(INFO_PRIMARY, sizeof(INFO_PRIMARY) - 1, &info);
    /* the same history: everything it executed */
    ck_assert(gw_repl_holds(&info, R2, 4500));
    ck_assert(gw_repl_holds(&info, R2, GW_METERING_OFFSET_UNKNOWN));
    /* promoted from R1 at offset 3000: it holds R1's bytes up to there, not after */
    ck_assert(gw_repl_holds(&info, R1, 3000));
    ck_assert(!gw_repl_holds(&info, R1, 3001));
    ck_assert(!gw_repl_holds(&info, R1, GW_METERING_OFFSET_UNKNOWN));
    ck_assert(!gw_repl_holds(&info, R1, 0)); /* a spill file of version 1: the id alone places nothing */
    ck_assert(!gw_repl_holds(&info, R3, 10));
    /* the online replica acknowledged 4000 of R2 */
    ck_assert(gw_repl_acked(&info, R2, 4000));
    ck_assert(!gw_repl_acked(&info, R2, 4001));
    ck_assert(!gw_repl_acked(&info, R1, 10));
    info.online_replicas = 0;
    ck_assert(!gw_repl_acked(&info, R2, 1));
}
END_TEST

static gw_metering_batch_t *seal_one(gw_metering_t *m, gw_meter_t *meter, const char *sandbox, uint64_t egress)
{
    gw_meter_add(meter, sandbox, egress, 0, NOW);
    gw_metering_submit(m, meter, NOW);
    ck_assert_uint_eq(gw_metering_seal(m, 0), 1);
    return m->tail;
}

/* With Sentinel a batch waits for a replica, and later ones go meanwhile. */
START_TEST(test_waiting_never_holds_later_batches)
{
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *b1, *b2;
    gw_metering_stats_t st;
    gw_repl_info_t info = {.is_primary = 1, .replid = R1, .offset = 9000};

    seal_one(m, meter, "a", 100);
    ck_assert_ptr_nonnull(b1 = gw_metering_next_batch(m));
    gw_metering_batch_executed(m, b1, R1, 1000, 1);
    ck_assert(gw_metering_has_unacked(m));
    seal_one(m, meter, "b", 200);
    ck_assert_ptr_nonnull(b2 = gw_metering_next_batch(m));
    ck_assert_ptr_ne(b1, b2);
    gw_metering_batch_executed(m, b2, R1, 2000, 1);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.unacked_batches, 2);
    ck_assert_uint_eq(st.unacked_bytes, 300);
    ck_assert_uint_eq(st.records_written, 0);
    /* a replica at 1500: the first is written, the second waits */
    info.online_replicas = 1;
    info.best_ack = 1500;
    gw_metering_acked(m, &info);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.records_written, 1);
    ck_assert_uint_eq(st.unacked_batches, 1);
    ck_assert_ptr_eq(m->head, b2);
    info.best_ack = 2000;
    gw_metering_acked(m, &info);
    ck_assert(!gw_metering_has_unacked(m));
    ck_assert_ptr_null(m->head);
    gw_meter_free(meter);
    gw_metering_free(m);
}
END_TEST

/* Executed on R1 at 1000 and 4000; the replica promoted had R1 up to 3000. */
START_TEST(test_failover_executes_only_what_is_missing)
{
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *held, *lacking, *unrelated, *b;
    gw_metering_stats_t st;
    gw_repl_info_t now = {.is_primary = 1, .replid = R2, .replid2 = R1, .offset = 3100, .second_offset = 3001};

    held = seal_one(m, meter, "a", 100);
    gw_metering_batch_executed(m, gw_metering_next_batch(m), R1, 1000, 1);
    lacking = seal_one(m, meter, "b", 200);
    gw_metering_batch_executed(m, gw_metering_next_batch(m), R1, 4000, 1);
    /* executed on a primary whose history the new one does not know (a replica restarted from its own
     * disk takes a new id): only its stream can tell */
    unrelated = seal_one(m, meter, "d", 400);
    gw_metering_batch_executed(m, gw_metering_next_batch(m), R3, 50, 1);
    seal_one(m, meter, "c", 300); /* never sent */

    gw_metering_primary_now(m, &now);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.batches_held, 1);
    ck_assert_uint_eq(st.batches_reexecuted, 1);
    ck_assert_int_eq(held->state, GW_METERING_BATCH_EXECUTED);
    ck_assert_str_eq(held->exec_replid, R2); /* in R2's history now, at the same offset */
    ck_assert_uint_eq(held->exec_offset, 1000);
    ck_assert_int_eq(lacking->state, GW_METERING_BATCH_SEALED);
    ck_assert_uint_eq(lacking->unknown_since_ms, 0);
    ck_assert_int_eq(unrelated->state, GW_METERING_BATCH_SEALED);
    ck_assert_uint_eq(unrelated->unknown_since_ms, NOW); /* searched from when it was sealed */
    /* in seq order: the lacking one first, then the one to look for, then the one never sent */
    ck_assert_ptr_eq(b = gw_metering_next_batch(m), lacking);
    gw_metering_batch_executed(m, b, R2, 3300, 1);
    ck_assert_ptr_eq(gw_metering_next_batch(m), unrelated);
    ck_assert_str_eq(gw_metering_next_batch(m)->records[0].sandbox, "c");
    /* a second look at the same primary changes nothing */
    gw_metering_primary_now(m, &now);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.batches_held, 1);
    ck_assert_uint_eq(st.batches_reexecuted, 1);
    gw_meter_free(meter);
    gw_metering_free(m);
}
END_TEST

/* A primary promoted before it ever synced takes a new replication id
 * (keeping its offsets) when its first replica attaches: batches executed
 * on it before follow, so that the replica's acknowledgement and a later
 * failover find them held. */
START_TEST(test_history_renamed)
{
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *b;
    gw_repl_info_t renamed = {.is_primary = 1, .replid = R3, .offset = 2500, .online_replicas = 1, .best_ack = 2500};
    gw_repl_info_t promoted = {.is_primary = 1, .replid = R2, .replid2 = R3, .offset = 3000, .second_offset = 2501};

    b = seal_one(m, meter, "a", 100);
    gw_metering_batch_executed(m, gw_metering_next_batch(m), R1, 2000, 1);
    gw_metering_history_renamed(m, R1, &renamed);
    ck_assert_str_eq(b->exec_replid, R3);
    ck_assert_uint_eq(b->exec_offset, 2000);
    /* held by a replica promoted from the renamed history */
    gw_metering_primary_now(m, &promoted);
    ck_assert_int_eq(b->state, GW_METERING_BATCH_EXECUTED);
    ck_assert_str_eq(b->exec_replid, R2);
    gw_meter_free(meter);
    gw_metering_free(m);
}
END_TEST

/* No replica for a long time: past GW_METERING_MAX_UNACKED_RECORDS the
 * oldest executed batches are released, counted. */
START_TEST(test_unacked_are_bounded)
{
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_stats_t st;
    char id[32];
    size_t i, per = 1000, n = GW_METERING_MAX_UNACKED_RECORDS / per + 3;

    for (i = 0; i != n; ++i) {
        for (size_t k = 0; k != per; ++k) {
            snprintf(id, sizeof(id), "s%zu", k);
            gw_meter_add(meter, id, 1, 0, NOW);
        }
        gw_metering_submit(m, meter, NOW);
        gw_metering_seal(m, 0);
        gw_metering_batch_executed(m, gw_metering_next_batch(m), R1, 1000 + i, 1);
    }
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.unacked_released, 3 * per);
    ck_assert_uint_eq(st.unacked_batches, GW_METERING_MAX_UNACKED_RECORDS / per);
    ck_assert_uint_eq(m->head->exec_offset, 1003); /* the oldest went */
    gw_meter_free(meter);
    gw_metering_free(m);
}
END_TEST

static Suite *replication_suite(void)
{
    Suite *s = suite_create("replication");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_info_parse);
    tcase_add_test(tc, test_holds_and_acked);
    tcase_add_test(tc, test_waiting_never_holds_later_batches);
    tcase_add_test(tc, test_failover_executes_only_what_is_missing);
    tcase_add_test(tc, test_unacked_are_bounded);
    tcase_add_test(tc, test_history_renamed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(replication_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
