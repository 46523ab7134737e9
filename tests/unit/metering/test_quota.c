/*
 * metering/quota.c: which INCRBY replies of a written batch report a
 * sandbox at or past its egress_quota, once per quota, read in the order
 * gw_metering_emit_batch sends the commands.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include "metering/commands.h"
#include "metering/quota.h"

START_TEST(test_reported_once_per_quota)
{
    gw_quota_watch_t *w = gw_quota_watch_new();

    ck_assert_int_eq(gw_quota_watch_check(w, "a", 0, 1000), 0); /* no quota */
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 100, 99), 0);
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 100, 100), 1);  /* reached, not only passed */
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 100, 100), 0);  /* INCRBY 0 of a batch sent again */
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 100, 5000), 0); /* in-flight responses go on */
    ck_assert_int_eq(gw_quota_watch_check(w, "b", 100, 5000), 1); /* another sandbox */
    /* a record with a quota another worker still had: one more publish, which changes nothing */
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 50, 5000), 1);
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 50, 5001), 0);
    /* the control plane raised it above the total: forgotten, the next crossing is reported */
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 10000, 5100), 0);
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 10000, 9999), 0);
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 10000, 10400), 1);
    ck_assert_int_eq(gw_quota_watch_check(w, "a", 10000, 10500), 0);
    gw_quota_watch_free(w);
    gw_quota_watch_free(NULL);
}
END_TEST

START_TEST(test_bounded)
{
    gw_quota_watch_t *w = gw_quota_watch_new();
    char id[32];

    for (int i = 0; i != GW_QUOTA_WATCH_MAX; ++i) {
        snprintf(id, sizeof(id), "s%d", i);
        ck_assert_int_eq(gw_quota_watch_check(w, id, 10, 10), 1);
    }
    ck_assert_int_eq(gw_quota_watch_check(w, "s0", 10, 11), 0); /* all remembered up to the cap */
    ck_assert_int_eq(gw_quota_watch_check(w, "one-more", 10, 10), 1);
    /* past the cap everything was forgotten: reported once more */
    ck_assert_int_eq(gw_quota_watch_check(w, "s0", 10, 12), 1);
    ck_assert_int_eq(gw_quota_watch_check(w, "one-more", 10, 13), 0);
    gw_quota_watch_free(w);
}
END_TEST

START_TEST(test_merge)
{
    ck_assert_uint_eq(gw_quota_merge(0, 0), 0);
    ck_assert_uint_eq(gw_quota_merge(0, 7), 7);
    ck_assert_uint_eq(gw_quota_merge(7, 0), 7);
    ck_assert_uint_eq(gw_quota_merge(9, 7), 7);
    ck_assert_uint_eq(gw_quota_merge(7, 9), 7);
}
END_TEST

/* A Redis that runs what gw_metering_emit_batch sends: XADD answers an id,
 * INCRBY adds to its key's total; the EXEC reply is built as RESP text. */
typedef struct st_fake_t {
    char keys[8][128];
    long long totals[8];
    size_t num_keys;
    char resp[4096];
    size_t off, replies;
    size_t fail_incrby; /* the INCRBY with this number (1-based) fails; 0: none */
    size_t incrbys;
} fake_t;

static int run_command(void *arg, int argc, const char **argv, const size_t *argvlen)
{
    fake_t *f = arg;
    size_t k;

    ck_assert_int_ge(argc, 3);
    ++f->replies;
    if (argvlen[0] == 4 && memcmp(argv[0], "XADD", 4) == 0) {
        f->off += (size_t)snprintf(f->resp + f->off, sizeof(f->resp) - f->off, "$3\r\n1-0\r\n");
        return 0;
    }
    ck_assert(argvlen[0] == 6 && memcmp(argv[0], "INCRBY", 6) == 0);
    if (++f->incrbys == f->fail_incrby) {
        f->off += (size_t)snprintf(f->resp + f->off, sizeof(f->resp) - f->off, "-ERR value is not an integer\r\n");
        return 0;
    }
    for (k = 0; k != f->num_keys && !(strlen(f->keys[k]) == argvlen[1] && memcmp(f->keys[k], argv[1], argvlen[1]) == 0); ++k)
        ;
    if (k == f->num_keys) {
        ck_assert_uint_lt(k, 8);
        snprintf(f->keys[k], sizeof(f->keys[k]), "%.*s", (int)argvlen[1], argv[1]);
        ++f->num_keys;
    }
    f->totals[k] += strtoll(argv[2], NULL, 10);
    f->off += (size_t)snprintf(f->resp + f->off, sizeof(f->resp) - f->off, ":%lld\r\n", f->totals[k]);
    return 0;
}

static redisReply *exec_reply(fake_t *f)
{
    char text[4200];
    int len = snprintf(text, sizeof(text), "*%zu\r\n%s", f->replies, f->resp);
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;

    ck_assert_int_eq(redisReaderFeed(rd, text, (size_t)len), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_ptr_nonnull(reply);
    redisReaderFree(rd);
    f->off = f->replies = f->incrbys = 0;
    return reply;
}

typedef struct st_calls_t {
    char ids[8][64];
    size_t n;
} calls_t;

static void on_reached(void *arg, const char *sandbox)
{
    calls_t *c = arg;
    ck_assert_uint_lt(c->n, 8);
    snprintf(c->ids[c->n++], sizeof(c->ids[0]), "%s", sandbox);
}

static void add_record(gw_metering_batch_t *b, const char *id, uint64_t egress, uint64_t quota)
{
    gw_metering_record_t *r = b->records + b->num_records++;
    memset(r, 0, sizeof(*r));
    snprintf(r->sandbox, sizeof(r->sandbox), "%s", id);
    r->project = strdup("p");
    r->egress = egress;
    r->egress_quota = quota;
}

/* Sends b to the fake and reads the EXEC reply: the sandboxes reported, in order. */
static size_t flush(gw_quota_watch_t *w, fake_t *f, const gw_metering_batch_t *b, calls_t *c)
{
    redisReply *reply;
    size_t n;

    memset(c, 0, sizeof(*c));
    ck_assert_int_ge(gw_metering_emit_batch("lizard:", "gw", b, run_command, f), 0);
    reply = exec_reply(f);
    n = gw_quota_watch_exec(w, b, reply, on_reached, c);
    freeReplyObject(reply);
    return n;
}

START_TEST(test_exec_reply)
{
    gw_quota_watch_t *w = gw_quota_watch_new();
    gw_metering_batch_t *b = gw_metering_batch_new(4);
    fake_t f = {.num_keys = 0};
    calls_t c;

    /* "open" has no quota, "under" stays under, "over" passes its own, "gone" is one a failed INCRBY hides */
    add_record(b, "open", 5000, 0);
    add_record(b, "under", 100, 1000);
    add_record(b, "over", 700, 600);
    add_record(b, "gone", 900, 100);
    f.fail_incrby = 4;
    ck_assert_uint_eq(flush(w, &f, b, &c), 1);
    ck_assert_str_eq(c.ids[0], "over");
    /* executed again on a primary that lacked it (its INCRBYs add up here, as on one shared total):
     * "under" reaches its 1000 now, "over" was reported at its quota already */
    b->records[1].egress = 900;
    ck_assert_uint_eq(flush(w, &f, b, &c), 1);
    ck_assert_str_eq(c.ids[0], "under");
    gw_metering_batch_free(b);
    gw_quota_watch_free(w);
}
END_TEST

/* A reply shorter than the batch is read as far as it goes. */
START_TEST(test_short_reply)
{
    gw_quota_watch_t *w = gw_quota_watch_new();
    gw_metering_batch_t *b = gw_metering_batch_new(2);
    redisReader *rd = redisReaderCreate();
    const char text[] = "*3\r\n$3\r\n1-0\r\n:700\r\n$3\r\n1-0\r\n";
    void *reply = NULL;
    calls_t c = {.n = 0};

    add_record(b, "first", 700, 600);
    add_record(b, "second", 700, 600);
    ck_assert_int_eq(redisReaderFeed(rd, text, sizeof(text) - 1), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_uint_eq(gw_quota_watch_exec(w, b, reply, on_reached, &c), 1);
    ck_assert_str_eq(c.ids[0], "first");
    freeReplyObject(reply);
    redisReaderFree(rd);
    gw_metering_batch_free(b);
    gw_quota_watch_free(w);
}
END_TEST

static Suite *quota_suite(void)
{
    Suite *s = suite_create("quota");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_reported_once_per_quota);
    tcase_add_test(tc, test_bounded);
    tcase_add_test(tc, test_merge);
    tcase_add_test(tc, test_exec_reply);
    tcase_add_test(tc, test_short_reply);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(quota_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
