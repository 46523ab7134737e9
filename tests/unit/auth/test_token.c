/*
 * Unit tests for auth/token.c: SHA-256 of access tokens and the constant-time
 * comparison with the digest the control plane stores.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "auth/token.h"

#define HELLO_SHA256 "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

START_TEST(test_sha256_hex_known_vectors)
{
    char hex[65];

    gw_token_sha256_hex("hello", 5, hex);
    ck_assert_str_eq(hex, HELLO_SHA256);
    gw_token_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, EMPTY_SHA256);
}
END_TEST

START_TEST(test_sha256_raw)
{
    unsigned char raw[32];

    gw_token_sha256("hello", 5, raw);
    ck_assert_uint_eq(raw[0], 0x2c);
    ck_assert_uint_eq(raw[1], 0xf2);
    ck_assert_uint_eq(raw[31], 0x24);
}
END_TEST

START_TEST(test_matches_right_token)
{
    ck_assert_int_eq(gw_token_matches(h2o_iovec_init(H2O_STRLIT("hello")), HELLO_SHA256), 1);
}
END_TEST

START_TEST(test_matches_uppercase_digest)
{
    char upper[65];
    size_t i;

    for (i = 0; i != 64; ++i)
        upper[i] = ('a' <= HELLO_SHA256[i] && HELLO_SHA256[i] <= 'f') ? HELLO_SHA256[i] - 'a' + 'A' : HELLO_SHA256[i];
    upper[64] = '\0';
    ck_assert_int_eq(gw_token_matches(h2o_iovec_init(H2O_STRLIT("hello")), upper), 1);
}
END_TEST

START_TEST(test_wrong_token_does_not_match)
{
    ck_assert_int_eq(gw_token_matches(h2o_iovec_init(H2O_STRLIT("hellO")), HELLO_SHA256), 0);
    ck_assert_int_eq(gw_token_matches(h2o_iovec_init(H2O_STRLIT("hello ")), HELLO_SHA256), 0);
    ck_assert_int_eq(gw_token_matches(h2o_iovec_init(H2O_STRLIT("hell")), HELLO_SHA256), 0);
}
END_TEST

START_TEST(test_empty_token_never_matches)
{
    /* even against the digest of the empty string */
    ck_assert_int_eq(gw_token_matches(h2o_iovec_init("", 0), EMPTY_SHA256), 0);
    ck_assert_int_eq(gw_token_matches(h2o_iovec_init(NULL, 0), EMPTY_SHA256), 0);
}
END_TEST

/* The per-request form: the digest decoded once (by the record), the
 * same answer on every call. */
START_TEST(test_matches_decoded_digest)
{
    unsigned char hello[32], empty[32];
    int i;

    ck_assert_int_eq(h2o_hex_decode(hello, HELLO_SHA256, 64), 0);
    ck_assert_int_eq(h2o_hex_decode(empty, EMPTY_SHA256, 64), 0);
    for (i = 0; i != 3; ++i) {
        ck_assert_int_eq(gw_token_matches_digest(h2o_iovec_init(H2O_STRLIT("hello")), hello), 1);
        ck_assert_int_eq(gw_token_matches_digest(h2o_iovec_init(H2O_STRLIT("hellO")), hello), 0);
        ck_assert_int_eq(gw_token_matches_digest(h2o_iovec_init("", 0), empty), 0);
    }
}
END_TEST

/* Tokens across SHA-256's block boundaries (one block holds up to 55
 * bytes with its padding): digests as Python's hashlib gives them. */
START_TEST(test_sha256_block_boundaries)
{
    static const struct {
        size_t len;
        const char *hex;
    } cases[] = {
        {55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
        {56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"},
        {64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"},
        {200, "aa20c23e3201834050679e1d88941b9a6fed0557c9a705cb2c315e2e63fd486d"},
    };
    char token[200], hex[65];
    size_t i;

    memset(token, 'x', sizeof(token));
    for (i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        gw_token_sha256_hex(token, cases[i].len, hex);
        ck_assert_str_eq(hex, cases[i].hex);
        ck_assert_int_eq(gw_token_matches(h2o_iovec_init(token, cases[i].len), cases[i].hex), 1);
        ck_assert_int_eq(gw_token_matches(h2o_iovec_init(token, cases[i].len - 1), cases[i].hex), 0);
    }
}
END_TEST

START_TEST(test_malformed_expected_never_matches)
{
    h2o_iovec_t hello = h2o_iovec_init(H2O_STRLIT("hello"));
    char buf[80];

    ck_assert_int_eq(gw_token_matches(hello, NULL), 0);
    ck_assert_int_eq(gw_token_matches(hello, ""), 0);
    /* one digit short */
    memcpy(buf, HELLO_SHA256, 63);
    buf[63] = '\0';
    ck_assert_int_eq(gw_token_matches(hello, buf), 0);
    /* one digit long */
    memcpy(buf, HELLO_SHA256, 64);
    buf[64] = '4';
    buf[65] = '\0';
    ck_assert_int_eq(gw_token_matches(hello, buf), 0);
    /* trailing newline, as a sloppy writer might store it */
    memcpy(buf, HELLO_SHA256, 64);
    buf[64] = '\n';
    buf[65] = '\0';
    ck_assert_int_eq(gw_token_matches(hello, buf), 0);
    /* a non-hex digit */
    memcpy(buf, HELLO_SHA256, 65);
    buf[10] = 'g';
    ck_assert_int_eq(gw_token_matches(hello, buf), 0);
    /* the token itself stored instead of its hash */
    ck_assert_int_eq(gw_token_matches(hello, "hello"), 0);
}
END_TEST

START_TEST(test_equal)
{
    ck_assert_int_eq(gw_token_equal("abcd", "abcd", 4), 1);
    ck_assert_int_eq(gw_token_equal("abcd", "abce", 4), 0);
    ck_assert_int_eq(gw_token_equal("xbcd", "abcd", 4), 0);
    ck_assert_int_eq(gw_token_equal("abcd", "abce", 3), 1);
}
END_TEST

static Suite *token_suite(void)
{
    Suite *s = suite_create("token");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_sha256_hex_known_vectors);
    tcase_add_test(tc, test_sha256_raw);
    tcase_add_test(tc, test_sha256_block_boundaries);
    tcase_add_test(tc, test_matches_right_token);
    tcase_add_test(tc, test_matches_uppercase_digest);
    tcase_add_test(tc, test_wrong_token_does_not_match);
    tcase_add_test(tc, test_empty_token_never_matches);
    tcase_add_test(tc, test_matches_decoded_digest);
    tcase_add_test(tc, test_malformed_expected_never_matches);
    tcase_add_test(tc, test_equal);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(token_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
