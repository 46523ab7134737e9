/*
 * upstream/rfb_walk.c: a view-only viewer's RFB bytes. A whole session
 * (each version and security type the walk knows, then every client
 * message type) comes out as exactly its non-input messages, however it is
 * cut: whole, at every single cut, byte by byte and in pieces of 1 to 16,
 * each piece in a buffer of exactly its length (an over-read shows on the
 * ASan tree). Input messages are dropped body and all, a 1 GiB
 * ClientCutText without being kept; what cannot be sized ends the walk and
 * stays ended. Every prefix and one-byte change of a session walks without
 * a crash and never passes more than it was given (tests/unit/bytes.h).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "upstream/rfb_walk.h"
#include "../bytes.h"

typedef struct st_stream_t {
    uint8_t in[4096], want[4096];
    size_t in_len, want_len;
} stream_t;

static void put(stream_t *s, const void *bytes, size_t len, int passes)
{
    memcpy(s->in + s->in_len, bytes, len);
    s->in_len += len;
    if (passes) {
        memcpy(s->want + s->want_len, bytes, len);
        s->want_len += len;
    }
}

/* The client's side of a handshake: version minor 3, 7 or 8; security 1 (None) or 2 (VNC authentication). */
static void handshake(stream_t *s, int minor, int sec)
{
    char version[] = "RFB 003.00x\n";
    uint8_t response[16], type = (uint8_t)sec, shared = 1;

    version[10] = (char)('0' + minor);
    put(s, version, 12, 1);
    if (minor != 3)
        put(s, &type, 1, 1);
    if (sec == 2) {
        memset(response, 0xA5, sizeof(response));
        put(s, response, sizeof(response), 1);
    }
    put(s, &shared, 1, 1);
}

/* Every client message type the walk sizes, the input ones (dropped) between the others. */
static void messages(stream_t *s)
{
    static const uint8_t set_pixel_format[20] = {0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0};
    static const uint8_t set_encodings[4 + 12] = {2, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 7, 0xFF, 0xFF, 0xFF, 0x21};
    static const uint8_t fbur[10] = {3, 1, 0, 0, 0, 0, 0x07, 0x80, 0x04, 0x38};
    static const uint8_t key[8] = {4, 1, 0, 0, 0, 0, 0, 'a'};
    static const uint8_t pointer[6] = {5, 1, 0, 100, 0, 200};
    static const uint8_t cut[8 + 5] = {6, 0, 0, 0, 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'};
    static const uint8_t cut_ext[8 + 4] = {6, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFC, 0x10, 0, 0, 1}; /* extended: -4 */
    static const uint8_t cont[10] = {150, 1, 0, 0, 0, 0, 0x07, 0x80, 0x04, 0x38};
    static const uint8_t fence[9 + 3] = {248, 0, 0, 0, 0x80, 0, 0, 3, 3, 'a', 'b', 'c'};
    static const uint8_t xvp[4] = {250, 0, 1, 2};
    static const uint8_t desktop_size[8 + 16] = {251, 0, 0x07, 0x80, 0x04, 0x38, 1,    0,    0,    0,
                                                 0,   1, 0,    0,    0,    0,    0x07, 0x80, 0x04, 0x38};
    static const uint8_t qemu_key[12] = {255, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 30};
    static const uint8_t empty_fence[9] = {248, 0, 0, 0, 0, 0, 0, 0, 0};

    put(s, set_pixel_format, sizeof(set_pixel_format), 1);
    put(s, set_encodings, sizeof(set_encodings), 1);
    put(s, key, sizeof(key), 0);
    put(s, fbur, sizeof(fbur), 1);
    put(s, pointer, sizeof(pointer), 0);
    put(s, cut, sizeof(cut), 0);
    put(s, cont, sizeof(cont), 1);
    put(s, cut_ext, sizeof(cut_ext), 0);
    put(s, fence, sizeof(fence), 1);
    put(s, xvp, sizeof(xvp), 0);
    put(s, desktop_size, sizeof(desktop_size), 0);
    put(s, qemu_key, sizeof(qemu_key), 0);
    put(s, empty_fence, sizeof(empty_fence), 1);
    put(s, fbur, sizeof(fbur), 1);
}

/* A 3.3 server's first 16 bytes: its version and the security type it chose. */
static void server33(gw_rfb_walk_t *w, int sec)
{
    uint8_t b[16] = {'R', 'F', 'B', ' ', '0', '0', '3', '.', '0', '0', '3', '\n', 0, 0, 0, (uint8_t)sec};
    ck_assert_int_eq(gw_rfb_walk_server(w, b, 7), 0);
    ck_assert_int_eq(gw_rfb_walk_server(w, b + 7, 9), 0);
    ck_assert(!gw_rfb_walk_wants_server(w));
}

/* Walks `s` in pieces whose sizes `cut` gives (cut(i) for the ith piece); returns what passed, or -1. */
static ssize_t walk_pieces(const stream_t *s, int minor, int sec, size_t (*cut)(size_t, size_t), size_t arg, uint8_t *out)
{
    gw_rfb_walk_t w;
    size_t pos = 0, n = 0, i = 0;
    const char *why;

    gw_rfb_walk_init(&w);
    if (minor == 3)
        server33(&w, sec);
    while (pos < s->in_len) {
        size_t k = cut(i++, arg);
        if (k > s->in_len - pos)
            k = s->in_len - pos;
        uint8_t *piece = malloc(k);
        memcpy(piece, s->in + pos, k);
        ssize_t kept = gw_rfb_walk_client(&w, piece, k, &why);
        if (kept < 0) {
            free(piece);
            return -1;
        }
        ck_assert_uint_le((size_t)kept, k);
        memcpy(out + n, piece, (size_t)kept);
        n += (size_t)kept;
        pos += k;
        free(piece);
    }
    return (ssize_t)n;
}

static size_t cut_fixed(size_t i, size_t arg)
{
    (void)i;
    return arg;
}

static size_t cut_at(size_t i, size_t arg)
{
    return i == 0 ? arg : SIZE_MAX;
}

static size_t cut_varied(size_t i, size_t arg)
{
    return 1 + (i * 7 + arg) % 16;
}

static void check_session(int minor, int sec)
{
    stream_t s = {0};
    uint8_t out[4096];
    size_t k;
    ssize_t n;

    handshake(&s, minor, sec);
    messages(&s);
    for (k = 1; k <= s.in_len; ++k) {
        n = walk_pieces(&s, minor, sec, cut_at, k, out);
        ck_assert_int_eq(n, (ssize_t)s.want_len);
        ck_assert(memcmp(out, s.want, s.want_len) == 0);
    }
    n = walk_pieces(&s, minor, sec, cut_fixed, 1, out);
    ck_assert_int_eq(n, (ssize_t)s.want_len);
    ck_assert(memcmp(out, s.want, s.want_len) == 0);
    for (k = 0; k != 16; ++k) {
        n = walk_pieces(&s, minor, sec, cut_varied, k, out);
        ck_assert_int_eq(n, (ssize_t)s.want_len);
        ck_assert(memcmp(out, s.want, s.want_len) == 0);
    }
}

START_TEST(test_every_version_and_security_every_split)
{
    check_session(3, 1);
    check_session(3, 2);
    check_session(7, 1);
    check_session(7, 2);
    check_session(8, 1);
    check_session(8, 2);
}
END_TEST

/* A ClientInit that asks for the desktop alone (shared 0: the server would disconnect every other viewer) comes out
 * shared, in every version and security type, whole and byte by byte. */
START_TEST(test_client_init_always_shared)
{
    static const int sessions[][2] = {{3, 1}, {3, 2}, {7, 1}, {7, 2}, {8, 1}, {8, 2}};
    size_t i, k;

    for (i = 0; i != sizeof(sessions) / sizeof(sessions[0]); ++i) {
        stream_t s = {0};
        uint8_t out[4096];

        handshake(&s, sessions[i][0], sessions[i][1]);
        s.in[s.in_len - 1] = 0; /* the client's shared flag; want keeps 1 */
        for (k = 1; k <= 2; ++k) {
            ssize_t n = walk_pieces(&s, sessions[i][0], sessions[i][1], cut_fixed, k == 1 ? s.in_len : 1, out);
            ck_assert_int_eq(n, (ssize_t)s.want_len);
            ck_assert_uint_eq(out[n - 1], 1);
        }
    }
}
END_TEST

static gw_rfb_walk_t after_handshake(void)
{
    stream_t s = {0};
    gw_rfb_walk_t w;
    const char *why;

    handshake(&s, 8, 1);
    gw_rfb_walk_init(&w);
    ck_assert_int_eq(gw_rfb_walk_client(&w, s.in, s.in_len, &why), (ssize_t)s.in_len);
    return w;
}

START_TEST(test_types_it_cannot_size_end_the_walk)
{
    static const uint8_t types[] = {1, 7, 8, 127, 149, 151, 249, 252, 253, 254};
    const uint8_t fbur[10] = {3, 1, 0, 0, 0, 0, 0, 1, 0, 1};
    const char *why = NULL;
    uint8_t buf[32];
    size_t i;

    for (i = 0; i != sizeof(types); ++i) {
        gw_rfb_walk_t w = after_handshake();
        memcpy(buf, fbur, sizeof(fbur));
        buf[10] = types[i];
        ck_assert_int_eq(gw_rfb_walk_client(&w, buf, 11, &why), -1);
        ck_assert_ptr_nonnull(why);
        /* and stays ended: nothing passes any more */
        memcpy(buf, fbur, sizeof(fbur));
        ck_assert_int_eq(gw_rfb_walk_client(&w, buf, sizeof(fbur), &why), -1);
    }
    /* QEMU's messages other than its key event */
    gw_rfb_walk_t w = after_handshake();
    buf[0] = 255, buf[1] = 1;
    ck_assert_int_eq(gw_rfb_walk_client(&w, buf, 1, &why), 0);
    ck_assert_int_eq(gw_rfb_walk_client(&w, buf + 1, 1, &why), -1);
}
END_TEST

START_TEST(test_one_gib_cut_text_dropped_without_being_kept)
{
    gw_rfb_walk_t w = after_handshake();
    uint8_t head[8] = {6, 0, 0, 0, 0x40, 0, 0, 0}, fbur[10] = {3, 1, 0, 0, 0, 0, 0, 1, 0, 1};
    size_t chunk = 1 << 20, i;
    uint8_t *body = malloc(chunk);
    const char *why;

    ck_assert_int_eq(gw_rfb_walk_client(&w, head, 5, &why), 0);
    ck_assert_int_eq(gw_rfb_walk_client(&w, head + 5, 3, &why), 0);
    for (i = 0; i != 1024; ++i) {
        /* key events' bytes inside the text are text */
        memset(body, 4, chunk);
        ck_assert_int_eq(gw_rfb_walk_client(&w, body, chunk, &why), 0);
    }
    ck_assert_uint_eq(w.left, 0);
    ck_assert_int_eq(gw_rfb_walk_client(&w, fbur, sizeof(fbur), &why), (ssize_t)sizeof(fbur));
    ck_assert_uint_eq(w.drops, 1);
    free(body);
}
END_TEST

START_TEST(test_handshakes_it_cannot_walk)
{
    const char *why;
    gw_rfb_walk_t w;
    uint8_t buf[32];

    /* another version */
    gw_rfb_walk_init(&w);
    memcpy(buf, "RFB 003.889\n", 12);
    ck_assert_int_eq(gw_rfb_walk_client(&w, buf, 12, &why), -1);
    gw_rfb_walk_init(&w);
    memcpy(buf, "GET / HTTP/1", 12);
    ck_assert_int_eq(gw_rfb_walk_client(&w, buf, 12, &why), -1);
    /* 3.8 with another security type (VeNCrypt, Tight) */
    gw_rfb_walk_init(&w);
    memcpy(buf, "RFB 003.008\n\x13", 13);
    ck_assert_int_eq(gw_rfb_walk_client(&w, buf, 13, &why), -1);
    /* 3.3: the client speaks before the server chose; the server chose another type */
    gw_rfb_walk_init(&w);
    memcpy(buf, "RFB 003.003\n\x01", 13);
    ck_assert_int_eq(gw_rfb_walk_client(&w, buf, 13, &why), -1);
    gw_rfb_walk_init(&w);
    server33(&w, 16);
    ck_assert_int_eq(gw_rfb_walk_client(&w, buf, 13, &why), -1);
    gw_rfb_walk_init(&w);
    server33(&w, 0);
    ck_assert_int_eq(gw_rfb_walk_client(&w, buf, 13, &why), -1);
}
END_TEST

START_TEST(test_server_greeting)
{
    gw_rfb_walk_t w;

    gw_rfb_walk_init(&w);
    ck_assert_int_eq(gw_rfb_walk_server(&w, (const uint8_t *)"RF", 2), 0);
    ck_assert_int_eq(gw_rfb_walk_server(&w, (const uint8_t *)"B 003.008\n", 10), 0);
    gw_rfb_walk_init(&w);
    ck_assert_int_eq(gw_rfb_walk_server(&w, (const uint8_t *)"HTTP/1.1 400", 12), -1);
    gw_rfb_walk_init(&w);
    ck_assert_int_eq(gw_rfb_walk_server(&w, (const uint8_t *)"S", 1), -1);
}
END_TEST

static void walk_any(const char *buf, size_t len, void *data)
{
    gw_rfb_walk_t w;
    const char *why;
    uint8_t *copy = malloc(len != 0 ? len : 1);
    ssize_t n;
    (void)data;

    memcpy(copy, buf, len);
    gw_rfb_walk_init(&w);
    n = gw_rfb_walk_client(&w, copy, len, &why);
    ck_assert(n == -1 || (size_t)n <= len);
    free(copy);
}

START_TEST(test_prefixes_and_mutations)
{
    stream_t s = {0};

    handshake(&s, 8, 1);
    messages(&s);
    gw_bytes_each_prefix((const char *)s.in, s.in_len, walk_any, NULL);
    gw_bytes_each_mutation((const char *)s.in, s.in_len, walk_any, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rfb_walk");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_version_and_security_every_split);
    tcase_add_test(tc, test_client_init_always_shared);
    tcase_add_test(tc, test_types_it_cannot_size_end_the_walk);
    tcase_add_test(tc, test_one_gib_cut_text_dropped_without_being_kept);
    tcase_add_test(tc, test_handshakes_it_cannot_walk);
    tcase_add_test(tc, test_server_greeting);
    tcase_add_test(tc, test_prefixes_and_mutations);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
