/*
 * metering/spill.c: the journal's lock, and spill files of version 1 (JSON
 * lines of records, written by earlier versions) read through the queue:
 * records, executed_on, malformed lines skipped and the file kept aside.
 * The journal itself: test_journal.c.
 */
#include <sys/wait.h>
#include "metering_test.h"

#define REC(sandbox, seq, extra)                                                                                                   \
    "{\"sandbox\":\"" sandbox "\",\"project\":\"p\",\"egress\":100,\"ingress\":1,\"from_ms\":1,\"to_ms\":2,"                       \
    "\"gateway\":\"old-gw\",\"seq\":" #seq extra "}\n"

/* A spill file of version 1 with a record its gateway's EXEC took on a
 * primary (executed_on, no offset): replayed in seq order, that one as
 * executed there (held by that primary only), the others to be sent. */
START_TEST(test_version_1_is_replayed)
{
    static const char text[] = REC("late", 30, "") REC("early", 10, "") REC(
        "ran", 20, ",\"executed_on\":\"00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff\"") "{\"sandbox\": \"hand-edited\", \"egress\": \n";
    FILE *f = fopen(spill, "wb");
    gw_metering_stats_t st;
    gw_metering_batch_t *b;
    gw_metering_t *m;
    char *aside;

    ck_assert_uint_eq(fwrite(text, 1, sizeof(text) - 1, f), sizeof(text) - 1);
    fclose(f);
    m = new_metering(spill, NOW - 3600 * 1000); /* a clock that stepped back: seq still above */
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_replayed, 3);
    ck_assert_uint_eq(st.spill_malformed, 1);
    ck_assert_uint_eq(st.pending_records, 3);
    ck_assert_uint_gt(m->next_seq, 30);
    b = m->head;
    ck_assert_uint_eq(b->num_records, 1);
    ck_assert_str_eq(b->records[0].sandbox, "early");
    ck_assert_int_eq(b->state, GW_METERING_BATCH_SEALED);
    b = b->next;
    ck_assert_str_eq(b->records[0].sandbox, "ran");
    ck_assert_int_eq(b->state, GW_METERING_BATCH_EXECUTED);
    ck_assert_str_eq(b->exec_replid, "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff");
    b = b->next;
    ck_assert_str_eq(b->records[0].sandbox, "late");
    ck_assert_str_eq(b->records[0].gateway, "old-gw");
    ck_assert_ptr_null(b->next);
    /* kept for a person; the journal (version 2) replaced it */
    ck_assert_ptr_nonnull(aside = find_set_aside());
    free(aside);
    gw_metering_free(m);

    /* the next start reads the same three from the journal */
    m = new_metering(spill, NOW);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_replayed, 3);
    ck_assert_uint_eq(st.spill_malformed, 0);
    ck_assert_int_eq(m->head->next->state, GW_METERING_BATCH_EXECUTED);
    gw_metering_free(m);
}
END_TEST

START_TEST(test_parse_spill_line)
{
    gw_metering_record_t r;
    char executed_on[GW_METERING_REPLID_MAX + 1];
    const char *err = NULL;
    static const char *bad[] = {
        "",
        "{}",
        "{\"sandbox\":\"a\",\"project\":\"p\",\"egress\":1,\"ingress\":1,\"from_ms\":1,\"to_ms\":1,\"gateway\":\"g\",\"seq\":0}",
        "{\"sandbox\":\"a\",\"project\":\"p\",\"egress\":1.5,\"ingress\":1,\"from_ms\":1,\"to_ms\":1,\"gateway\":\"g\",\"seq\":1}",
        "{\"sandbox\":\"a\",\"project\":\"p\",\"egress\":1,\"ingress\":1,\"from_ms\":1,\"to_ms\":1,\"gateway\":\"g h\",\"seq\":1}",
        "{\"sandbox\":\"a\",\"project\":\"p\",\"egress\":1,\"ingress\":1,\"from_ms\":1,\"to_ms\":1,\"gateway\":\"g\",\"seq\":1,"
        "\"seq\":2}",
        "{\"sandbox\":\"a\",\"project\":\"p\\u0000x\",\"egress\":1,\"ingress\":1,\"from_ms\":1,\"to_ms\":1,\"gateway\":\"g\","
        "\"seq\":1}",
        "{\"sandbox\":\"a\",\"project\":\"p\",\"egress\":1,\"ingress\":1,\"from_ms\":1,\"to_ms\":1,\"gateway\":\"g\",\"seq\":1,"
        "\"executed_on\":\"not hex\"}",
        "{\"sandbox\":\"a\",\"project\":\"p\",\"egress\":1,\"ingress\":1,\"from_ms\":1,\"to_ms\":1,\"gateway\":\"g\",\"seq\":1,"
        "\"executed_on\":\"0123456789abcdef0123456789abcdef012345678\"}",
    };
    const char *executed = "{\"sandbox\":\"a\",\"project\":\"p\",\"egress\":1,\"ingress\":1,\"from_ms\":1,\"to_ms\":1,"
                           "\"gateway\":\"g\",\"seq\":1,\"executed_on\":\"0123456789abcdef0123456789abcdef01234567\"}";
    const char *good = "{\"sandbox\":\"abc123\",\"project\":\"p\",\"egress\":18446744073,\"ingress\":1,\"from_ms\":1,"
                       "\"to_ms\":1,\"gateway\":\"g\",\"seq\":5,\"future_field\":true}";

    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        ck_assert_msg(gw_metering_parse_spill_line(bad[i], strlen(bad[i]), &r, executed_on, &err) == -1, "accepted: %s", bad[i]);
        ck_assert_ptr_nonnull(err);
        ck_assert_ptr_null(r.project);
    }
    ck_assert_int_eq(gw_metering_parse_spill_line(good, strlen(good), &r, executed_on, &err), 0);
    ck_assert_str_eq(r.sandbox, "abc123");
    ck_assert_uint_eq(r.egress, 18446744073ull);
    ck_assert_uint_eq(r.seq, 5);
    ck_assert_str_eq(executed_on, "");
    gw_metering_record_dispose(&r);
    /* a record EXEC took on that primary before exit, no replica acknowledging it */
    ck_assert_int_eq(gw_metering_parse_spill_line(executed, strlen(executed), &r, executed_on, &err), 0);
    ck_assert_str_eq(executed_on, "0123456789abcdef0123456789abcdef01234567");
    gw_metering_record_dispose(&r);
}
END_TEST

/* Two gateways on one host with the same spill file (the default path is the
 * same for all) would replace each other's records: the second is refused. */
START_TEST(test_spill_file_is_locked)
{
    gw_metering_conf_t conf = {"lizard:", "gw-other", spill, 0};
    gw_metering_t *m = new_metering(spill, NOW), *other;
    gw_meter_t *meter = gw_meter_new();
    char *err = NULL, expected[256], tmp[160], *text;
    int status;
    pid_t pid;

    snprintf(expected, sizeof(expected),
             "metering.spill_file %s is in use by another lizard-gateway; give each instance its own spill_file (and instance_id)",
             spill);
    ck_assert_ptr_null(other = gw_metering_new(&conf, NOW, &err));
    ck_assert_ptr_nonnull(err);
    ck_assert_str_eq(err, expected);
    free(err);
    err = NULL;
    /* and from another process, which is the case that matters */
    ck_assert_int_ge(pid = fork(), 0);
    if (pid == 0) {
        gw_metering_t *o = gw_metering_new(&conf, NOW, &err);
        _exit(o == NULL && err != NULL && strcmp(err, expected) == 0 ? 0 : 1);
    }
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* the journal's temporary file is this process's own: a fixed "<spill>.tmp" of someone else is left alone */
    snprintf(tmp, sizeof(tmp), "%s.tmp", spill);
    FILE *f = fopen(tmp, "w");
    fputs("not mine\n", f);
    fclose(f);
    gw_meter_add(meter, "sa", 1, 2, NOW);
    gw_metering_submit(m, meter, NOW);
    ck_assert_int_eq(gw_metering_journal_finish(m, &err), 0);
    ck_assert_uint_eq(count_lines(spill), 2); /* header, one open record */
    text = slurp(tmp);
    ck_assert_str_eq(text, "not mine\n");
    free(text);
    gw_metering_free(m);

    /* released with m: the next run gets the file, and its records */
    other = gw_metering_new(&conf, NOW + 1000, &err);
    ck_assert_msg(other != NULL, "%s", err);
    ck_assert_ptr_nonnull(gw_metering_next_batch(other));
    gw_metering_free(other);
    gw_meter_free(meter);
}
END_TEST

START_TEST(test_spill_line_with_nul)
{
    static const char text[] = "{\"sandbox\":\"x\0garbage\"}\n"
                               "{\"sandbox\":\"second\",\"project\":\"p\",\"egress\":100,\"ingress\":1,\"from_ms\":1,\"to_ms\":2,"
                               "\"gateway\":\"old-gw\",\"seq\":10}\n"
                               "{\"sandbox\":\"third\",\"project\":\"p\",\"egress\":100,\"ingress\":1,\"from_ms\":1,\"to_ms\":2,"
                               "\"gateway\":\"old-gw\",\"seq\":11}\n"
                               "{\"sandbox\":\"fourth\",\"project\":\"p\",\"egress\":100,\"ingress\":1,\"from_ms\":1,\"to_ms\":2,"
                               "\"gateway\":\"old-gw\",\"seq\":12}\0\n";
    FILE *f = fopen(spill, "wb");
    gw_metering_stats_t st;
    gw_metering_batch_t *b;
    gw_metering_t *m;

    ck_assert_uint_eq(fwrite(text, 1, sizeof(text) - 1, f), sizeof(text) - 1);
    fclose(f);
    m = new_metering(spill, NOW);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_replayed, 2);
    ck_assert_uint_eq(st.spill_malformed, 2);
    b = gw_metering_next_batch(m);
    ck_assert_uint_eq(b->num_records, 2); /* one batch: neither was executed anywhere */
    ck_assert_str_eq(b->records[0].sandbox, "second");
    ck_assert_str_eq(b->records[1].sandbox, "third");
    gw_metering_free(m);
}
END_TEST

static Suite *spill_suite(void)
{
    Suite *s = suite_create("spill");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_version_1_is_replayed);
    tcase_add_test(tc, test_parse_spill_line);
    tcase_add_test(tc, test_spill_file_is_locked);
    tcase_add_test(tc, test_spill_line_with_nul);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(spill_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
