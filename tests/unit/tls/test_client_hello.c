/*
 * The ClientHello parser (tls/client_hello.c): a real OpenSSL ClientHello
 * and hand-built ones, whole, fed byte by byte (every prefix needs more) and
 * split over records of every size; each refusal, the two bounds, and the
 * server names OpenSSL's own callback would not take.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/ssl.h>
#include "tls/client_hello.h"

typedef struct st_bytes_t {
    uint8_t *p;
    size_t len;
} bytes_t;

static uint8_t scratch[GW_CLIENT_HELLO_MAX];

static gw_client_hello_result_t parse(const void *buf, size_t len, char *name, size_t *name_len)
{
    return gw_client_hello_parse(buf, len, scratch, name, name_len);
}

static void put(bytes_t *b, const void *p, size_t n)
{
    b->p = realloc(b->p, b->len + n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void put_n(bytes_t *b, size_t v, size_t n)
{
    while (n-- != 0) {
        uint8_t c = (uint8_t)(v >> (8 * n));
        put(b, &c, 1);
    }
}

/* A ClientHello handshake message (header included) with a server_name extension naming `sni` (NULL: none)
 * and `pad` bytes of a padding extension. */
static bytes_t hello_message(const char *sni, size_t sni_len, size_t pad)
{
    bytes_t body = {NULL, 0}, exts = {NULL, 0}, msg = {NULL, 0};
    uint8_t random[32] = {1};

    put_n(&exts, 0x000a, 2), put_n(&exts, 4, 2), put_n(&exts, 2, 2), put_n(&exts, 0x001d, 2); /* supported_groups */
    if (sni != NULL) {
        put_n(&exts, 0, 2), put_n(&exts, sni_len + 5, 2), put_n(&exts, sni_len + 3, 2), put_n(&exts, 0, 1);
        put_n(&exts, sni_len, 2), put(&exts, sni, sni_len);
    }
    if (pad != 0) {
        put_n(&exts, 0x0015, 2), put_n(&exts, pad, 2);
        for (size_t i = 0; i != pad; ++i)
            put_n(&exts, 0, 1);
    }
    put_n(&body, 0x0303, 2), put(&body, random, 32), put_n(&body, 0, 1);                 /* version, random, no session id */
    put_n(&body, 2, 2), put_n(&body, 0x1301, 2), put_n(&body, 1, 1), put_n(&body, 0, 1); /* one suite, null compression */
    put_n(&body, exts.len, 2), put(&body, exts.p, exts.len);
    put_n(&msg, 1, 1), put_n(&msg, body.len, 3), put(&msg, body.p, body.len);
    free(exts.p), free(body.p);
    return msg;
}

/* msg in handshake records of at most `each` bytes */
static bytes_t in_records(bytes_t msg, size_t each)
{
    bytes_t r = {NULL, 0};

    for (size_t off = 0; off < msg.len; off += each) {
        size_t n = msg.len - off < each ? msg.len - off : each;
        put_n(&r, 22, 1), put_n(&r, 0x0301, 2), put_n(&r, n, 2), put(&r, msg.p + off, n);
    }
    return r;
}

/* every prefix of b needs more; b whole (alone and followed by other bytes) is OK with `want` as its name */
static void assert_whole(bytes_t b, const char *want)
{
    char name[GW_CLIENT_HELLO_MAX_NAME + 1];
    size_t name_len;
    uint8_t *more = malloc(b.len + 64);

    for (size_t k = 0; k != b.len; ++k)
        ck_assert_int_eq(parse(b.p, k, name, &name_len), GW_CLIENT_HELLO_MORE);
    memcpy(more, b.p, b.len);
    memset(more + b.len, 0x17, 64);
    for (size_t extra = 0; extra <= 64; extra += 64) {
        ck_assert_int_eq(parse(more, b.len + extra, name, &name_len), GW_CLIENT_HELLO_OK);
        ck_assert_uint_eq(name_len, want != NULL ? strlen(want) : 0);
        if (want != NULL)
            ck_assert_str_eq(name, want);
    }
    free(more);
}

START_TEST(test_openssl_client_hello)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = SSL_new(ctx);
    BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
    bytes_t b;
    char *p;

    SSL_set_bio(ssl, rbio, wbio);
    SSL_set_tlsext_host_name(ssl, "App-1.Customer.example");
    ck_assert_int_le(SSL_connect(ssl), 0); /* the ClientHello written, waiting for the server */
    b.len = (size_t)BIO_get_mem_data(wbio, &p);
    b.p = (uint8_t *)p;
    ck_assert_uint_gt(b.len, 100);
    assert_whole(b, "App-1.Customer.example"); /* as sent: lowercasing is the caller's */
    SSL_free(ssl);
    SSL_CTX_free(ctx);
}
END_TEST

START_TEST(test_split_over_records)
{
    bytes_t msg = hello_message("a.example", 9, 300);

    for (size_t each = 1; each <= msg.len; ++each) {
        bytes_t r = in_records(msg, each);
        char name[GW_CLIENT_HELLO_MAX_NAME + 1];
        size_t name_len;
        ck_assert_int_eq(parse(r.p, r.len, name, &name_len), GW_CLIENT_HELLO_OK);
        ck_assert_str_eq(name, "a.example");
        if (each == 1 || each == 7 || each == msg.len)
            assert_whole(r, "a.example");
        free(r.p);
    }
    free(msg.p);
}
END_TEST

START_TEST(test_names_not_taken)
{
    char big[300];
    bytes_t msg, r;

    memset(big, 'a', sizeof(big));
    msg = hello_message(NULL, 0, 0), r = in_records(msg, 16384);
    assert_whole(r, NULL); /* no server_name */
    free(msg.p), free(r.p);
    msg = hello_message(big, 256, 0), r = in_records(msg, 16384);
    assert_whole(r, NULL); /* over 255 bytes */
    free(msg.p), free(r.p);
    msg = hello_message(big, 255, 0), r = in_records(msg, 16384);
    big[255] = '\0';
    assert_whole(r, big); /* 255: taken */
    free(msg.p), free(r.p);
    msg = hello_message("a\0b", 3, 0), r = in_records(msg, 16384);
    assert_whole(r, NULL); /* a NUL */
    free(msg.p), free(r.p);
    msg = hello_message("", 0, 0), r = in_records(msg, 16384);
    assert_whole(r, NULL); /* empty */
    free(msg.p), free(r.p);
}
END_TEST

START_TEST(test_not_a_client_hello)
{
    char name[GW_CLIENT_HELLO_MAX_NAME + 1];
    size_t name_len;
    static const uint8_t server_hello[] = {22, 3, 3, 0, 4, 2, 0, 0, 0};

    ck_assert_int_eq(parse("GET / HTTP/1.1\r\n", 1, name, &name_len), GW_CLIENT_HELLO_NOT_HELLO);   /* at the first byte */
    ck_assert_int_eq(parse("\x80\x2e\x01\x03\x01", 5, name, &name_len), GW_CLIENT_HELLO_NOT_HELLO); /* SSLv2 */
    ck_assert_int_eq(parse("\x16\x02\x01\x00\x04", 5, name, &name_len), GW_CLIENT_HELLO_NOT_HELLO); /* not version 3.x */
    ck_assert_int_eq(parse(server_hello, 5, name, &name_len), GW_CLIENT_HELLO_MORE);
    ck_assert_int_eq(parse(server_hello, 6, name, &name_len), GW_CLIENT_HELLO_MORE);
    ck_assert_int_eq(parse(server_hello, 9, name, &name_len), GW_CLIENT_HELLO_NOT_HELLO);
}
END_TEST

START_TEST(test_malformed)
{
    char name[GW_CLIENT_HELLO_MAX_NAME + 1];
    size_t name_len;
    bytes_t msg = hello_message("a.example", 9, 0), r = in_records(msg, 16384), b = {NULL, 0};

    ck_assert_int_eq(parse("\x16\x03\x01\x00\x00", 5, name, &name_len), GW_CLIENT_HELLO_MALFORMED); /* an empty record */
    ck_assert_int_eq(parse("\x16\x03\x01\x40\x01", 5, name, &name_len), GW_CLIENT_HELLO_MALFORMED); /* over 2^14 */
    /* the record holds more than the message */
    put_n(&b, 22, 1), put_n(&b, 0x0301, 2), put_n(&b, msg.len + 1, 2), put(&b, msg.p, msg.len);
    ck_assert_int_eq(parse(b.p, b.len, name, &name_len), GW_CLIENT_HELLO_MALFORMED);
    free(b.p), b = (bytes_t){NULL, 0};
    /* the second record is an alert */
    put_n(&b, 22, 1), put_n(&b, 0x0301, 2), put_n(&b, 10, 2), put(&b, msg.p, 10), put_n(&b, 21, 1), put_n(&b, 0x0301, 2);
    ck_assert_int_eq(parse(b.p, b.len, name, &name_len), GW_CLIENT_HELLO_MALFORMED);
    free(b.p);
    /* a host name longer than its list: no name (OpenSSL's callback takes none either), the rest fits */
    r.p[r.len - 10] ^= 0x03; /* the host name's length, 9 -> 10 */
    ck_assert_int_eq(parse(r.p, r.len, name, &name_len), GW_CLIENT_HELLO_OK);
    ck_assert_uint_eq(name_len, 0);
    r.p[r.len - 10] ^= 0x03;
    ck_assert_int_eq(parse(r.p, r.len, name, &name_len), GW_CLIENT_HELLO_OK);
    ck_assert_str_eq(name, "a.example");
    /* the extensions' length disagrees with the message's */
    r.p[5 + 4 + 2 + 32 + 1 + 2 + 2 + 2 + 1] ^= 0x40; /* the extensions' length */
    ck_assert_int_eq(parse(r.p, r.len, name, &name_len), GW_CLIENT_HELLO_MALFORMED);
    r.p[5 + 4 + 2 + 32 + 1 + 2 + 2 + 2 + 1] ^= 0x40;
    r.p[5 + 4 + 2 + 32] = 33; /* a session id over 32 bytes */
    ck_assert_int_eq(parse(r.p, r.len, name, &name_len), GW_CLIENT_HELLO_MALFORMED);
    free(msg.p), free(r.p);
}
END_TEST

START_TEST(test_bounds)
{
    char name[GW_CLIENT_HELLO_MAX_NAME + 1];
    size_t name_len;
    bytes_t msg, r;

    /* the largest message taken, in the largest records */
    msg = hello_message("a.example", 9, 0);
    free(msg.p);
    msg = hello_message("a.example", 9, GW_CLIENT_HELLO_MAX - msg.len - 4);
    ck_assert_uint_eq(msg.len, GW_CLIENT_HELLO_MAX);
    r = in_records(msg, 16384);
    ck_assert_int_eq(parse(r.p, r.len, name, &name_len), GW_CLIENT_HELLO_OK);
    free(r.p);
    /* in 1 KiB records it still fits the input bound */
    r = in_records(msg, 1024);
    ck_assert_uint_le(r.len, GW_CLIENT_HELLO_MAX_INPUT);
    ck_assert_int_eq(parse(r.p, r.len, name, &name_len), GW_CLIENT_HELLO_OK);
    free(r.p);
    /* in 100-byte records it does not: refused once the bound's bytes are there, never waiting for more */
    r = in_records(msg, 100);
    ck_assert_int_eq(parse(r.p, GW_CLIENT_HELLO_MAX_INPUT - 1, name, &name_len), GW_CLIENT_HELLO_MORE);
    ck_assert_int_eq(parse(r.p, GW_CLIENT_HELLO_MAX_INPUT, name, &name_len), GW_CLIENT_HELLO_TOO_LARGE);
    ck_assert_int_eq(parse(r.p, r.len, name, &name_len), GW_CLIENT_HELLO_TOO_LARGE);
    free(r.p), free(msg.p);
    /* one byte more than the bound: refused at its handshake header, before its bytes come */
    msg = hello_message("a.example", 9, 0);
    free(msg.p);
    msg = hello_message("a.example", 9, GW_CLIENT_HELLO_MAX - msg.len - 3);
    r = in_records(msg, 16384);
    ck_assert_int_eq(parse(r.p, 8, name, &name_len), GW_CLIENT_HELLO_MORE);
    ck_assert_int_eq(parse(r.p, 9, name, &name_len), GW_CLIENT_HELLO_TOO_LARGE);
    free(r.p), free(msg.p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("client_hello");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_openssl_client_hello);
    tcase_add_test(tc, test_split_over_records);
    tcase_add_test(tc, test_names_not_taken);
    tcase_add_test(tc, test_not_a_client_hello);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_bounds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
