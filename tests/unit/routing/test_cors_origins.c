/*
 * routing/cors_origins.c: cors_origins:<n> parsed into the normalized list
 * requests match against; garbage entries ignored one by one (the first
 * reported), "*" noted, "null" never an origin.
 */
#include <check.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <h2o/string_.h>
#include "routing/cors_origins.h"

static char out[1024];

static h2o_iovec_t parse(const char *s, int *any, h2o_iovec_t *bad)
{
    size_t n = gw_cors_origins_parse(s, strlen(s), out, any, bad);
    ck_assert_uint_le(n, strlen(s) + 1);
    return h2o_iovec_init(out, n);
}

START_TEST(test_valid_lists)
{
    h2o_iovec_t bad, l;
    int any;

    l = parse("https://app.example.com", &any, &bad);
    ck_assert(h2o_memis(l.base, l.len, H2O_STRLIT("https://app.example.com,")));
    ck_assert_int_eq(any, 0);
    ck_assert_ptr_null(bad.base);
    /* normalized as browsers serialize: lowercase, default ports dropped, other ports kept, blanks trimmed */
    l = parse(" HTTPS://App.Example.COM:443 ,http://localhost:80,\thttp://127.0.0.1:5173 ,https://[::1]:8443", &any, &bad);
    ck_assert(
        h2o_memis(l.base, l.len, H2O_STRLIT("https://app.example.com,http://localhost,http://127.0.0.1:5173,https://[::1]:8443,")));
    ck_assert(gw_cors_origins_contain(l, h2o_iovec_init(H2O_STRLIT("http://127.0.0.1:5173"))));
    ck_assert(gw_cors_origins_contain(l, h2o_iovec_init(H2O_STRLIT("https://app.example.com"))));
    ck_assert(!gw_cors_origins_contain(l, h2o_iovec_init(H2O_STRLIT("https://app.example.co"))));
    ck_assert(!gw_cors_origins_contain(l, h2o_iovec_init(H2O_STRLIT("https://app.example.com.evil"))));
    ck_assert(!gw_cors_origins_contain(l, h2o_iovec_init(H2O_STRLIT("http://127.0.0.1"))));
    ck_assert(!gw_cors_origins_contain(l, h2o_iovec_init(H2O_STRLIT(""))));
    l = parse("*", &any, &bad);
    ck_assert_int_eq(any, 1);
    ck_assert_uint_eq(l.len, 0);
    l = parse("https://a.example, * ", &any, &bad);
    ck_assert_int_eq(any, 1);
    ck_assert(h2o_memis(l.base, l.len, H2O_STRLIT("https://a.example,")));
}
END_TEST

START_TEST(test_garbage_entries)
{
    static const char *const garbage[] = {"null",
                                          "https://",
                                          "app.example.com",
                                          "https://app.example.com/",
                                          "https://a/b",
                                          "https://u@a.example",
                                          "https://a.example:0",
                                          "https://a.example:65536",
                                          "https://a.example:08",
                                          "ftp:/x",
                                          "://x",
                                          "https://a b",
                                          "https://[::1",
                                          "https://a.example?x",
                                          "\x01",
                                          "https://.a"};
    h2o_iovec_t bad, l;
    size_t i;
    int any;

    for (i = 0; i != sizeof(garbage) / sizeof(garbage[0]); ++i) {
        char list[256];
        snprintf(list, sizeof(list), "https://ok.example,%s,,https://ok2.example", garbage[i]);
        l = parse(list, &any, &bad);
        ck_assert_msg(h2o_memis(l.base, l.len, H2O_STRLIT("https://ok.example,https://ok2.example,")), "%s", garbage[i]);
        ck_assert_msg(bad.base != NULL && h2o_memis(bad.base, bad.len, garbage[i], strlen(garbage[i])), "%s", garbage[i]);
        ck_assert_int_eq(any, 0);
    }
    /* "null" is never in a list, even as a request's Origin against a list that tried */
    l = parse("null", &any, &bad);
    ck_assert(!gw_cors_origins_contain(l, h2o_iovec_init(H2O_STRLIT("null"))));
    /* nothing but commas and blanks */
    l = parse(" , ,, ", &any, &bad);
    ck_assert_uint_eq(l.len, 0);
    ck_assert_ptr_null(bad.base);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cors_origins");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_valid_lists);
    tcase_add_test(tc, test_garbage_entries);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
