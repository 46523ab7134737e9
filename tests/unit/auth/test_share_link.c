/*
 * Unit tests for auth/share_link.c: the lzs1 format against vectors minted by
 * the independent Python implementation (tests/integration/share_link_ref.py),
 * every refusal, and the key list.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <h2o/string_.h>
#include "auth/share_link.h"
#include "../bytes.h"

#define NOW 1700000000u
#define EXP (NOW + 3600u)
#define MAX_TTL 604800u
#define SECRET1 "0123456789abcdef0123456789abcdef"
#define SECRET2 "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345-rotated"
/* share_link_ref.mint('k1', SECRET1, 'sbx7f3a9', 3000, 1700003600, 0) */
#define VECTOR1 "lzs1.c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE.rvx0HYHyTlzUKbJisux-2PuRzOVDbC5EaT2dnvL89AA"
/* share_link_ref.mint('k2.old', SECRET2, 'sbx7f3a9', 8080, 1700003600, 7) */
#define VECTOR2 "lzs1.c2J4N2YzYTl8ODA4MHwxNzAwMDAzNjAwfDd8azIub2xk.ROJqAS8WOLmQjx7N3ZdLnqx-wT0MHAICYPao-oVUtuY"

static h2o_mem_pool_t pool;
static gw_link_key_t *keys;
static size_t num_keys;
static const uint64_t epoch0 = 0, epoch7 = 7;

static void setup(void)
{
    static const char text[] = "# rotation: k1 signs, k2.old still verifies\n"
                               "k1:" SECRET1 "\n"
                               "\n"
                               "  k2.old:" SECRET2 "  \r\n";
    char *err = NULL;

    h2o_mem_init_pool(&pool);
    ck_assert_int_eq(gw_share_link_keys_parse(text, sizeof(text) - 1, "test", &keys, &num_keys, &err), 0);
    ck_assert_ptr_null(err);
}

static void teardown(void)
{
    gw_share_link_keys_free(keys, num_keys);
    h2o_mem_clear_pool(&pool);
}

static gw_link_result_t verify(const char *token, const char *sandbox, uint16_t port, const uint64_t *epoch, uint64_t now)
{
    return gw_share_link_verify(h2o_iovec_init(token, strlen(token)), keys, num_keys, sandbox, port, epoch, now, MAX_TTL, NULL);
}

START_TEST(test_keys_parsed)
{
    ck_assert_uint_eq(num_keys, 2);
    ck_assert_str_eq(keys[0].kid, "k1");
    ck_assert_uint_eq(keys[0].secret_len, 32);
    ck_assert_int_eq(memcmp(keys[0].secret, SECRET1, 32), 0);
    ck_assert_str_eq(keys[1].kid, "k2.old");
    ck_assert_uint_eq(keys[1].secret_len, strlen(SECRET2));
    ck_assert_ptr_eq(gw_share_link_keys_find(keys, num_keys, "k2.old", 6), &keys[1]);
    ck_assert_ptr_null(gw_share_link_keys_find(keys, num_keys, "k2", 2));
}
END_TEST

START_TEST(test_sign_matches_reference)
{
    h2o_iovec_t t = gw_share_link_sign(&pool, &keys[0], "sbx7f3a9", 3000, 1700003600, 0);

    ck_assert_ptr_nonnull(t.base);
    ck_assert_str_eq(t.base, VECTOR1);
    t = gw_share_link_sign(&pool, &keys[1], "sbx7f3a9", 8080, 1700003600, 7);
    ck_assert_str_eq(t.base, VECTOR2);
}
END_TEST

START_TEST(test_reference_vectors_verify)
{
    gw_share_link_t link;

    ck_assert_int_eq(
        gw_share_link_verify(h2o_iovec_init(H2O_STRLIT(VECTOR1)), keys, num_keys, "sbx7f3a9", 3000, &epoch0, NOW, MAX_TTL, &link),
        GW_LINK_OK);
    ck_assert_str_eq(link.sandbox_id, "sbx7f3a9");
    ck_assert_uint_eq(link.port, 3000);
    ck_assert_uint_eq(link.expires_at, 1700003600);
    ck_assert_uint_eq(link.epoch, 0);
    ck_assert_str_eq(link.kid, "k1");
    /* a rotated (second) key still verifies */
    ck_assert_int_eq(verify(VECTOR2, "sbx7f3a9", 8080, &epoch7, NOW), GW_LINK_OK);
}
END_TEST

START_TEST(test_refusals)
{
    ck_assert_int_eq(verify(VECTOR1, "sbx7f3a9", 3001, &epoch0, NOW), GW_LINK_WRONG_PORT);
    ck_assert_int_eq(verify(VECTOR1, "other", 3000, &epoch0, NOW), GW_LINK_WRONG_SANDBOX);
    ck_assert_int_eq(verify(VECTOR1, "sbx7f3a9", 3000, &epoch0, 1700003600), GW_LINK_EXPIRED);
    ck_assert_int_eq(verify(VECTOR1, "sbx7f3a9", 3000, &epoch0, 1700003599), GW_LINK_OK);
    ck_assert_int_eq(verify(VECTOR1, "sbx7f3a9", 3000, &epoch7, NOW), GW_LINK_REVOKED);
    /* an unreadable link_epoch refuses every link */
    ck_assert_int_eq(verify(VECTOR1, "sbx7f3a9", 3000, NULL, NOW), GW_LINK_REVOKED);
    /* further away than the maximum lifetime */
    ck_assert_int_eq(
        gw_share_link_verify(h2o_iovec_init(H2O_STRLIT(VECTOR1)), keys, num_keys, "sbx7f3a9", 3000, &epoch0, NOW, 3599, NULL),
        GW_LINK_TOO_LONG);
    ck_assert_int_eq(
        gw_share_link_verify(h2o_iovec_init(H2O_STRLIT(VECTOR1)), keys, num_keys, "sbx7f3a9", 3000, &epoch0, NOW, 3600, NULL),
        GW_LINK_OK);
}
END_TEST

START_TEST(test_signature)
{
    char t[sizeof(VECTOR1)];
    size_t i;

    /* every byte of the signature and of the payload counts */
    for (i = 5; i != sizeof(VECTOR1) - 1; ++i) {
        gw_link_result_t r;
        memcpy(t, VECTOR1, sizeof(t));
        if (t[i] == '.')
            continue;
        t[i] = t[i] == 'A' ? 'B' : 'A';
        r = verify(t, "sbx7f3a9", 3000, &epoch0, NOW);
        ck_assert_msg(r != GW_LINK_OK, "byte %zu altered still verifies", i);
    }
    /* the last signature character */
    memcpy(t, VECTOR1, sizeof(t));
    t[sizeof(t) - 2] = t[sizeof(t) - 2] == 'A' ? 'B' : 'A';
    ck_assert_int_eq(verify(t, "sbx7f3a9", 3000, &epoch0, NOW), GW_LINK_BAD_SIGNATURE);
    /* the same payload under another secret of a known kid */
    gw_link_key_t forged = keys[0];
    forged.secret = (unsigned char *)"ffffffffffffffffffffffffffffffff";
    h2o_iovec_t f = gw_share_link_sign(&pool, &forged, "sbx7f3a9", 3000, EXP, 0);
    ck_assert_int_eq(verify(f.base, "sbx7f3a9", 3000, &epoch0, NOW), GW_LINK_BAD_SIGNATURE);
    /* a kid the gateway does not have */
    gw_link_key_t unknown = keys[0];
    memcpy(unknown.kid, "k9", 3);
    f = gw_share_link_sign(&pool, &unknown, "sbx7f3a9", 3000, EXP, 0);
    ck_assert_int_eq(verify(f.base, "sbx7f3a9", 3000, &epoch0, NOW), GW_LINK_UNKNOWN_KEY);
}
END_TEST

START_TEST(test_malformed)
{
    static const char *const bad[] = {
        "",
        "lzs1.",
        "lzs1..",
        "lzs2.c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE.rvx0HYHyTlzUKbJisux-2PuRzOVDbC5EaT2dnvL89AA",
        /* signature one character short, one long */
        "lzs1.c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE.rvx0HYHyTlzUKbJisux-2PuRzOVDbC5EaT2dnvL89A",
        "lzs1.c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE.rvx0HYHyTlzUKbJisux-2PuRzOVDbC5EaT2dnvL89AAA",
        /* standard base64 characters are not base64url */
        "lzs1.c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE.rvx0HYHyTlzUKbJisux+2PuRzOVDbC5EaT2dnvL89AA",
        /* padding */
        "lzs1.c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE=.rvx0HYHyTlzUKbJisux-2PuRzOVDbC5EaT2dnvL89AA",
        /* a third part */
        "lzs1.c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE.rvx0HYHyTlzUKbJisux-2PuRzOVDbC5EaT2dnvL89AA.x",
    };
    size_t i;

    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i)
        ck_assert_msg(verify(bad[i], "sbx7f3a9", 3000, &epoch0, NOW) == GW_LINK_MALFORMED, "bad[%zu]", i);
    ck_assert(!gw_share_link_is(h2o_iovec_init(H2O_STRLIT("0123456789abcdef"))));
    ck_assert(gw_share_link_is(h2o_iovec_init(H2O_STRLIT(VECTOR1))));
}
END_TEST

/* Payloads outside the format, correctly signed (a control plane's bug): refused as malformed. */
START_TEST(test_signed_but_malformed_payload)
{
    static const char *const payloads[] = {
        "SBX|3000|1700003600|0|k1", "sbx|03000|1700003600|0|k1", "sbx|0|1700003600|0|k1",         "sbx|65536|1700003600|0|k1",
        "sbx|3000|-1|0|k1",         "sbx|3000|1700003600|01|k1", "sbx|3000|1700003600|0|k1|more", "sbx|3000|1700003600|k1",
    };
    size_t i;

    for (i = 0; i != sizeof(payloads) / sizeof(payloads[0]); ++i) {
        /* sign by hand: the C signer refuses to produce these */
        char encoded[256], token[512];
        size_t n = h2o_base64_encode(encoded, payloads[i], strlen(payloads[i]), 1);
        unsigned char mac[32];
        unsigned int mac_len;
        char sig[64];
        snprintf(token, sizeof(token), "lzs1.%.*s", (int)n, encoded);
        HMAC(EVP_sha256(), SECRET1, 32, (unsigned char *)token, strlen(token), mac, &mac_len);
        h2o_base64_encode(sig, mac, 32, 1);
        snprintf(token + strlen(token), sizeof(token) - strlen(token), ".%s", sig);
        ck_assert_msg(verify(token, "sbx", 3000, &epoch0, NOW) == GW_LINK_MALFORMED, "payload %s", payloads[i]);
    }
}
END_TEST

/* "lzs1." P "." S with S the right MAC of "lzs1." P under SECRET1: what a
 * control plane with a sloppy encoder would mint. */
static void sign_by_hand(const char *encoded_payload, char *token, size_t size)
{
    unsigned char mac[32];
    unsigned int mac_len;
    char sig[64];

    snprintf(token, size, "lzs1.%s", encoded_payload);
    HMAC(EVP_sha256(), SECRET1, 32, (unsigned char *)token, strlen(token), mac, &mac_len);
    h2o_base64_encode(sig, mac, 32, 1);
    snprintf(token + strlen(token), size - strlen(token), ".%s", sig);
}

/* Strict base64url without padding (CONTRACT.md, Share links): a payload
 * that decodes to the right bytes but is not their one unpadded base64url
 * spelling is refused even when signed as sent. */
START_TEST(test_strict_base64url)
{
    /* VECTOR1's payload; its last character 'E' carries 4 bits, 2 of them unused */
    static const char canonical[] = "c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE";
    static const char *const others[] = {
        "c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE=",   /* padded */
        "c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE==",  /* over-padded */
        "c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azF",    /* unused bits set: decodes to the same bytes */
        "c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azH",    /* the same, both bits */
        "c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8azE%3D", /* a percent-encoded pad is not decoded here */
        "c2J4N2YzYTl8MzAwMHwxNzAwMDAzNjAwfDB8a",      /* 4n+1 characters: not base64 at all */
    };
    char token[512];
    size_t i;

    sign_by_hand(canonical, token, sizeof(token));
    ck_assert_str_eq(token, VECTOR1);
    ck_assert_int_eq(verify(token, "sbx7f3a9", 3000, &epoch0, NOW), GW_LINK_OK);
    for (i = 0; i != sizeof(others) / sizeof(others[0]); ++i) {
        sign_by_hand(others[i], token, sizeof(token));
        ck_assert_msg(verify(token, "sbx7f3a9", 3000, &epoch0, NOW) == GW_LINK_MALFORMED, "payload %s", others[i]);
    }
    /* a padded signature, and one whose last character's unused bits are set */
    snprintf(token, sizeof(token), "%s=", VECTOR1);
    ck_assert_int_eq(verify(token, "sbx7f3a9", 3000, &epoch0, NOW), GW_LINK_MALFORMED);
    snprintf(token, sizeof(token), "%s", VECTOR1);
    ck_assert(token[strlen(token) - 1] == 'A');
    token[strlen(token) - 1] = 'B'; /* 'A' and 'B' differ only in the 2 bits a 43-character spelling does not use */
    ck_assert_int_eq(verify(token, "sbx7f3a9", 3000, &epoch0, NOW), GW_LINK_BAD_SIGNATURE);
}
END_TEST

START_TEST(test_sign_refuses_outside_format)
{
    ck_assert_ptr_null(gw_share_link_sign(&pool, &keys[0], "Sbx", 3000, EXP, 0).base);
    ck_assert_ptr_null(gw_share_link_sign(&pool, &keys[0], "", 3000, EXP, 0).base);
    ck_assert_ptr_null(gw_share_link_sign(&pool, &keys[0], "sbx", 0, EXP, 0).base);
    ck_assert_ptr_nonnull(gw_share_link_sign(&pool, &keys[0], "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrst", 65535,
                                             UINT64_MAX, UINT64_MAX)
                              .base);
}
END_TEST

static void expect_parse_error(const char *text, const char *fragment)
{
    gw_link_key_t *k;
    size_t n;
    char *err = NULL;

    ck_assert_int_eq(gw_share_link_keys_parse(text, strlen(text), "keys.txt", &k, &n, &err), -1);
    ck_assert_ptr_null(k);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(err, fragment) != NULL, "\"%s\" lacks \"%s\"", err, fragment);
    /* never a secret's byte */
    ck_assert_ptr_null(strstr(err, "0123456789"));
    free(err);
}

START_TEST(test_keys_errors)
{
    expect_parse_error("", "holds no key");
    expect_parse_error("# only a comment\n\n", "holds no key");
    expect_parse_error("k1 " SECRET1 "\n", "line 1: expected <kid>:<secret>");
    expect_parse_error(":" SECRET1 "\n", "line 1: the key id must be");
    expect_parse_error("k 1:" SECRET1 "\n", "letters, digits");
    expect_parse_error("k1:0123456789abcdef0123456789abcde\n", "line 1: the secret of key k1 is shorter than 32 bytes");
    expect_parse_error("k1:" SECRET1 "\n#\nk1:" SECRET1 "x\n", "line 3: the key id k1 appears twice");
    expect_parse_error("a:" SECRET1 "\nb:" SECRET1 "\nc:" SECRET1 "\nd:" SECRET1 "\ne:" SECRET1 "\nf:" SECRET1 "\ng:" SECRET1
                       "\nh:" SECRET1 "\ni:" SECRET1 "\nj:" SECRET1 "\nk:" SECRET1 "\nl:" SECRET1 "\nm:" SECRET1 "\nn:" SECRET1
                       "\no:" SECRET1 "\np:" SECRET1 "\nq:" SECRET1 "\n",
                       "line 17: more than 16 keys");
}
END_TEST

START_TEST(test_keys_load)
{
    char path[] = "/tmp/test_share_link_XXXXXX", *err = NULL;
    gw_link_key_t *k;
    size_t n;
    int fd = mkstemp(path);
    static const char text[] = "kf:" SECRET2 "\n";

    ck_assert_int_ne(fd, -1);
    ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    ck_assert_int_eq(gw_share_link_keys_load(NULL, path, &k, &n, &err), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(k[0].kid, "kf");
    gw_share_link_keys_free(k, n);
    /* others may not read it */
    chmod(path, 0644);
    ck_assert_int_eq(gw_share_link_keys_load(NULL, path, &k, &n, &err), -1);
    ck_assert_ptr_nonnull(strstr(err, "readable or writable by others"));
    free(err);
    unlink(path);

    setenv("TEST_LINK_KEYS", "ke:" SECRET1 "\nkf:" SECRET2, 1);
    ck_assert_int_eq(gw_share_link_keys_load("TEST_LINK_KEYS", NULL, &k, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    gw_share_link_keys_free(k, n);
    unsetenv("TEST_LINK_KEYS");
    ck_assert_int_eq(gw_share_link_keys_load("TEST_LINK_KEYS", NULL, &k, &n, &err), -1);
    ck_assert_str_eq(err, "environment variable TEST_LINK_KEYS is not set or is empty");
    free(err);
}
END_TEST

static void verify_any(const char *buf, size_t len, void *data)
{
    const size_t *full_len = data;
    gw_share_link_t out;
    gw_link_result_t r =
        gw_share_link_verify(h2o_iovec_init(buf, len), keys, num_keys, "sbx7f3a9", 3000, &epoch0, NOW, MAX_TTL, &out);

    (void)gw_share_link_is(h2o_iovec_init(buf, len));
    /* cut off, one byte changed or missing: never a valid link */
    if (len != *full_len)
        ck_assert_msg(r != GW_LINK_OK, "accepted: %.*s", (int)len, buf);
}

START_TEST(test_bytes)
{
    size_t full = sizeof(VECTOR1) - 1;

    ck_assert_int_eq(verify(VECTOR1, "sbx7f3a9", 3000, &epoch0, NOW), GW_LINK_OK);
    gw_bytes_each_prefix(VECTOR1, full - 1, verify_any, &full);
    full = SIZE_MAX;
    gw_bytes_each_mutation(VECTOR1, sizeof(VECTOR1) - 1, verify_any, &full);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("share_link");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_keys_parsed);
    tcase_add_test(tc, test_sign_matches_reference);
    tcase_add_test(tc, test_reference_vectors_verify);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_signature);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_signed_but_malformed_payload);
    tcase_add_test(tc, test_strict_base64url);
    tcase_add_test(tc, test_sign_refuses_outside_format);
    tcase_add_test(tc, test_keys_errors);
    tcase_add_test(tc, test_keys_load);
    suite_add_tcase(s, tc);
    TCase *bytes = tcase_create("bytes");
    /* thousands of parses each, under ASan on a loaded machine: not a time bound, just room */
    tcase_set_timeout(bytes, 120);
    tcase_add_checked_fixture(bytes, setup, teardown);
    tcase_add_test(bytes, test_bytes);
    suite_add_tcase(s, bytes);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
