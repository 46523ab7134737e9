/*
 * metering/spill.c through the queue: write and replay, malformed lines
 * (skipped, the file kept aside), the lock, records that cannot be written.
 */
#include <sys/wait.h>
#include "metering_test.h"
#include "metering/commands.h"

START_TEST(test_spill_write_and_replay)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *b;
    gw_metering_stats_t st;
    uint64_t seq_a = 0, seq_b = 0;
    char *err = NULL;
    size_t i;

    gw_meter_set_project(meter, "sa", iov("proj \"quoted\" \xc3\xa9"), NOW);
    gw_meter_add(meter, "sa", 1000, 10, NOW + 1);
    gw_meter_add(meter, "sb", 2000, 20, NOW + 2);
    gw_metering_submit(m, meter, NOW + 3);
    gw_metering_seal(m, 0);
    /* one attempt failed before exit */
    b = gw_metering_next_batch(m);
    for (i = 0; i != b->num_records; ++i) {
        if (strcmp(b->records[i].sandbox, "sa") == 0)
            seq_a = b->records[i].seq;
        else
            seq_b = b->records[i].seq;
    }
    gw_metering_mark_executed(b, "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff"); /* its EXEC ran, its WAIT did not answer */
    gw_metering_batch_done(m, b, 0);
    /* and counts of the last moments are still open */
    gw_meter_add(meter, "sa", 5, 0, NOW + 4);
    gw_metering_submit(m, meter, NOW + 5);

    ck_assert_int_eq(gw_metering_write_spill(m, &err), 0);
    ck_assert_uint_eq(count_lines(spill), 3);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_written, 3);
    gw_meter_free(meter);
    gw_metering_free(m);

    /* the next start, an hour later by a clock that stepped back */
    m = new_metering(spill, NOW - 3600 * 1000);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_replayed, 3);
    ck_assert_uint_eq(st.pending_records, 3);
    ck_assert_uint_gt(m->next_seq, seq_a > seq_b ? seq_a : seq_b);
    b = gw_metering_next_batch(m);
    ck_assert_ptr_nonnull(b);
    ck_assert(b->from_spill);
    ck_assert_uint_eq(b->num_records, 3);
    ck_assert_str_eq(b->records[0].gateway, "gw-test");
    for (i = 0; i != 3; ++i) {
        const gw_metering_record_t *r = b->records + i;
        if (r->seq == seq_a) {
            ck_assert_str_eq(r->executed_on, "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff");
            ck_assert_str_eq(r->sandbox, "sa");
            ck_assert_str_eq(r->project, "proj \"quoted\" \xc3\xa9");
            ck_assert_uint_eq(r->egress, 1000);
            ck_assert_uint_eq(r->ingress, 10);
            ck_assert_uint_eq(r->from_ms, NOW + 1);
            ck_assert_uint_eq(r->to_ms, NOW + 3);
        } else if (r->seq == seq_b) {
            ck_assert_uint_eq(r->egress, 2000);
        } else {
            ck_assert_uint_gt(r->seq, seq_a > seq_b ? seq_a : seq_b);
            ck_assert_uint_eq(r->egress, 5);
            ck_assert_str_eq(r->executed_on, ""); /* never sent */
        }
    }
    /* the file stays until the replay's EXEC succeeded */
    gw_metering_batch_done(m, b, 0);
    ck_assert(file_exists(spill));
    b = gw_metering_next_batch(m);
    gw_metering_batch_done(m, b, 1);
    ck_assert(!file_exists(spill));
    gw_metering_free(m);
}
END_TEST

START_TEST(test_spill_rewrite_keeps_unreplayed_records)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_meter_t *meter = gw_meter_new();
    char *err = NULL;

    gw_meter_add(meter, "old", 1, 0, NOW);
    gw_metering_submit(m, meter, NOW);
    ck_assert_int_eq(gw_metering_write_spill(m, &err), 0);
    gw_metering_free(m);

    /* a run that never reached Redis: the old record and its own, once each */
    m = new_metering(spill, NOW + 1000);
    gw_meter_add(meter, "new", 2, 0, NOW + 1001);
    gw_metering_submit(m, meter, NOW + 1001);
    ck_assert_int_eq(gw_metering_write_spill(m, &err), 0);
    ck_assert_uint_eq(count_lines(spill), 2);
    gw_metering_free(m);
    gw_meter_free(meter);
}
END_TEST

START_TEST(test_spill_malformed_lines_are_skipped)
{
    FILE *f = fopen(spill, "w");
    gw_metering_stats_t st;
    gw_metering_t *m;
    gw_metering_batch_t *b;
    char longline[GW_METERING_SPILL_LINE_MAX + 100], *aside, *text;

    memset(longline, ' ', sizeof(longline) - 1);
    longline[sizeof(longline) - 1] = '\0';
    memcpy(longline, "{\"x\":1", 6);
    fprintf(f, "{\"sandbox\":\"good1\",\"project\":\"p\",\"egress\":5,\"ingress\":6,\"from_ms\":1,\"to_ms\":2,"
               "\"gateway\":\"other-gw\",\"seq\":77}\n");
    fprintf(f, "not json\n");
    fprintf(f, "\n");
    fprintf(f, "[1,2,3]\n");
    fprintf(f, "{\"sandbox\":\"BAD!\",\"project\":\"p\",\"egress\":5,\"ingress\":6,\"from_ms\":1,\"to_ms\":2,"
               "\"gateway\":\"g\",\"seq\":78}\n");
    fprintf(f, "{\"sandbox\":\"nofields\"}\n");
    fprintf(f, "{\"sandbox\":\"neg\",\"project\":\"p\",\"egress\":-5,\"ingress\":6,\"from_ms\":1,\"to_ms\":2,"
               "\"gateway\":\"g\",\"seq\":79}\n");
    fprintf(f, "%s\n", longline);
    fprintf(f, "{\"sandbox\":\"good2\",\"project\":\"\",\"egress\":0,\"ingress\":6,\"from_ms\":1,\"to_ms\":2,"
               "\"gateway\":\"gw-test\",\"seq\":80}\n");
    fprintf(f, "{\"sandbox\":\"cut\",\"proj"); /* the last write of a crash, no newline */
    fclose(f);

    m = new_metering(spill, 1);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_replayed, 2);
    ck_assert_uint_eq(st.spill_malformed, 7);
    b = gw_metering_next_batch(m);
    ck_assert_uint_eq(b->num_records, 2);
    ck_assert_str_eq(b->records[0].sandbox, "good1");
    ck_assert_str_eq(b->records[0].gateway, "other-gw"); /* the (gateway, seq) pair a consumer deduplicates on */
    ck_assert_uint_eq(b->records[0].seq, 77);
    ck_assert_str_eq(b->records[1].sandbox, "good2");
    ck_assert_uint_eq(m->next_seq, 1 * GW_METERING_SEQ_PER_MS > 80 ? 1 * GW_METERING_SEQ_PER_MS : 81);
    gw_metering_batch_done(m, b, 0);
    ck_assert_ptr_null(find_set_aside()); /* not replayed yet: the file stays where it is */
    b = gw_metering_next_batch(m);
    gw_metering_batch_done(m, b, 1);
    /* replayed: the file moves aside, malformed lines and all, for a person to look at */
    ck_assert(!file_exists(spill));
    ck_assert_ptr_nonnull(aside = find_set_aside());
    text = slurp(aside);
    ck_assert_ptr_nonnull(strstr(text, "not json\n\n[1,2,3]\n"));
    ck_assert_ptr_nonnull(strstr(text, "\"sandbox\":\"good2\""));
    free(text);
    unlink(aside);
    free(aside);
    gw_metering_free(m);

    /* a file with nothing usable is reported and set aside; no file at all is fine */
    f = fopen(spill, "w");
    fprintf(f, "garbage\n");
    fclose(f);
    m = new_metering(spill, NOW);
    ck_assert_ptr_null(gw_metering_next_batch(m));
    ck_assert(!file_exists(spill));
    ck_assert_ptr_nonnull(aside = find_set_aside());
    text = slurp(aside);
    ck_assert_str_eq(text, "garbage\n");
    free(text);
    unlink(aside);
    free(aside);
    gw_metering_free(m);
    /* an empty file is simply removed */
    fclose(fopen(spill, "w"));
    m = new_metering(spill, NOW);
    ck_assert(!file_exists(spill));
    ck_assert_ptr_null(find_set_aside());
    gw_metering_free(m);
    m = new_metering(spill, NOW);
    ck_assert_ptr_null(gw_metering_next_batch(m));
    gw_metering_free(m);
}
END_TEST

START_TEST(test_parse_spill_line)
{
    gw_metering_record_t r;
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
        ck_assert_msg(gw_metering_parse_spill_line(bad[i], strlen(bad[i]), &r, &err) == -1, "accepted: %s", bad[i]);
        ck_assert_ptr_nonnull(err);
        ck_assert_ptr_null(r.project);
    }
    ck_assert_int_eq(gw_metering_parse_spill_line(good, strlen(good), &r, &err), 0);
    ck_assert_str_eq(r.sandbox, "abc123");
    ck_assert_uint_eq(r.egress, 18446744073ull);
    ck_assert_uint_eq(r.seq, 5);
    ck_assert_str_eq(r.executed_on, "");
    gw_metering_record_dispose(&r);
    /* a record EXEC took on that primary before exit, no replica acknowledging it */
    ck_assert_int_eq(gw_metering_parse_spill_line(executed, strlen(executed), &r, &err), 0);
    ck_assert_str_eq(r.executed_on, "0123456789abcdef0123456789abcdef01234567");
    gw_metering_record_dispose(&r);
}
END_TEST

/* Two gateways on one host with the same spill file (the default path is the
 * same for all) would replace each other's records: the second is refused. */
START_TEST(test_spill_file_is_locked)
{
    gw_metering_conf_t conf = {"lizard:", "gw-other", spill};
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

    /* the temporary file is this process's own: a fixed "<spill>.tmp" of someone else is left alone */
    snprintf(tmp, sizeof(tmp), "%s.tmp", spill);
    FILE *f = fopen(tmp, "w");
    fputs("not mine\n", f);
    fclose(f);
    gw_meter_add(meter, "sa", 1, 2, NOW);
    gw_metering_submit(m, meter, NOW);
    ck_assert_int_eq(gw_metering_write_spill(m, &err), 0);
    ck_assert_uint_eq(count_lines(spill), 1);
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

/* The reviewer's case end to end: a route's project cut inside a character
 * next to a normal one; at exit both are spilled and replayed. */
START_TEST(test_spill_survives_odd_projects)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_stats_t st;
    gw_metering_batch_t *b;
    char proj[300], *err = NULL;

    memset(proj, 'a', 255);
    memcpy(proj + 255, "\xc3\xa9", 2);
    gw_meter_set_project(meter, "cut", h2o_iovec_init(proj, 257), NOW);
    gw_meter_add(meter, "cut", 3000, 1, NOW);
    gw_meter_set_project(meter, "bad", h2o_iovec_init("p\xff", 2), NOW);
    gw_meter_add(meter, "bad", 10, 1, NOW);
    gw_meter_set_project(meter, "good", iov("p-good"), NOW);
    gw_meter_add(meter, "good", 7000, 1, NOW);
    gw_metering_submit(m, meter, NOW + 1);
    /* the same project again does not make a new record */
    gw_meter_set_project(meter, "cut", h2o_iovec_init(proj, 257), NOW + 2);
    gw_meter_add(meter, "cut", 5, 0, NOW + 2);
    gw_metering_submit(m, meter, NOW + 3);
    ck_assert_uint_eq(gw_hashtab_size(&m->open), 3);
    ck_assert_int_eq(gw_metering_write_spill(m, &err), 0);
    ck_assert_uint_eq(count_lines(spill), 3);
    gw_metering_free(m);

    m = new_metering(spill, NOW + 1000);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_replayed, 3);
    ck_assert_uint_eq(st.spill_malformed, 0);
    b = gw_metering_next_batch(m);
    proj[255] = '\0';
    ck_assert_str_eq(find(b, "cut")->project, proj);
    ck_assert_uint_eq(find(b, "cut")->egress, 3005);
    ck_assert_str_eq(find(b, "bad")->project, "p?");
    ck_assert_uint_eq(find(b, "good")->egress, 7000);
    gw_metering_free(m);
    gw_meter_free(meter);
}
END_TEST

/* Should a record still not go into JSON, it alone is skipped and counted:
 * the others are written. */
START_TEST(test_spill_skips_a_record_it_cannot_write)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_stats_t st;
    gw_metering_batch_t *b;
    gw_metering_record_t *r;
    char *err = NULL, *text;

    gw_meter_add(meter, "s1", 100, 1, NOW);
    gw_meter_add(meter, "s2", 200, 2, NOW);
    gw_meter_add(meter, "s3", 300, 3, NOW);
    gw_metering_submit(m, meter, NOW);
    gw_metering_seal(m, 0);
    /* what no path in the gateway should produce any more */
    r = (gw_metering_record_t *)find(m->head, "s2");
    free(r->project);
    r->project = strdup("\xff\xfe");
    ck_assert_int_eq(gw_metering_write_spill(m, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_uint_eq(count_lines(spill), 2);
    text = slurp(spill);
    ck_assert_ptr_nonnull(strstr(text, "\"s1\""));
    ck_assert_ptr_nonnull(strstr(text, "\"s3\""));
    ck_assert_ptr_null(strstr(text, "\"s2\""));
    free(text);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_written, 2);
    ck_assert_uint_eq(st.spill_malformed, 1);
    gw_metering_free(m);

    m = new_metering(spill, NOW + 1000);
    b = gw_metering_next_batch(m);
    ck_assert_uint_eq(b->num_records, 2);
    gw_metering_free(m);
    gw_meter_free(meter);
}
END_TEST

/* A NUL byte makes its own line malformed, and only that line. */
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
    ck_assert_uint_eq(b->num_records, 2);
    ck_assert_str_eq(b->records[0].sandbox, "second");
    ck_assert_str_eq(b->records[1].sandbox, "third");
    gw_metering_free(m);
}
END_TEST

/* Redis down at two exits in a row: the malformed lines of the first file
 * are not lost when the second run replaces it. */
START_TEST(test_spill_rewrite_keeps_malformed_lines_aside)
{
    FILE *f = fopen(spill, "w");
    gw_meter_t *meter = gw_meter_new();
    char *err = NULL, *aside, *text;
    gw_metering_t *m;

    fprintf(f, "{\"sandbox\":\"old\",\"project\":\"p\",\"egress\":5,\"ingress\":6,\"from_ms\":1,\"to_ms\":2,"
               "\"gateway\":\"gw-test\",\"seq\":77}\n");
    fprintf(f, "{\"sandbox\": \"hand-edited\", \"egress\": \n");
    fclose(f);
    m = new_metering(spill, NOW);
    ck_assert_ptr_null(find_set_aside());
    gw_meter_add(meter, "new", 1, 0, NOW);
    gw_metering_submit(m, meter, NOW);
    ck_assert_int_eq(gw_metering_write_spill(m, &err), 0);
    ck_assert_uint_eq(count_lines(spill), 2); /* old and new */
    ck_assert_ptr_nonnull(aside = find_set_aside());
    text = slurp(aside);
    ck_assert_ptr_nonnull(strstr(text, "hand-edited"));
    free(text);
    free(aside);
    gw_metering_free(m);
    gw_meter_free(meter);
}
END_TEST

static Suite *spill_suite(void)
{
    Suite *s = suite_create("spill");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_spill_write_and_replay);
    tcase_add_test(tc, test_spill_rewrite_keeps_unreplayed_records);
    tcase_add_test(tc, test_spill_malformed_lines_are_skipped);
    tcase_add_test(tc, test_parse_spill_line);
    tcase_add_test(tc, test_spill_file_is_locked);
    tcase_add_test(tc, test_spill_survives_odd_projects);
    tcase_add_test(tc, test_spill_skips_a_record_it_cannot_write);
    tcase_add_test(tc, test_spill_line_with_nul);
    tcase_add_test(tc, test_spill_rewrite_keeps_malformed_lines_aside);
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
