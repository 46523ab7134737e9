/*
 * metering/journal.c and journal_format.c: what a run leaves in the journal
 * and the next start replays (as after a SIGKILL: no exit), batches leaving
 * it once written, the file cut at every byte and damaged at every byte
 * (each damaged entry reported and skipped alone, nothing replayed twice),
 * a journal of a later version (refused), a full disk (the write fails, the
 * stale file is set aside, the next write rewrites it), and the file kept
 * small by rewrites.
 */
#include <signal.h>
#include <sys/resource.h>
#include "metering_test.h"

#define REPLID "0123456789abcdef0123456789abcdef01234567"

static void add(gw_metering_t *m, gw_meter_t *meter, const char *sandbox, uint64_t egress, uint64_t now)
{
    gw_meter_add(meter, sandbox, egress, egress / 10, now);
    gw_metering_submit(m, meter, now);
}

/* A run as the gateway makes one, written to the journal step by step:
 * batch 1 executed and acknowledged (written), batch 2 executed and waiting
 * for a replica, batch 3 sealed and never sent, and open counts. Returns
 * the egress still pending: 2000 + 3000 + 400 + 5. */
static uint64_t run(gw_metering_t *m)
{
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *b;
    gw_repl_info_t info = {.is_primary = 1, .replid = REPLID, .offset = 5000, .online_replicas = 1, .best_ack = 1500};

    gw_meter_set_project(meter, "sa", iov("proj \"quoted\" \xc3\xa9"), NOW);
    add(m, meter, "sa", 1000, NOW + 1);
    ck_assert_int_eq(gw_metering_journal_write(m), 0); /* open */
    ck_assert_uint_eq(gw_metering_seal(m, 0), 1);
    b = gw_metering_next_batch(m);
    gw_metering_batch_executed(m, b, REPLID, 1500, 1);
    add(m, meter, "sb", 2000, NOW + 2);
    gw_metering_seal(m, 0);
    b = gw_metering_next_batch(m);
    gw_metering_batch_executed(m, b, REPLID, 3000, 1);
    ck_assert_int_eq(gw_metering_journal_write(m), 0);
    gw_metering_acked(m, &info); /* the first one */
    add(m, meter, "sc", 3000, NOW + 3);
    gw_metering_seal(m, 0);
    add(m, meter, "sa", 400, NOW + 4);
    ck_assert_int_eq(gw_metering_journal_write(m), 0);
    add(m, meter, "sa", 5, NOW + 5);
    ck_assert_int_eq(gw_metering_journal_write(m), 0);
    gw_meter_free(meter);
    return 2000 + 3000 + 400 + 5;
}

static uint64_t pending_egress(gw_metering_t *m)
{
    uint64_t sum = 0;

    for (gw_metering_batch_t *b = m->head; b != NULL; b = b->next)
        sum += b->egress;
    return sum;
}

START_TEST(test_replay_after_a_kill)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_metering_stats_t st;
    gw_metering_batch_t *b;
    uint64_t pending = run(m), max_seq = m->next_seq - 1;

    /* no final flush, no exit: what a SIGKILL leaves */
    gw_metering_free(m);
    m = new_metering(spill, NOW - 3600 * 1000);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_malformed, 0);
    ck_assert_uint_eq(st.spill_replayed, 3); /* sb, sc sealed; sa open */
    ck_assert_uint_eq(pending_egress(m), pending);
    ck_assert_uint_gt(m->next_seq, max_seq);
    b = m->head;
    ck_assert_str_eq(b->records[0].sandbox, "sb");
    ck_assert_int_eq(b->state, GW_METERING_BATCH_EXECUTED);
    ck_assert_str_eq(b->exec_replid, REPLID);
    ck_assert_uint_eq(b->exec_offset, 3000);
    ck_assert_str_eq(b->records[0].gateway, "gw-test");
    ck_assert_uint_eq(b->unknown_since_ms, 0);
    b = b->next;
    ck_assert_str_eq(b->records[0].sandbox, "sc");
    ck_assert_int_eq(b->state, GW_METERING_BATCH_SEALED);
    /* the journal does not say it ran: looked for in the stream before it is executed */
    ck_assert_uint_eq(b->unknown_since_ms, NOW + 3);
    b = b->next; /* the open counts, sealed at start: their own batch, this run's seq */
    ck_assert_str_eq(b->records[0].sandbox, "sa");
    ck_assert_str_eq(b->records[0].project, "proj \"quoted\" \xc3\xa9");
    ck_assert_uint_eq(b->records[0].egress, 405);
    ck_assert_uint_eq(b->records[0].ingress, 40);
    ck_assert_uint_eq(b->records[0].from_ms, NOW + 4);
    ck_assert_uint_eq(b->records[0].to_ms, NOW + 5);
    ck_assert_uint_gt(b->records[0].seq, max_seq);
    ck_assert_ptr_null(b->next);
    gw_metering_free(m);

    /* and the start rewrote it: a second start replays the same, once */
    m = new_metering(spill, NOW);
    ck_assert_uint_eq(pending_egress(m), pending);
    ck_assert_uint_eq(m->num_batches, 3);
    gw_metering_free(m);
}
END_TEST

START_TEST(test_written_batches_leave)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_batch_t *b;
    char *err = NULL;

    add(m, meter, "sa", 1000, NOW);
    gw_metering_seal(m, 0);
    ck_assert_int_eq(gw_metering_journal_write(m), 0);
    b = gw_metering_next_batch(m);
    batch_done(m, b, 1); /* without Sentinel: EXEC answered */
    ck_assert_int_eq(gw_metering_journal_write(m), 0);
    gw_metering_free(m);
    m = new_metering(spill, NOW);
    ck_assert_ptr_null(m->head);
    /* a clean exit with nothing pending removes the journal */
    ck_assert_int_eq(gw_metering_journal_finish(m, &err), 0);
    ck_assert(!file_exists(spill));
    gw_metering_free(m);
    gw_meter_free(meter);
}
END_TEST

/* --- damaged files: gw_journal_parse on every prefix, every flipped byte ------------------------------ */

typedef struct st_seen_t {
    size_t reports;
} seen_t;

static void count_report(void *arg, size_t lineno, const char *why)
{
    (void)lineno;
    (void)why;
    ++((seen_t *)arg)->reports;
}

/* The (seq -> egress) of what a replay holds, sealed and open (open: seq 0). */
static size_t collect(const gw_journal_replay_t *r, uint64_t *seqs, uint64_t *egress, size_t cap)
{
    size_t n = 0;

    for (const gw_metering_batch_t *b = r->head; b != NULL; b = b->next)
        for (size_t i = 0; i != b->num_records && n != cap; ++i, ++n) {
            seqs[n] = b->records[i].seq;
            egress[n] = b->records[i].egress;
        }
    for (gw_hashtab_node_t *nd = gw_hashtab_first(&r->open); nd != NULL && n != cap; nd = gw_hashtab_next(&r->open, nd), ++n) {
        seqs[n] = 0;
        egress[n] = GW_METERING_ENTRY(nd)->rec.egress;
    }
    return n;
}

/* Every record replayed from damaged text is one the text held at some
 * point, with its counts, and no seq comes twice. */
static void check_subset(const gw_journal_replay_t *part, const uint64_t *seqs, const uint64_t *egress, size_t n)
{
    uint64_t ps[64], pe[64];
    size_t pn = collect(part, ps, pe, 64), i, k;

    for (i = 0; i != pn; ++i) {
        for (k = 0; k != i; ++k)
            ck_assert_msg(ps[i] == 0 || ps[k] != ps[i], "seq %llu replayed twice", (unsigned long long)ps[i]);
        if (ps[i] == 0)
            continue; /* open counts: a prefix of the whole's, added up */
        for (k = 0; k != n && seqs[k] != ps[i]; ++k)
            ;
        ck_assert_msg(k != n, "seq %llu was never in the journal", (unsigned long long)ps[i]);
        ck_assert_uint_eq(egress[k], pe[i]);
    }
}

/* Every sealed record the text ever held (whatever later entries say of
 * it): the union over its whole lines' prefixes, each an earlier journal. */
static size_t ever(const char *text, size_t len, uint64_t *seqs, uint64_t *egress, size_t cap)
{
    gw_journal_replay_t r;
    const char *err;
    seen_t seen = {0};
    uint64_t ps[64], pe[64];
    size_t n = 0, pn, i, k;

    for (size_t end = 1; end <= len; ++end) {
        if (text[end - 1] != '\n')
            continue;
        ck_assert_int_eq(gw_journal_parse(text, end, &r, count_report, &seen, &err), 0);
        pn = collect(&r, ps, pe, 64);
        for (i = 0; i != pn; ++i) {
            for (k = 0; k != n && !(seqs[k] == ps[i] && ps[i] != 0); ++k)
                ;
            if (k == n && n != cap && ps[i] != 0) {
                seqs[n] = ps[i];
                egress[n++] = pe[i];
            }
        }
        gw_journal_replay_dispose(&r);
    }
    return n;
}

static char *journal_text(size_t *len)
{
    gw_metering_t *m = new_metering(spill, NOW);
    char *text;

    run(m);
    gw_metering_free(m);
    text = slurp(spill);
    *len = strlen(text);
    return text;
}

START_TEST(test_cut_at_every_byte)
{
    size_t len, n, k;
    char *text = journal_text(&len);
    uint64_t seqs[64], egress[64];
    gw_journal_replay_t whole, part;
    const char *err;
    seen_t seen = {0};

    ck_assert_int_eq(gw_journal_parse(text, len, &whole, count_report, &seen, &err), 0);
    ck_assert_uint_eq(seen.reports, 0);
    ck_assert_uint_eq(collect(&whole, seqs, egress, 64), 3);
    n = ever(text, len, seqs, egress, 64);
    ck_assert_uint_eq(n, 3); /* sa's first batch (written later), sb, sc */
    for (k = 0; k != len; ++k) {
        seen.reports = 0;
        ck_assert_int_eq(gw_journal_parse(text, k, &part, count_report, &seen, &err), 0);
        check_subset(&part, seqs, egress, n);
        /* a cut inside an entry is said (an entry cut at its end is a journal written up to there) */
        if (k != 0 && text[k - 1] != '\n')
            ck_assert_msg(seen.reports >= 1, "a cut at %zu was not reported", k);
        ck_assert_uint_eq(part.malformed, seen.reports);
        gw_journal_replay_dispose(&part);
    }
    gw_journal_replay_dispose(&whole);
    free(text);
}
END_TEST

START_TEST(test_damage_at_every_byte)
{
    size_t len, n, k, header = sizeof(GW_JOURNAL_MAGIC) - 1;
    char *text = journal_text(&len);
    uint64_t seqs[64], egress[64];
    gw_journal_replay_t whole, part;
    const char *err;
    seen_t seen = {0};

    ck_assert_int_eq(gw_journal_parse(text, len, &whole, count_report, &seen, &err), 0);
    n = ever(text, len, seqs, egress, 64);
    for (k = 0; k != len; ++k) {
        char saved = text[k];
        int rc;
        text[k] ^= 0x04;
        seen.reports = 0;
        err = NULL;
        rc = gw_journal_parse(text, len, &part, count_report, &seen, &err);
        if (rc != 0) {
            /* only the version digit can make a "later version": refused whole, nothing replayed */
            ck_assert_uint_eq(k, header);
            ck_assert_ptr_nonnull(err);
            ck_assert_ptr_null(part.head);
        } else {
            ck_assert_msg(seen.reports >= 1, "damage at byte %zu (%c) was not reported", k, saved);
            check_subset(&part, seqs, egress, n);
        }
        gw_journal_replay_dispose(&part);
        text[k] = saved;
    }
    gw_journal_replay_dispose(&whole);
    free(text);
}
END_TEST

START_TEST(test_later_version_is_refused)
{
    static const char text[] = GW_JOURNAL_MAGIC "3\n00000000 {\"t\":\"something new\"}\n";
    gw_metering_conf_t conf = {"lizard:", "gw-test", spill, 0};
    FILE *f = fopen(spill, "wb");
    char *err = NULL, *after;

    fputs(text, f);
    fclose(f);
    ck_assert_ptr_null(gw_metering_new(&conf, NOW, &err));
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(err, "written by a later version of lizard-gateway") != NULL, "%s", err);
    ck_assert_msg(strstr(err, spill) != NULL, "%s", err);
    free(err);
    after = slurp(spill);
    ck_assert_str_eq(after, text); /* left as it is, for that version */
    free(after);
}
END_TEST

/* f under a file size limit of `limit` bytes, lifted before anything else
 * (Check's own messages go through a file too). */
static int limited(gw_metering_t *m, rlim_t limit, int finish, char **err)
{
    struct rlimit lim;
    int rc;

    getrlimit(RLIMIT_FSIZE, &lim);
    lim.rlim_cur = limit;
    setrlimit(RLIMIT_FSIZE, &lim);
    rc = finish ? gw_metering_journal_finish(m, err) : gw_metering_journal_write(m);
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_FSIZE, &lim);
    return rc;
}

/* A full disk (the file size limit, as a small tmpfs would do without root):
 * the write fails and is counted, the file (which now misses what that write
 * had) is set aside so that a crash never replays it as whole, the counts
 * stay; once the disk has room the next write rewrites the journal whole and
 * removes the stale copy. At exit with no room: an error, counted lost by
 * the caller. */
START_TEST(test_full_disk)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_stats_t st;
    char *err = NULL, unwritable[400];
    DIR *d;
    struct dirent *de;

    signal(SIGXFSZ, SIG_IGN);
    add(m, meter, "sa", 1000, NOW);
    ck_assert_int_eq(gw_metering_journal_write(m), 0);
    for (int i = 0; i != 20; ++i) {
        char id[16];
        snprintf(id, sizeof(id), "s%d", i);
        add(m, meter, id, 100 + i, NOW + 1);
    }
    ck_assert_int_eq(limited(m, 300, 0, NULL), -1); /* room for the header and an entry or two */
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.journal_failures, 1);
    ck_assert_uint_eq(st.pending_records, 21);
    ck_assert(!file_exists(spill));
    unwritable[0] = '\0';
    ck_assert_ptr_nonnull(d = opendir(dir));
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".unwritable-") != NULL)
            snprintf(unwritable, sizeof(unwritable), "%s/%s", dir, de->d_name);
    closedir(d);
    ck_assert_msg(unwritable[0] != '\0', "the stale journal was not set aside");
    ck_assert_int_eq(limited(m, 300, 0, NULL), -1); /* still full: retried, said once */
    ck_assert_int_ne(limited(m, 300, 1, &err), 0);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(err, "File too large") != NULL || strstr(err, "space") != NULL, "%s", err);
    free(err);
    err = NULL;

    ck_assert_int_eq(gw_metering_journal_write(m), 0);
    ck_assert(file_exists(spill));
    ck_assert(!file_exists(unwritable));
    gw_metering_free(m);
    m = new_metering(spill, NOW);
    gw_metering_get_stats(m, &st);
    ck_assert_uint_eq(st.spill_replayed, 21);
    ck_assert_uint_eq(st.spill_malformed, 0);
    gw_metering_free(m);
    gw_meter_free(meter);
}
END_TEST

/* A long run with Redis taking everything: the file is rewritten as it
 * grows, and stays within a few times what it holds. */
START_TEST(test_rewrites_keep_it_small)
{
    gw_metering_t *m = new_metering(spill, NOW);
    gw_meter_t *meter = gw_meter_new();
    gw_metering_stats_t st;
    char id[32];

    for (int i = 0; i != 1200; ++i) {
        snprintf(id, sizeof(id), "sandbox%d", i % 50);
        add(m, meter, id, 1000, NOW + (uint64_t)i);
        if (i % 10 == 9) {
            gw_metering_batch_t *b;
            gw_metering_seal(m, 0);
            while ((b = gw_metering_next_batch(m)) != NULL)
                batch_done(m, b, 1);
        }
        ck_assert_int_eq(gw_metering_journal_write(m), 0);
        gw_metering_get_stats(m, &st);
        ck_assert_uint_le(st.journal_bytes, GW_JOURNAL_COMPACT_MIN_BYTES + 64 * 1024);
    }
    gw_metering_free(m);
    gw_meter_free(meter);
}
END_TEST

static Suite *journal_suite(void)
{
    Suite *s = suite_create("journal");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_replay_after_a_kill);
    tcase_add_test(tc, test_written_batches_leave);
    tcase_add_test(tc, test_cut_at_every_byte);
    tcase_add_test(tc, test_damage_at_every_byte);
    tcase_add_test(tc, test_later_version_is_refused);
    tcase_add_test(tc, test_full_disk);
    tcase_add_test(tc, test_rewrites_keep_it_small);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(journal_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
