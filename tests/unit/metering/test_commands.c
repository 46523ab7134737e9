/*
 * metering/commands.c: the commands of a batch, in order, with their keys
 * built whole whatever the prefix and sandbox id lengths.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "metering/commands.h"

#define MAX_COMMANDS 16

typedef struct st_seen_t {
    size_t n;
    size_t fail_at; /* refuse the command with this index; 0: none */
    int argc[MAX_COMMANDS];
    char *argv[MAX_COMMANDS][20];
} seen_t;

static int collect(void *arg, int argc, const char **argv, const size_t *argvlen)
{
    seen_t *s = arg;
    int i;

    if (s->n + 1 == s->fail_at)
        return -1;
    ck_assert_uint_lt(s->n, MAX_COMMANDS);
    s->argc[s->n] = argc;
    for (i = 0; i != argc && i != 20; ++i) {
        s->argv[s->n][i] = malloc(argvlen[i] + 1);
        memcpy(s->argv[s->n][i], argv[i], argvlen[i]);
        s->argv[s->n][i][argvlen[i]] = '\0';
    }
    ++s->n;
    return 0;
}

static void seen_free(seen_t *s)
{
    for (size_t c = 0; c != s->n; ++c)
        for (int i = 0; i != s->argc[c] && i != 20; ++i)
            free(s->argv[c][i]);
}

static gw_metering_record_t record(const char *sandbox, uint64_t egress, uint64_t seq)
{
    gw_metering_record_t r = {.project = (char *)"p", .egress = egress, .ingress = 7, .from_ms = 1, .to_ms = 2, .seq = seq};
    snprintf(r.sandbox, sizeof(r.sandbox), "%s", sandbox);
    return r;
}

START_TEST(test_commands_of_a_batch)
{
    gw_metering_record_t recs[2] = {record("aaa", 100, 5), record("bbb", 200, 6)};
    gw_metering_batch_t b = {.records = recs, .num_records = 2};
    seen_t s = {0};

    recs[1].gateway = (char *)"old-gw"; /* replayed from a spill file */
    ck_assert_int_eq(gw_metering_emit_batch("lizard:", "gw-1", &b, collect, &s), 4);
    ck_assert_uint_eq(s.n, 4);
    ck_assert_int_eq(s.argc[0], 19);
    ck_assert_str_eq(s.argv[0][0], "XADD");
    ck_assert_str_eq(s.argv[0][1], "lizard:egress");
    ck_assert_str_eq(s.argv[0][4], "aaa");
    ck_assert_str_eq(s.argv[0][8], "100");
    ck_assert_str_eq(s.argv[0][16], "gw-1");
    ck_assert_str_eq(s.argv[0][18], "5");
    ck_assert_int_eq(s.argc[1], 3);
    ck_assert_str_eq(s.argv[1][0], "INCRBY");
    ck_assert_str_eq(s.argv[1][1], "lizard:egress:{aaa}");
    ck_assert_str_eq(s.argv[1][2], "100");
    ck_assert_str_eq(s.argv[2][16], "old-gw");
    ck_assert_str_eq(s.argv[3][1], "lizard:egress:{bbb}");
    seen_free(&s);

    /* a command that cannot be queued stops the batch */
    s = (seen_t){.fail_at = 2};
    ck_assert_int_eq(gw_metering_emit_batch("lizard:", "gw-1", &b, collect, &s), -1);
    ck_assert_uint_eq(s.n, 1);
    seen_free(&s);
}
END_TEST

START_TEST(test_long_prefix_and_id_make_whole_keys)
{
    char prefix[1001], id[GW_SANDBOX_ID_MAX + 1], want[1200];
    gw_metering_record_t rec;
    gw_metering_batch_t b = {.records = &rec, .num_records = 1};
    seen_t s = {0};

    memset(prefix, 'p', sizeof(prefix) - 2);
    prefix[sizeof(prefix) - 2] = ':';
    prefix[sizeof(prefix) - 1] = '\0';
    memset(id, 'z', sizeof(id) - 1);
    id[sizeof(id) - 1] = '\0';
    rec = record(id, 1, 1);
    ck_assert_uint_eq(strlen(rec.sandbox), GW_SANDBOX_ID_MAX);
    ck_assert_int_eq(gw_metering_emit_batch(prefix, "gw-1", &b, collect, &s), 2);
    snprintf(want, sizeof(want), "%segress", prefix);
    ck_assert_str_eq(s.argv[0][1], want);
    snprintf(want, sizeof(want), "%segress:{%s}", prefix, id);
    ck_assert_uint_eq(strlen(s.argv[1][1]), 1000 + strlen("egress:{}") + GW_SANDBOX_ID_MAX);
    ck_assert_str_eq(s.argv[1][1], want);
    seen_free(&s);
}
END_TEST

/* A page of XREVRANGE: found by (gateway, seq), or the id the next page ends before. */
START_TEST(test_search_page)
{
    redisReader *rd = redisReaderCreate();
    const char text[] = "*2\r\n"
                        "*2\r\n$3\r\n9-1\r\n*4\r\n$7\r\ngateway\r\n$4\r\ngw-2\r\n$3\r\nseq\r\n$2\r\n17\r\n"
                        "*2\r\n$3\r\n8-0\r\n*4\r\n$3\r\nseq\r\n$2\r\n17\r\n$7\r\ngateway\r\n$4\r\ngw-1\r\n";
    void *reply = NULL;
    char last[64];

    ck_assert_int_eq(redisReaderFeed(rd, text, sizeof(text) - 1), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_int_eq(gw_metering_search_page(reply, "gw-1", 17, last, sizeof(last)), 1);
    ck_assert_int_eq(gw_metering_search_page(reply, "gw-1", 18, last, sizeof(last)), 0);
    ck_assert_str_eq(last, ""); /* fewer than a page: nothing older to read */
    ck_assert_int_eq(gw_metering_search_page(reply, "gw-3", 17, last, sizeof(last)), 0);
    freeReplyObject(reply);
    ck_assert_int_eq(gw_metering_search_page(NULL, "gw-1", 17, last, sizeof(last)), -1);
    redisReaderFree(rd);
}
END_TEST

static Suite *commands_suite(void)
{
    Suite *s = suite_create("commands");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_commands_of_a_batch);
    tcase_add_test(tc, test_long_prefix_and_id_make_whole_keys);
    tcase_add_test(tc, test_search_page);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(commands_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
