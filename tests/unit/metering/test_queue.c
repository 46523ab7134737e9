/*
 * metering/queue.c: merging the workers' counts, batches and their seq
 * values (kept on retry), the cap on sealed batches. What a replica's
 * acknowledgement and a failover do to batches: test_replication.c.
 */
#include "metering_test.h"

START_TEST(test_accumulates_per_sandbox)
{
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *b;
    const gw_metering_record_t *r;

    gw_meter_set_project(meter, "sbx1", iov("proj-a"), NOW);
    gw_meter_add(meter, "sbx1", 0, 300, NOW + 10); /* request */
    gw_meter_add(meter, "sbx1", 120, 0, NOW + 20); /* response head */
    gw_meter_add(meter, "sbx1", 5000, 0, NOW + 30);
    gw_meter_add(meter, "sbx2", 7, 9, NOW + 40); /* never routed: project unknown */
    gw_meter_add(meter, "sbx3", 0, 0, NOW + 40); /* nothing moved: no record */
    gw_metering_submit(m, meter, NOW + 100);
    ck_assert_uint_eq(gw_metering_seal(m, 0), 1);

    b = gw_metering_next_batch(m);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->num_records, 2);
    r = find(b, "sbx1");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->project, "proj-a");
    ck_assert_uint_eq(r->egress, 5120);
    ck_assert_uint_eq(r->ingress, 300);
    ck_assert_uint_eq(r->from_ms, NOW + 10);
    ck_assert_uint_eq(r->to_ms, NOW + 100);
    ck_assert_ptr_null(r->gateway);
    r = find(b, "sbx2");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->project, "");
    ck_assert_uint_eq(r->egress, 7);
    ck_assert_uint_eq(r->ingress, 9);
    batch_done(m, b, 1);

    /* the counts were handed over: the next flush has nothing */
    gw_metering_submit(m, meter, NOW + 200);
    ck_assert_uint_eq(gw_metering_seal(m, 0), 0);
    ck_assert_ptr_null(gw_metering_next_batch(m));

    /* the project is remembered across flushes (a long WebSocket) */
    gw_meter_add(meter, "sbx1", 1, 0, NOW + 300);
    gw_metering_submit(m, meter, NOW + 400);
    gw_metering_seal(m, 0);
    b = gw_metering_next_batch(m);
    ck_assert_str_eq(b->records[0].project, "proj-a");
    ck_assert_uint_eq(b->records[0].from_ms, NOW + 300);
    batch_done(m, b, 1);

    gw_meter_free(meter);
    gw_metering_free(m);
}
END_TEST

START_TEST(test_merges_workers)
{
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_meter_t *w0 = gw_meter_new(), *w1 = gw_meter_new();
    gw_metering_batch_t *b;
    const gw_metering_record_t *r;

    gw_meter_set_project(w0, "shared", iov("p"), NOW);
    gw_meter_set_project(w1, "shared", iov("p"), NOW);
    gw_meter_add(w0, "shared", 100, 1, NOW + 50);
    gw_meter_add(w1, "shared", 200, 2, NOW + 20);
    gw_meter_add(w1, "only1", 5, 0, NOW + 20);
    gw_metering_submit(m, w0, NOW + 100);
    gw_metering_submit(m, w1, NOW + 150);
    gw_metering_seal(m, 0);
    b = gw_metering_next_batch(m);
    ck_assert_uint_eq(b->num_records, 2); /* one XADD per sandbox per flush */
    r = find(b, "shared");
    ck_assert_uint_eq(r->egress, 300);
    ck_assert_uint_eq(r->ingress, 3);
    ck_assert_uint_eq(r->from_ms, NOW + 20);
    ck_assert_uint_eq(r->to_ms, NOW + 150);
    batch_done(m, b, 1);
    gw_meter_free(w0);
    gw_meter_free(w1);
    gw_metering_free(m);
}
END_TEST

START_TEST(test_seq_increases_and_retry_keeps_it)
{
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *b1, *b2, *again;
    uint64_t seqs[3], last = 0;
    gw_metering_stats_t st;
    size_t i;

    gw_meter_add(meter, "a", 1, 0, NOW);
    gw_meter_add(meter, "b", 2, 0, NOW);
    gw_meter_add(meter, "c", 3, 0, NOW);
    gw_metering_submit(m, meter, NOW);
    gw_metering_seal(m, 0);
    gw_meter_add(meter, "a", 10, 0, NOW + 1);
    gw_metering_submit(m, meter, NOW + 1);
    gw_metering_seal(m, 0);

    b1 = gw_metering_next_batch(m);
    ck_assert_uint_eq(b1->num_records, 3);
    for (i = 0; i != 3; ++i) {
        seqs[i] = b1->records[i].seq;
        ck_assert_uint_eq(seqs[i], NOW * GW_METERING_SEQ_PER_MS + i); /* above any earlier run's */
    }
    /* failed or timed out: the same batch again, the same seq values */
    batch_done(m, b1, 0);
    again = gw_metering_next_batch(m);
    ck_assert_ptr_eq(again, b1);
    for (i = 0; i != 3; ++i)
        ck_assert_uint_eq(again->records[i].seq, seqs[i]);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.flush_failures, 1);
    ck_assert_uint_eq(st.pending_records, 4);
    last = seqs[2];
    batch_done(m, again, 1);

    b2 = gw_metering_next_batch(m);
    ck_assert_uint_eq(b2->num_records, 1);
    ck_assert_uint_gt(b2->records[0].seq, last);
    ck_assert_uint_eq(b2->records[0].egress, 10);
    batch_done(m, b2, 1);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.pending_records, 0);
    ck_assert_uint_eq(st.records_written, 4);
    ck_assert_ptr_null(gw_metering_next_batch(m));
    gw_meter_free(meter);
    gw_metering_free(m);
}
END_TEST

START_TEST(test_large_flush_is_cut_into_batches)
{
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *b;
    size_t i, n = 0, sizes[4] = {0}, k = 0;
    uint64_t prev = 0;
    char id[16];

    for (i = 0; i != 2500; ++i) {
        snprintf(id, sizeof(id), "s%zu", i);
        gw_meter_add(meter, id, 1, 1, NOW);
    }
    gw_metering_submit(m, meter, NOW);
    ck_assert_uint_eq(gw_metering_seal(m, 0), 3);
    while ((b = gw_metering_next_batch(m)) != NULL) {
        sizes[k++] = b->num_records;
        for (i = 0; i != b->num_records; ++i) {
            ck_assert_uint_gt(b->records[i].seq, prev);
            prev = b->records[i].seq;
        }
        n += b->num_records;
        batch_done(m, b, 1);
    }
    ck_assert_uint_eq(n, 2500);
    ck_assert_uint_eq(sizes[0], GW_METERING_MAX_BATCH_RECORDS);
    ck_assert_uint_eq(sizes[2], 500);
    gw_meter_free(meter);
    gw_metering_free(m);
}
END_TEST

START_TEST(test_batch_cap_merges_instead_of_dropping)
{
    gw_metering_t *m = new_metering(NULL, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *b;
    gw_metering_stats_t st;
    size_t i;

    /* Redis is down: every flush seals one batch, up to the cap */
    for (i = 0; i != GW_METERING_MAX_BATCHES; ++i) {
        gw_meter_add(meter, "busy", 1, 0, NOW + i);
        gw_metering_submit(m, meter, NOW + i);
        ck_assert_uint_eq(gw_metering_seal(m, 0), 1);
    }
    /* past the cap: nothing more is sealed, the counts merge into one open record */
    for (i = 0; i != 500; ++i) {
        gw_meter_add(meter, "busy", 2, 1, NOW + 5000 + i);
        gw_metering_submit(m, meter, NOW + 5000 + i);
        ck_assert_uint_eq(gw_metering_seal(m, 0), 0);
    }
    ck_assert_uint_eq(m->num_batches, GW_METERING_MAX_BATCHES);
    ck_assert_uint_eq(gw_hashtab_size(&m->open), 1);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.pending_records, GW_METERING_MAX_BATCHES + 1);

    /* Redis is back: the first batch goes, and the merged record is sealed whole */
    b = gw_metering_next_batch(m);
    batch_done(m, b, 1);
    ck_assert_uint_eq(gw_metering_seal(m, 0), 1);
    b = m->tail;
    ck_assert_uint_eq(b->num_records, 1);
    ck_assert_uint_eq(b->records[0].egress, 1000);
    ck_assert_uint_eq(b->records[0].ingress, 500);
    ck_assert_uint_eq(b->records[0].from_ms, NOW + 5000);
    ck_assert_uint_eq(b->records[0].to_ms, NOW + 5499);
    gw_meter_free(meter);
    gw_metering_free(m);
}
END_TEST

static Suite *queue_suite(void)
{
    Suite *s = suite_create("queue");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_accumulates_per_sandbox);
    tcase_add_test(tc, test_merges_workers);
    tcase_add_test(tc, test_seq_increases_and_retry_keeps_it);
    tcase_add_test(tc, test_large_flush_is_cut_into_batches);
    tcase_add_test(tc, test_batch_cap_merges_instead_of_dropping);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(queue_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
