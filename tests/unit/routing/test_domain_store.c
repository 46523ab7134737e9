/*
 * routing/domain_store.c: which Host values are looked up as custom domains
 * (gw_domain_host_normalize). What is never sent to Redis matters as much as
 * what is: addresses, bad labels, bad port suffixes, over-long names.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "routing/domain_store.h"

static size_t norm(const char *authority, char *out)
{
    return gw_domain_host_normalize(h2o_iovec_init(authority, strlen(authority)), out);
}

static void assert_norm(const char *authority, const char *expected)
{
    char out[GW_DOMAIN_HOST_MAX + 1];
    size_t n = norm(authority, out);
    ck_assert_msg(n == strlen(expected), "\"%s\": length %zu", authority, n);
    ck_assert_str_eq(out, expected);
}

static void assert_refused(const char *authority)
{
    char out[GW_DOMAIN_HOST_MAX + 1];
    ck_assert_msg(norm(authority, out) == 0, "\"%s\" should not be looked up", authority);
}

START_TEST(names)
{
    assert_norm("shop.example.com", "shop.example.com");
    assert_norm("Shop.EXAMPLE.com", "shop.example.com");
    assert_norm("shop.example.com.", "shop.example.com");
    assert_norm("shop.example.com:8443", "shop.example.com");
    assert_norm("shop.example.com.:443", "shop.example.com");
    assert_norm("localhost", "localhost");
    assert_norm("a-b_c.example", "a-b_c.example");
    assert_norm("123.example", "123.example");
}
END_TEST

START_TEST(refused)
{
    assert_refused("");
    assert_refused(".");
    assert_refused(":443");
    assert_refused("a..b");
    assert_refused(".example.com");
    assert_refused("example.com..");
    assert_refused("shop.example.com:");
    assert_refused("shop.example.com:1234567");
    assert_refused("shop.example.com:44x");
    assert_refused("shop.example.com:@evil.example");
    assert_refused("127.0.0.1");
    assert_refused("127.0.0.1:80");
    assert_refused("[::1]");
    assert_refused("[::1]:443");
    assert_refused("::1");
    assert_refused("sh op.example");
    assert_refused("shop/x.example");
    assert_refused("shop%2e.example");
    assert_refused("sh\xc3\xa9.example");
}
END_TEST

START_TEST(lengths)
{
    char name[400], out[GW_DOMAIN_HOST_MAX + 1];
    size_t i;

    /* a 63-byte label is allowed, 64 is not */
    memset(name, 'a', 63);
    memcpy(name + 63, ".x", 3);
    ck_assert_uint_eq(norm(name, out), 65);
    memset(name, 'a', 64);
    memcpy(name + 64, ".x", 3);
    ck_assert_uint_eq(norm(name, out), 0);
    /* 253 bytes in all, not 254 (a trailing dot does not count) */
    for (i = 0; i != 253; ++i)
        name[i] = i % 10 == 9 ? '.' : 'a';
    name[253] = '\0';
    ck_assert_uint_eq(norm(name, out), 253);
    name[253] = '.';
    name[254] = '\0';
    ck_assert_uint_eq(norm(name, out), 253);
    name[253] = 'a';
    ck_assert_uint_eq(norm(name, out), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("domain_store");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, names);
    tcase_add_test(tc, refused);
    tcase_add_test(tc, lengths);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
