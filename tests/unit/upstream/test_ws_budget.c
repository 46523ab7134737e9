/*
 * upstream/ws_budget.c: the frame budget of a tunnel's client and the
 * message bound. The allowance is exact (10 s of the rate, not one frame
 * more), time earns the rate back and never more than the allowance, each
 * KiB of payload earns a frame back (a frame of 1 KiB or more costs
 * nothing), a steady stream under the rate is never refused however long
 * it lasts; a message is the sum of its fragments (control frames between
 * them are not part of it, a new message starts over), exactly the bound
 * passes and one byte more is 1009; 0 turns either bound off.
 */
#include <check.h>
#include <stdlib.h>
#include "upstream/ws_budget.h"

static gw_ws_header_t frame(int opcode, int fin, uint64_t len)
{
    gw_ws_header_t h = {.fin = (uint8_t)fin, .opcode = (uint8_t)opcode, .masked = 1, .payload_len = len};
    return h;
}

/* frames charged at `now` until one is refused; returns how many passed (at most `max`) */
static uint64_t until_refused(gw_ws_budget_t *b, gw_ws_header_t h, uint64_t now, uint64_t max)
{
    uint64_t n = 0;

    while (n < max && gw_ws_budget_charge(b, &h, now) == 0)
        ++n;
    return n;
}

START_TEST(test_allowance_is_exact)
{
    gw_ws_budget_conf_t conf = {.frames_per_second = 100};
    gw_ws_budget_t b;
    gw_ws_header_t ping = frame(GW_WS_OP_PING, 1, 0);

    gw_ws_budget_init(&b, &conf, 5000);
    ck_assert_uint_eq(until_refused(&b, frame(GW_WS_OP_CONTINUATION, 0, 1), 5000, 100000), 100 * GW_WS_BUDGET_SECONDS);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &ping, 5000), GW_WS_CLOSE_POLICY);
}
END_TEST

START_TEST(test_time_earns_the_rate_back_up_to_the_allowance)
{
    gw_ws_budget_conf_t conf = {.frames_per_second = 100};
    gw_ws_budget_t b;
    gw_ws_header_t ping = frame(GW_WS_OP_PING, 1, 0);

    gw_ws_budget_init(&b, &conf, 0);
    ck_assert_uint_eq(until_refused(&b, ping, 0, 100000), 1000);
    /* 10 ms: one frame; 1 s: 100 */
    ck_assert_uint_eq(until_refused(&b, ping, 10, 100000), 1);
    ck_assert_uint_eq(until_refused(&b, ping, 1010, 100000), 100);
    /* a clock that goes back earns nothing */
    ck_assert_uint_eq(until_refused(&b, ping, 500, 100000), 0);
    /* a long wait fills the budget to the allowance, not beyond */
    ck_assert_uint_eq(until_refused(&b, ping, 3600 * 1000, 100000), 1000);
    /* 9.99 s after an empty budget: 999 frames */
    ck_assert_uint_eq(until_refused(&b, ping, 3600 * 1000 + 9990, 100000), 999);
}
END_TEST

START_TEST(test_payload_earns_frames_back)
{
    gw_ws_budget_conf_t conf = {.frames_per_second = 10};
    gw_ws_budget_t b;

    gw_ws_budget_init(&b, &conf, 0);
    /* 1 KiB frames cost nothing: a million of them at one instant */
    ck_assert_uint_eq(until_refused(&b, frame(GW_WS_OP_BINARY, 1, GW_WS_BUDGET_BYTES_PER_FRAME), 0, 1000000), 1000000);
    /* half a KiB costs half a frame: twice the allowance */
    gw_ws_budget_init(&b, &conf, 0);
    ck_assert_uint_eq(until_refused(&b, frame(GW_WS_OP_BINARY, 1, GW_WS_BUDGET_BYTES_PER_FRAME / 2), 0, 1000000), 200);
    /* a large frame pays for itself and refills the budget, but not beyond the allowance (earned at most once) */
    gw_ws_budget_init(&b, &conf, 0);
    ck_assert_uint_eq(until_refused(&b, frame(GW_WS_OP_PING, 1, 0), 0, 1000), 100);
    ck_assert_uint_eq(until_refused(&b, frame(GW_WS_OP_BINARY, 1, UINT64_C(1) << 40), 0, 1), 1);
    ck_assert_uint_eq(until_refused(&b, frame(GW_WS_OP_PING, 1, 0), 0, 1000), 99);
}
END_TEST

START_TEST(test_steady_stream_under_the_rate_is_never_refused)
{
    gw_ws_budget_conf_t conf = {.frames_per_second = 10000};
    gw_ws_budget_t b;
    gw_ws_header_t small = frame(GW_WS_OP_TEXT, 1, 20);
    uint64_t ms, i, refused = 0;

    gw_ws_budget_init(&b, &conf, 0);
    /* ten minutes of 10,000 small frames a second, 10 every ms (1 ms earns 10 frames, their payloads 200 bytes) */
    for (ms = 1; ms <= 600 * 1000; ++ms)
        for (i = 0; i != 10; ++i)
            refused += gw_ws_budget_charge(&b, &small, ms) != 0;
    ck_assert_uint_eq(refused, 0);
    /* a burst then spends the allowance saved meanwhile */
    ck_assert_uint_ge(until_refused(&b, small, ms, 1000000), 100000);
}
END_TEST

START_TEST(test_message_is_the_sum_of_its_fragments)
{
    gw_ws_budget_conf_t conf = {.max_message_bytes = 1000};
    gw_ws_budget_t b;
    gw_ws_header_t h;

    gw_ws_budget_init(&b, &conf, 0);
    /* exactly the bound, in one frame, then in fragments with control frames between them */
    h = frame(GW_WS_OP_BINARY, 1, 1000);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), 0);
    h = frame(GW_WS_OP_TEXT, 0, 400);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), 0);
    h = frame(GW_WS_OP_PING, 1, 125);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), 0);
    h = frame(GW_WS_OP_CONTINUATION, 0, 500);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), 0);
    h = frame(GW_WS_OP_PONG, 1, 125);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), 0);
    h = frame(GW_WS_OP_CONTINUATION, 1, 100);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), 0);
    /* the next message starts from 0 */
    h = frame(GW_WS_OP_BINARY, 0, 999);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), 0);
    /* one byte past the bound */
    h = frame(GW_WS_OP_CONTINUATION, 0, 2);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), GW_WS_CLOSE_TOO_BIG);
    /* a single frame over it, and a length no sum can hold */
    gw_ws_budget_init(&b, &conf, 0);
    h = frame(GW_WS_OP_BINARY, 1, 1001);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), GW_WS_CLOSE_TOO_BIG);
    gw_ws_budget_init(&b, &conf, 0);
    h = frame(GW_WS_OP_BINARY, 0, 600);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), 0);
    h = frame(GW_WS_OP_CONTINUATION, 0, UINT64_MAX);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &h, 0), GW_WS_CLOSE_TOO_BIG);
}
END_TEST

START_TEST(test_zero_turns_a_bound_off)
{
    gw_ws_budget_conf_t rate_only = {.frames_per_second = 1}, size_only = {.max_message_bytes = 10};
    gw_ws_budget_t b;
    gw_ws_header_t big = frame(GW_WS_OP_BINARY, 0, UINT64_C(1) << 62), ping = frame(GW_WS_OP_PING, 1, 0);

    gw_ws_budget_init(&b, &rate_only, 0);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &big, 0), 0);
    ck_assert_uint_eq(gw_ws_budget_charge(&b, &big, 0), 0);
    gw_ws_budget_init(&b, &size_only, 0);
    ck_assert_uint_eq(until_refused(&b, ping, 0, 1000000), 1000000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ws_budget");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_allowance_is_exact);
    tcase_add_test(tc, test_time_earns_the_rate_back_up_to_the_allowance);
    tcase_add_test(tc, test_payload_earns_frames_back);
    tcase_add_test(tc, test_steady_stream_under_the_rate_is_never_refused);
    tcase_add_test(tc, test_message_is_the_sum_of_its_fragments);
    tcase_add_test(tc, test_zero_turns_a_bound_off);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
