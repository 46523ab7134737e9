/* Unit tests for upstream/ws_track.c: frame boundaries toward the client,
 * the gateway's Pongs dropped from the client's stream (whole, cut, after
 * other frames), the client's own Pongs passed; the budget's refusal cut
 * exactly at the refused frame's header in every split, the client's
 * frames read for their length only. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "upstream/ws_track.h"

static size_t masked(uint8_t *d, int op, const char *p)
{
    static const uint8_t k[4] = {1, 2, 3, 4};
    size_t n = strlen(p), i, h = gw_ws_header_encode(d, 1, op, n, k);
    for (i = 0; i != n; ++i)
        d[h + i] = (uint8_t)p[i] ^ k[i % 4];
    return h + n;
}

/* Feeds the stream in pieces of `chunk` bytes as a tunnel would (the input
 * keeps what was not consumed); returns the bytes forwarded in out. */
static size_t forward(const uint8_t *stream, size_t len, size_t chunk, uint8_t *out, size_t *drops)
{
    uint8_t input[4096];
    size_t have = 0, fed = 0, outlen = 0, n;
    gw_ws_track_t t;

    gw_ws_track_init(&t, GW_WS_FROM_CLIENT);
    t.drop_pongs = 1;
    *drops = 0;
    while (fed < len || have != 0) {
        size_t k = chunk < len - fed ? chunk : len - fed;
        memcpy(input + have, stream + fed, k);
        have += k, fed += k;
        while (gw_ws_track_from_client(&t, input, have, 0, &n) == GW_WS_TRACK_DROP) {
            memmove(input, input + n, have - n);
            have -= n;
            gw_ws_track_consumed(&t, n);
            ++*drops;
        }
        memcpy(out + outlen, input, n);
        outlen += n;
        memmove(input, input + n, have - n);
        have -= n;
        gw_ws_track_consumed(&t, n);
        if (k == 0 && n == 0)
            break;
    }
    return outlen;
}

START_TEST(test_gateway_pongs_dropped)
{
    uint8_t stream[1024], want[1024], out[1024];
    size_t len = 0, wlen = 0, chunk, drops, n;

    len += masked(stream + len, GW_WS_OP_PONG, GW_WS_PING_PREFIX "6");
    wlen += n = masked(want + wlen, GW_WS_OP_PONG, "the client's own");
    memcpy(stream + len, want + wlen - n, n), len += n;
    wlen += n = masked(want + wlen, GW_WS_OP_BINARY, "data between");
    memcpy(stream + len, want + wlen - n, n), len += n;
    len += masked(stream + len, GW_WS_OP_PONG, GW_WS_PING_PREFIX "7");
    wlen += n = masked(want + wlen, GW_WS_OP_TEXT, "still there?");
    memcpy(stream + len, want + wlen - n, n), len += n;
    for (chunk = 1; chunk <= len; ++chunk) {
        memset(out, 0, sizeof(out));
        ck_assert_uint_eq(forward(stream, len, chunk, out, &drops), wlen);
        ck_assert_int_eq(memcmp(out, want, wlen), 0);
        ck_assert_uint_eq(drops, 2);
    }
}
END_TEST

/* Feeds `stream` in pieces of `chunk` bytes to a tracker with drop_pongs and
 * a budget, as a tunnel would, until the budget refuses a frame; returns
 * the bytes forwarded before it (in out) and the close code in *code (0:
 * never refused). */
static size_t forward_bounded(const uint8_t *stream, size_t len, size_t chunk, const gw_ws_budget_conf_t *conf, uint8_t *out,
                              uint16_t *code)
{
    uint8_t input[4096];
    size_t have = 0, fed = 0, outlen = 0, n;
    gw_ws_track_result_t r;
    gw_ws_track_t t;

    gw_ws_track_init(&t, GW_WS_FROM_CLIENT);
    t.drop_pongs = 1;
    gw_ws_budget_init(&t.budget, conf, 0);
    *code = 0;
    while (fed < len || have != 0) {
        size_t k = chunk < len - fed ? chunk : len - fed;
        memcpy(input + have, stream + fed, k);
        have += k, fed += k;
        while ((r = gw_ws_track_from_client(&t, input, have, 0, &n)) == GW_WS_TRACK_DROP) {
            memmove(input, input + n, have - n);
            have -= n;
            gw_ws_track_consumed(&t, n);
        }
        memcpy(out + outlen, input, n);
        outlen += n;
        memmove(input, input + n, have - n);
        have -= n;
        gw_ws_track_consumed(&t, n);
        if (r == GW_WS_TRACK_REFUSE) {
            *code = t.refused;
            /* it stays refused, and nothing more passes */
            ck_assert_int_eq(gw_ws_track_from_client(&t, input, have, 1000000, &n), GW_WS_TRACK_REFUSE);
            ck_assert_uint_eq(n, 0);
            break;
        }
        if (k == 0 && n == 0)
            break;
    }
    return outlen;
}

/* A budget of 10 frames (1 a second): the 11th frame is refused at its
 * first byte, whatever the split; the gateway's Pong is dropped and charged
 * once; the first 10 frames all pass. The same for a header declaring more
 * than the message bound. */
START_TEST(test_refused_frame_cut_at_its_header)
{
    static const uint8_t k[4] = {1, 2, 3, 4};
    gw_ws_budget_conf_t rate = {.frames_per_second = 1}, size = {.max_message_bytes = 300};
    uint8_t stream[1024], want[1024], out[1024];
    size_t len = 0, wlen = 0, chunk, n, i;
    uint16_t code;

    for (i = 0; i != 11; ++i) {
        if (i == 5)
            len += masked(stream + len, GW_WS_OP_PONG, GW_WS_PING_PREFIX "7");
        n = masked(stream + len, i == 0 ? GW_WS_OP_TEXT : GW_WS_OP_CONTINUATION, "x");
        stream[len] &= 0x7f; /* fragments of one message */
        if (i < 9) {
            memcpy(want + wlen, stream + len, n);
            wlen += n;
        }
        len += n;
    }
    for (chunk = 1; chunk <= len; ++chunk) {
        ck_assert_uint_eq(forward_bounded(stream, len, chunk, &rate, out, &code), wlen);
        ck_assert_int_eq(memcmp(out, want, wlen), 0);
        ck_assert_uint_eq(code, GW_WS_CLOSE_POLICY);
    }

    /* 200 bytes of a message, then a fragment of 101: refused at its header, split anywhere */
    len = wlen = 0;
    len += gw_ws_header_encode(stream + len, 0, GW_WS_OP_BINARY, 200, k);
    memset(stream + len, 0x89, 200), len += 200;
    memcpy(want, stream, len), wlen = len;
    len += gw_ws_header_encode(stream + len, 1, GW_WS_OP_CONTINUATION, 101, k);
    memset(stream + len, 0, 101), len += 101;
    for (chunk = 1; chunk <= len; ++chunk) {
        ck_assert_uint_eq(forward_bounded(stream, len, chunk, &size, out, &code), wlen);
        ck_assert_int_eq(memcmp(out, want, wlen), 0);
        ck_assert_uint_eq(code, GW_WS_CLOSE_TOO_BIG);
    }
}
END_TEST

/* A client's frames are read for their length only: reserved bits
 * (permessage-deflate's RSV1), an unmasked frame, a reserved opcode and a
 * length not in its shortest form are walked, not a stop to the tracking. */
START_TEST(test_client_frames_read_for_their_length)
{
    static const uint8_t odd[] = {0xc1, 0x83, 1,    2,    3, 4, 'a', 'b', 'c',  /* RSV1 */
                                  0x82, 0x02, 'h',  'i',                        /* unmasked */
                                  0x83, 0x80, 0,    0,    0, 0,                 /* reserved opcode 3 */
                                  0x82, 0xfe, 0x00, 0x01, 0, 0, 0,   0,   'z'}; /* a 16-bit length of 1 */
    gw_ws_budget_conf_t conf = {.max_message_bytes = 3};
    uint8_t stream[256], out[256];
    size_t len = sizeof(odd);
    uint16_t code;

    memcpy(stream, odd, len);
    /* a fifth frame over the message bound: each of the four was walked to its end, so it is found */
    len += gw_ws_header_encode(stream + len, 1, GW_WS_OP_BINARY, 4, (const uint8_t *)"\1\2\3\4");
    memcpy(stream + len, "four", 4), len += 4;
    ck_assert_uint_eq(forward_bounded(stream, len, 1, &conf, out, &code), sizeof(odd));
    ck_assert_uint_eq(code, GW_WS_CLOSE_TOO_BIG);
}
END_TEST

START_TEST(test_boundaries_to_client)
{
    uint8_t s[300];
    size_t h = gw_ws_header_encode(s, 1, GW_WS_OP_BINARY, 200, NULL), cut;
    gw_ws_track_t t;

    memset(s + h, 0x89, 200); /* payload bytes that look like a Ping header */
    for (cut = 0; cut <= h + 200; ++cut) {
        gw_ws_track_init(&t, GW_WS_FROM_SERVER);
        ck_assert_int_eq(gw_ws_track_to_client(&t, s, cut), cut == 0 || cut == h + 200);
        gw_ws_track_consumed(&t, cut);
        ck_assert_int_eq(gw_ws_track_to_client(&t, s + cut, h + 200 - cut), 1);
    }
    /* a compressed frame (permessage-deflate's RSV1): its boundaries are tracked */
    gw_ws_track_init(&t, GW_WS_FROM_SERVER);
    ck_assert_int_eq(gw_ws_track_to_client(&t, (const uint8_t *)"\xc2\x02zz\xc1\x00", 6), 1);
    ck_assert_int_eq(gw_ws_track_to_client(&t, (const uint8_t *)"\xc2\x02zz\xc1\x00\xc2\x02", 8), 0);
    /* a masked frame from a server: not WebSocket as the codec reads it, tracking stops */
    gw_ws_track_init(&t, GW_WS_FROM_SERVER);
    ck_assert_int_eq(gw_ws_track_to_client(&t, (const uint8_t *)"\x82\x80\0\0\0\0", 6), 0);
    ck_assert_int_eq(t.broken, 1);
}
END_TEST

START_TEST(test_ping_encode)
{
    uint8_t f[GW_WS_PING_MAX];
    size_t n = gw_ws_ping_encode(f, UINT64_MAX);
    gw_ws_header_t h;

    ck_assert_uint_le(n, GW_WS_PING_MAX);
    ck_assert_int_eq(gw_ws_header_decode(f, n, GW_WS_FROM_SERVER, &h, NULL, NULL), 2);
    ck_assert_uint_eq(h.opcode, GW_WS_OP_PING);
    ck_assert_int_eq(gw_ws_pong_is_ours(f + 2, n - 2), 1);
    ck_assert_int_eq(gw_ws_pong_is_ours((const uint8_t *)"lizard", 6), 0);
}
END_TEST

/* Keepalives are not activity: Pings and Pongs either way (however the
 * bytes are cut) walk without activity; a data frame's header or payload
 * byte, a Close, or a broken stream is activity. */
START_TEST(test_activity)
{
    uint8_t s[512];
    size_t len = 0, h, cut, n;
    gw_ws_track_t t;

    len += gw_ws_header_encode(s + len, 1, GW_WS_OP_PING, 4, NULL);
    memcpy(s + len, "ping", 4), len += 4;
    len += gw_ws_header_encode(s + len, 1, GW_WS_OP_PONG, 0, NULL);
    for (cut = 0; cut <= len; ++cut) {
        gw_ws_track_init(&t, GW_WS_FROM_SERVER);
        gw_ws_track_to_client(&t, s, cut);
        ck_assert_int_eq(gw_ws_track_take_activity(&t), 0);
        gw_ws_track_consumed(&t, cut);
        gw_ws_track_to_client(&t, s + cut, len - cut);
        ck_assert_int_eq(gw_ws_track_take_activity(&t), 0);
    }
    /* a text frame of 100 bytes after them: its payload alone is activity too */
    h = gw_ws_header_encode(s + len, 1, GW_WS_OP_TEXT, 100, NULL);
    memset(s + len + h, 'x', 100);
    gw_ws_track_init(&t, GW_WS_FROM_SERVER);
    gw_ws_track_to_client(&t, s, len + h + 10);
    ck_assert_int_eq(gw_ws_track_take_activity(&t), 1);
    gw_ws_track_consumed(&t, len + h + 10);
    gw_ws_track_to_client(&t, s + len + h + 10, 90);
    ck_assert_int_eq(gw_ws_track_take_activity(&t), 1);
    ck_assert_int_eq(gw_ws_track_take_activity(&t), 0);
    /* from the client: its Ping is no activity, its message is */
    gw_ws_track_init(&t, GW_WS_FROM_CLIENT);
    n = masked(s, GW_WS_OP_PING, "are you there");
    ck_assert_int_eq(gw_ws_track_from_client(&t, s, n, 0, &h), GW_WS_TRACK_PASS);
    ck_assert_uint_eq(h, n);
    ck_assert_int_eq(gw_ws_track_take_activity(&t), 0);
    gw_ws_track_consumed(&t, n);
    n = masked(s, GW_WS_OP_CLOSE, "");
    gw_ws_track_from_client(&t, s, n, 0, &h);
    ck_assert_int_eq(gw_ws_track_take_activity(&t), 1);
    /* not WebSocket: every byte counts */
    gw_ws_track_init(&t, GW_WS_FROM_SERVER);
    gw_ws_track_to_client(&t, (const uint8_t *)"\x82\x80\0\0\0\0", 6);
    ck_assert_int_eq(gw_ws_track_take_activity(&t), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ws_track");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_gateway_pongs_dropped);
    tcase_add_test(tc, test_refused_frame_cut_at_its_header);
    tcase_add_test(tc, test_client_frames_read_for_their_length);
    tcase_add_test(tc, test_boundaries_to_client);
    tcase_add_test(tc, test_ping_encode);
    tcase_add_test(tc, test_activity);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
