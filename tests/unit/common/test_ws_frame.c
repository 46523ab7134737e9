/* Unit tests for common/ws_frame.c: headers through every split of the
 * input (one byte at a time too), the three length forms, masking both
 * ways, the control-frame rules, close payloads and fragmentation. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/ws_frame.h"

static const uint8_t KEY[4] = {0x37, 0xfa, 0x21, 0x3d};

/* field by field: the struct has padding */
static int header_eq(const gw_ws_header_t *a, const gw_ws_header_t *b)
{
    return a->fin == b->fin && a->opcode == b->opcode && a->masked == b->masked && memcmp(a->mask, b->mask, 4) == 0 &&
           a->payload_len == b->payload_len;
}

/* A stream of frames: header + payload each, recorded for comparison. */
typedef struct {
    uint8_t bytes[200000];
    size_t len;
    gw_ws_header_t headers[16];
    size_t count;
} stream_t;

static void add_frame(stream_t *s, int fin, int opcode, uint64_t plen, const uint8_t *mask)
{
    gw_ws_header_t *h = &s->headers[s->count++];
    uint64_t i;

    s->len += gw_ws_header_encode(s->bytes + s->len, fin, opcode, plen, mask);
    for (i = 0; i != plen; ++i)
        s->bytes[s->len++] = (uint8_t)(i * 7 + 1);
    h->fin = (uint8_t)fin;
    h->opcode = (uint8_t)opcode;
    h->masked = mask != NULL;
    if (mask != NULL)
        memcpy(h->mask, mask, 4);
    else
        memset(h->mask, 0, 4);
    h->payload_len = plen;
}

/* Walks the stream fed in pieces of `chunk` bytes (the first piece `first`
 * bytes): every header found must be the one recorded. */
static void walk(const stream_t *s, gw_ws_from_t from, size_t first, size_t chunk)
{
    gw_ws_parser_t p;
    size_t off = 0, found = 0, piece = first;
    uint64_t skip = 0;

    gw_ws_parser_init(&p, from);
    while (off < s->len) {
        size_t n = piece < s->len - off ? piece : s->len - off, used;
        const uint8_t *src = s->bytes + off;
        off += n;
        piece = chunk;
        while (n != 0) {
            if (skip != 0) {
                size_t k = skip < n ? (size_t)skip : n;
                skip -= k, src += k, n -= k;
                continue;
            }
            gw_ws_parse_t r = gw_ws_parse(&p, src, n, &used);
            ck_assert_int_ne(r, GW_WS_PARSE_ERROR);
            ck_assert_uint_le(used, n);
            src += used, n -= used;
            if (r == GW_WS_PARSE_NEED_MORE) {
                ck_assert_uint_eq(n, 0);
                continue;
            }
            ck_assert_uint_lt(found, s->count);
            ck_assert(header_eq(&p.header, &s->headers[found]));
            skip = p.header.payload_len;
            ++found;
        }
    }
    ck_assert_uint_eq(skip, 0);
    ck_assert_uint_eq(found, s->count);
}

static void build(stream_t *s, const uint8_t *mask)
{
    memset(s, 0, sizeof(*s));
    add_frame(s, 1, GW_WS_OP_BINARY, 0, mask);
    add_frame(s, 1, GW_WS_OP_BINARY, 125, mask);
    add_frame(s, 0, GW_WS_OP_TEXT, 126, mask); /* 16-bit length */
    add_frame(s, 1, GW_WS_OP_PING, 5, mask);   /* a control frame inside a message */
    add_frame(s, 0, GW_WS_OP_CONTINUATION, 0xffff, mask);
    add_frame(s, 1, GW_WS_OP_CONTINUATION, 0x10000, mask); /* 64-bit length */
    add_frame(s, 1, GW_WS_OP_PONG, 0, mask);
    add_frame(s, 1, GW_WS_OP_CLOSE, 2, mask);
}

START_TEST(test_every_split)
{
    static stream_t s;
    size_t first;
    int side;

    for (side = 0; side != 2; ++side) {
        build(&s, side ? KEY : NULL);
        /* the first piece ends at every byte of the headers' region */
        for (first = 1; first <= 400; ++first)
            walk(&s, side ? GW_WS_FROM_CLIENT : GW_WS_FROM_SERVER, first, s.len);
        walk(&s, side ? GW_WS_FROM_CLIENT : GW_WS_FROM_SERVER, s.len, s.len); /* all at once */
        walk(&s, GW_WS_FROM_EITHER, 3, 3);
    }
}
END_TEST

START_TEST(test_one_byte_at_a_time)
{
    static stream_t s;

    build(&s, NULL);
    walk(&s, GW_WS_FROM_SERVER, 1, 1);
    build(&s, KEY);
    walk(&s, GW_WS_FROM_CLIENT, 1, 1);
    walk(&s, GW_WS_FROM_CLIENT, 2, 13);
}
END_TEST

/* Every split of one header: consumed counts add up to its length exactly. */
START_TEST(test_header_splits)
{
    uint8_t h[GW_WS_MAX_HEADER + 1];
    size_t n = gw_ws_header_encode(h, 1, GW_WS_OP_BINARY, 1ull << 40, KEY), a, used, total;
    gw_ws_parser_t p;

    ck_assert_uint_eq(n, 14);
    h[n] = 0xaa; /* the payload's first byte */
    for (a = 0; a <= n; ++a) {
        gw_ws_parser_init(&p, GW_WS_FROM_CLIENT);
        total = 0;
        if (a != 0) {
            ck_assert_int_eq(gw_ws_parse(&p, h, a, &used), a == n ? GW_WS_PARSE_DONE : GW_WS_PARSE_NEED_MORE);
            ck_assert_uint_eq(used, a);
            total = used;
        }
        if (a != n) {
            ck_assert_int_eq(gw_ws_parse(&p, h + a, n + 1 - a, &used), GW_WS_PARSE_DONE);
            total += used;
        }
        ck_assert_uint_eq(total, n);
        ck_assert_uint_eq(p.header.payload_len, 1ull << 40);
        ck_assert_int_eq(memcmp(p.header.mask, KEY, 4), 0);
    }
}
END_TEST

START_TEST(test_length_forms)
{
    static const struct {
        uint64_t len;
        size_t header;
    } cases[] = {{0, 2}, {125, 2}, {126, 4}, {0xffff, 4}, {0x10000, 10}, {(1ull << 63) - 1, 10}};
    uint8_t h[GW_WS_MAX_HEADER];
    gw_ws_header_t out;
    size_t i;

    for (i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        size_t n = gw_ws_header_encode(h, 1, GW_WS_OP_BINARY, cases[i].len, NULL);
        ck_assert_uint_eq(n, cases[i].header);
        ck_assert_int_eq(gw_ws_header_decode(h, n, GW_WS_FROM_SERVER, &out, NULL, NULL), (int)n);
        ck_assert_uint_eq(out.payload_len, cases[i].len);
        ck_assert_int_eq(gw_ws_header_decode(h, n - 1, GW_WS_FROM_SERVER, &out, NULL, NULL), 0);
        n = gw_ws_header_encode(h, 1, GW_WS_OP_BINARY, cases[i].len, KEY);
        ck_assert_uint_eq(n, cases[i].header + 4);
        ck_assert_int_eq(gw_ws_header_decode(h, n, GW_WS_FROM_CLIENT, &out, NULL, NULL), (int)n);
        ck_assert_uint_eq(out.payload_len, cases[i].len);
    }
    /* RFC 6455 5.7 examples */
    ck_assert_int_eq(gw_ws_header_decode((const uint8_t *)"\x81\x05", 2, GW_WS_FROM_SERVER, &out, NULL, NULL), 2);
    ck_assert_uint_eq(out.opcode, GW_WS_OP_TEXT);
    ck_assert_uint_eq(out.payload_len, 5);
    ck_assert_int_eq(gw_ws_header_decode((const uint8_t *)"\x82\x7e\x01\x00", 4, GW_WS_FROM_SERVER, &out, NULL, NULL), 4);
    ck_assert_uint_eq(out.payload_len, 256);
    ck_assert_int_eq(
        gw_ws_header_decode((const uint8_t *)"\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10, GW_WS_FROM_SERVER, &out, NULL, NULL),
        10);
    ck_assert_uint_eq(out.payload_len, 65536);
}
END_TEST

static void refused(const char *bytes, size_t len, gw_ws_from_t from, uint16_t code)
{
    gw_ws_header_t out;
    gw_ws_parser_t p;
    const char *err = NULL;
    uint16_t got = 0;
    size_t i, used;
    gw_ws_parse_t r = GW_WS_PARSE_NEED_MORE;

    ck_assert_int_eq(gw_ws_header_decode((const uint8_t *)bytes, len, from, &out, &err, &got), -1);
    ck_assert_ptr_nonnull(err);
    ck_assert_uint_eq(got, code);
    /* one byte at a time: refused too, at the latest on the last byte */
    gw_ws_parser_init(&p, from);
    for (i = 0; i != len && r == GW_WS_PARSE_NEED_MORE; ++i)
        r = gw_ws_parse(&p, (const uint8_t *)bytes + i, 1, &used);
    ck_assert_int_eq(r, GW_WS_PARSE_ERROR);
    ck_assert_uint_eq(p.close_code, code);
}

START_TEST(test_refused)
{
    refused("\xc2\x00", 2, GW_WS_FROM_SERVER, 1002);                                  /* RSV1 */
    refused("\xa2\x00", 2, GW_WS_FROM_SERVER, 1002);                                  /* RSV2 */
    refused("\x92\x00", 2, GW_WS_FROM_SERVER, 1002);                                  /* RSV3 */
    refused("\x83\x00", 2, GW_WS_FROM_SERVER, 1002);                                  /* opcode 3 */
    refused("\x87\x00", 2, GW_WS_FROM_SERVER, 1002);                                  /* opcode 7 */
    refused("\x8b\x00", 2, GW_WS_FROM_SERVER, 1002);                                  /* opcode 11 */
    refused("\x8f\x00", 2, GW_WS_FROM_SERVER, 1002);                                  /* opcode 15 */
    refused("\x09\x00", 2, GW_WS_FROM_SERVER, 1002);                                  /* a Ping without FIN */
    refused("\x08\x00", 2, GW_WS_FROM_SERVER, 1002);                                  /* a Close without FIN */
    refused("\x89\x7e\x00\x7e", 4, GW_WS_FROM_SERVER, 1002);                          /* a Ping of 126 bytes */
    refused("\x8a\x7f", 2, GW_WS_FROM_SERVER, 1002);                                  /* a Pong with a 64-bit length */
    refused("\x82\x80\x01\x02\x03\x04", 6, GW_WS_FROM_SERVER, 1002);                  /* a server masks */
    refused("\x82\x00", 2, GW_WS_FROM_CLIENT, 1002);                                  /* a client does not */
    refused("\x82\x7e\x00\x7d", 4, GW_WS_FROM_SERVER, 1002);                          /* 16 bits for 125 */
    refused("\x82\x7f\x00\x00\x00\x00\x00\x00\xff\xff", 10, GW_WS_FROM_SERVER, 1002); /* 64 bits for 65535 */
    refused("\x82\x7f\x80\x00\x00\x00\x00\x00\x00\x00", 10, GW_WS_FROM_SERVER, 1009); /* the top bit */
}
END_TEST

START_TEST(test_control_frames_allowed)
{
    gw_ws_header_t out;
    uint8_t h[GW_WS_MAX_HEADER];
    size_t n = gw_ws_header_encode(h, 1, GW_WS_OP_PING, 125, KEY);

    ck_assert_int_eq(gw_ws_header_decode(h, n, GW_WS_FROM_CLIENT, &out, NULL, NULL), 6);
    ck_assert_uint_eq(out.opcode, GW_WS_OP_PING);
    ck_assert_uint_eq(out.fin, 1);
    ck_assert_uint_eq(out.masked, 1);
    n = gw_ws_header_encode(h, 1, GW_WS_OP_PONG, 0, NULL);
    ck_assert_int_eq(gw_ws_header_decode(h, n, GW_WS_FROM_EITHER, &out, NULL, NULL), 2);
    ck_assert_uint_eq(out.masked, 0);
}
END_TEST

START_TEST(test_mask)
{
    uint8_t buf[100], orig[100], piece[100];
    size_t i, cut;

    for (i = 0; i != sizeof(buf); ++i)
        orig[i] = buf[i] = (uint8_t)(i * 31);
    gw_ws_mask(buf, sizeof(buf), KEY, 0);
    for (i = 0; i != sizeof(buf); ++i)
        ck_assert_uint_eq(buf[i], orig[i] ^ KEY[i % 4]);
    /* in two pieces at every cut, with the offset: the same bytes */
    for (cut = 0; cut <= sizeof(buf); ++cut) {
        memcpy(piece, orig, sizeof(piece));
        gw_ws_mask(piece, cut, KEY, 0);
        gw_ws_mask(piece + cut, sizeof(piece) - cut, KEY, cut);
        ck_assert_int_eq(memcmp(piece, buf, sizeof(buf)), 0);
    }
    gw_ws_mask(buf, sizeof(buf), KEY, 0);
    ck_assert_int_eq(memcmp(buf, orig, sizeof(buf)), 0);
    /* RFC 6455 5.7: "Hello" masked with 37 fa 21 3d */
    memcpy(buf, "Hello", 5);
    gw_ws_mask(buf, 5, KEY, 0);
    ck_assert_int_eq(memcmp(buf, "\x7f\x9f\x4d\x51\x58", 5), 0);
}
END_TEST

START_TEST(test_close_codes)
{
    ck_assert_int_eq(gw_ws_close_code_is_valid(1000), 1);
    ck_assert_int_eq(gw_ws_close_code_is_valid(1002), 1);
    ck_assert_int_eq(gw_ws_close_code_is_valid(1011), 1);
    ck_assert_int_eq(gw_ws_close_code_is_valid(3000), 1);
    ck_assert_int_eq(gw_ws_close_code_is_valid(4403), 1);
    ck_assert_int_eq(gw_ws_close_code_is_valid(4999), 1);
    ck_assert_int_eq(gw_ws_close_code_is_valid(999), 0);
    ck_assert_int_eq(gw_ws_close_code_is_valid(1004), 0);
    ck_assert_int_eq(gw_ws_close_code_is_valid(1005), 0);
    ck_assert_int_eq(gw_ws_close_code_is_valid(1006), 0);
    ck_assert_int_eq(gw_ws_close_code_is_valid(1015), 0);
    ck_assert_int_eq(gw_ws_close_code_is_valid(2999), 0);
    ck_assert_int_eq(gw_ws_close_code_is_valid(5000), 0);
}
END_TEST

START_TEST(test_close_payload)
{
    uint8_t p[GW_WS_MAX_CONTROL_PAYLOAD], f[2 + GW_WS_MAX_CONTROL_PAYLOAD];
    char long_reason[300];
    const uint8_t *reason;
    size_t n, rlen;
    uint16_t code;
    gw_ws_header_t h;

    n = gw_ws_close_encode(p, 4403, "revoked", 7);
    ck_assert_uint_eq(n, 9);
    ck_assert_int_eq(gw_ws_close_parse(p, n, &code, &reason, &rlen), 0);
    ck_assert_uint_eq(code, 4403);
    ck_assert_uint_eq(rlen, 7);
    ck_assert_int_eq(memcmp(reason, "revoked", 7), 0);
    ck_assert_int_eq(gw_ws_close_parse(p, 0, &code, &reason, &rlen), 0);
    ck_assert_uint_eq(code, GW_WS_CLOSE_NO_STATUS);
    ck_assert_int_eq(gw_ws_close_parse(p, 1, &code, &reason, &rlen), -1);
    ck_assert_int_eq(gw_ws_close_parse((const uint8_t *)"\x03\xed", 2, &code, &reason, &rlen), -1);     /* 1005 */
    ck_assert_int_eq(gw_ws_close_parse((const uint8_t *)"\x03\xe8\xff", 3, &code, &reason, &rlen), -1); /* not UTF-8 */
    /* a long reason is cut to 123 bytes, at a character boundary */
    memset(long_reason, 'a', sizeof(long_reason));
    memcpy(long_reason + 121, "\xc3\xa9", 2); /* bytes 121-122 are one character: it fits */
    ck_assert_uint_eq(gw_ws_close_encode(p, 1000, long_reason, sizeof(long_reason)), 125);
    memset(long_reason, 'a', sizeof(long_reason));
    memcpy(long_reason + 122, "\xc3\xa9", 2); /* bytes 122-123: it does not */
    ck_assert_uint_eq(gw_ws_close_encode(p, 1000, long_reason, sizeof(long_reason)), 124);
    ck_assert_int_eq(gw_ws_close_parse(p, 124, &code, &reason, &rlen), 0);
    /* the whole frame */
    n = gw_ws_close_frame_encode(f, 1000, "", 0);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(memcmp(f, "\x88\x02\x03\xe8", 4), 0);
    n = gw_ws_close_frame_encode(f, 1011, long_reason, sizeof(long_reason));
    ck_assert_int_eq(gw_ws_header_decode(f, n, GW_WS_FROM_SERVER, &h, NULL, NULL), 2);
    ck_assert_uint_eq(h.payload_len, n - 2);
    ck_assert_uint_le(h.payload_len, 125);
}
END_TEST

START_TEST(test_sequence)
{
    gw_ws_header_t start = {.fin = 0, .opcode = GW_WS_OP_BINARY}, cont = {.fin = 0, .opcode = GW_WS_OP_CONTINUATION},
                   end = {.fin = 1, .opcode = GW_WS_OP_CONTINUATION}, ping = {.fin = 1, .opcode = GW_WS_OP_PING},
                   whole = {.fin = 1, .opcode = GW_WS_OP_TEXT};
    int in = 0;

    ck_assert_int_eq(gw_ws_sequence_check(&in, &cont), -1); /* a continuation first */
    ck_assert_int_eq(gw_ws_sequence_check(&in, &whole), 0);
    ck_assert_int_eq(gw_ws_sequence_check(&in, &start), 0);
    ck_assert_int_eq(in, 1);
    ck_assert_int_eq(gw_ws_sequence_check(&in, &ping), 0); /* control frames interleave */
    ck_assert_int_eq(gw_ws_sequence_check(&in, &cont), 0);
    ck_assert_int_eq(gw_ws_sequence_check(&in, &whole), -1); /* a new message inside one */
    ck_assert_int_eq(gw_ws_sequence_check(&in, &end), 0);
    ck_assert_int_eq(in, 0);
    ck_assert_int_eq(gw_ws_sequence_check(&in, &end), -1);
}
END_TEST

/* RFC 6455 1.3's example handshake */
START_TEST(test_accept)
{
    char out[GW_WS_ACCEPT_SIZE];
    size_t n = gw_ws_accept_encode(out, "dGhlIHNhbXBsZSBub25jZQ==", 24);

    ck_assert_uint_eq(n, 28);
    ck_assert_mem_eq(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", 28);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ws_frame");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_every_split);
    tcase_add_test(tc, test_one_byte_at_a_time);
    tcase_add_test(tc, test_header_splits);
    tcase_add_test(tc, test_length_forms);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_control_frames_allowed);
    tcase_add_test(tc, test_mask);
    tcase_add_test(tc, test_close_codes);
    tcase_add_test(tc, test_close_payload);
    tcase_add_test(tc, test_sequence);
    tcase_add_test(tc, test_accept);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
