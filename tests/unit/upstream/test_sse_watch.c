/*
 * upstream/sse_watch.c: which bytes of an event stream are activity. Comment
 * lines and blank lines are not, any field line is; the answer holds for
 * every way the bytes can be cut (CR, LF and CRLF line ends, a CRLF split
 * between two reads).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "upstream/sse_watch.h"

/* Feeds `s` cut at `cut` (and whole at cut 0); returns how many of the two feeds reported activity. */
static int feed_split(const char *s, size_t cut)
{
    gw_sse_watch_t w;
    size_t len = strlen(s);

    gw_sse_watch_init(&w);
    return gw_sse_watch_feed(&w, s, cut) + gw_sse_watch_feed(&w, s + cut, len - cut);
}

/* One byte at a time: the indexes of the bytes that reported activity, as a bit mask of the first 64. */
static uint64_t feed_bytes(const char *s)
{
    gw_sse_watch_t w;
    uint64_t mask = 0;
    size_t i, len = strlen(s);

    gw_sse_watch_init(&w);
    for (i = 0; i != len; ++i)
        if (gw_sse_watch_feed(&w, s + i, 1))
            mask |= UINT64_C(1) << i;
    return mask;
}

START_TEST(test_heartbeats_are_not_activity)
{
    static const char *const quiet[] = {
        ": ping\n\n", ":\n", ": ping\r\n\r\n", ": ping\r\r", "\n\n\r\n\r", ":a\r\n:b\n:c\r:d\r\n", ": a line with data: inside\n",
        ":" /* cut before its end */};
    size_t i, cut;

    for (i = 0; i != sizeof(quiet) / sizeof(quiet[0]); ++i) {
        for (cut = 0; cut <= strlen(quiet[i]); ++cut)
            ck_assert_msg(feed_split(quiet[i], cut) == 0, "%zu cut %zu", i, cut);
        ck_assert_uint_eq(feed_bytes(quiet[i]), 0);
    }
}
END_TEST

START_TEST(test_events_are_activity)
{
    static const char *const loud[] = {
        "data: x\n\n", ": ping\n\ndata: x\n\n", ": ping\r\nevent: e\r\n\r\n", "id: 1\n", "retry: 10\n", "data\n", ": a\rdata: b\r"};
    size_t i, cut;

    for (i = 0; i != sizeof(loud) / sizeof(loud[0]); ++i)
        for (cut = 0; cut <= strlen(loud[i]); ++cut)
            ck_assert_msg(feed_split(loud[i], cut) >= 1, "%zu cut %zu", i, cut);
    /* the line's first byte is the one reported, once per line */
    ck_assert_uint_eq(feed_bytes(": ping\n\ndata: x\n\n"), UINT64_C(1) << 8);
    ck_assert_uint_eq(feed_bytes("data: a\ndata: b\n"), (UINT64_C(1) << 0) | (UINT64_C(1) << 8));
    /* a CRLF cut between its CR and LF: the LF ends nothing more, the next line starts after it */
    ck_assert_uint_eq(feed_bytes(":x\r\n:y\r\nz\n"), UINT64_C(1) << 8);
    /* a field line's rest, fed alone, is not reported again */
    gw_sse_watch_t w;
    gw_sse_watch_init(&w);
    ck_assert_int_eq(gw_sse_watch_feed(&w, "data: a very long", 17), 1);
    ck_assert_int_eq(gw_sse_watch_feed(&w, " line: goes on", 14), 0);
    ck_assert_int_eq(gw_sse_watch_feed(&w, "\n\n: ping\n\n", 10), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sse_watch");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_heartbeats_are_not_activity);
    tcase_add_test(tc, test_events_are_activity);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
