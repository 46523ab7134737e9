/*
 * http/acme.c: which challenge paths become a Redis read (gw_acme_token):
 * base64url tokens of 1 to GW_ACME_TOKEN_MAX characters, nothing else.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "http/acme.h"

static int token(const char *path, h2o_iovec_t *out)
{
    return gw_acme_token(h2o_iovec_init(path, strlen(path)), out);
}

START_TEST(valid)
{
    h2o_iovec_t t;

    ck_assert_int_eq(token("/.well-known/acme-challenge/rOazHsuXqWQPsQx0bp5IlATa2OoYeqfHri1MQjkQBGc", &t), 0);
    ck_assert_uint_eq(t.len, 43);
    ck_assert(memcmp(t.base, "rOaz", 4) == 0);
    ck_assert_int_eq(token("/.well-known/acme-challenge/a", &t), 0);
    ck_assert_int_eq(token("/.well-known/acme-challenge/A-_z9", &t), 0);
}
END_TEST

START_TEST(invalid)
{
    static const char *bad[] = {
        "/.well-known/acme-challenge",     "/.well-known/acme-challenge/",   "/.well-known/acme-challenge/a.b",
        "/.well-known/acme-challenge/a/b", "/.well-known/acme-challenge/a=", "/.well-known/acme-challenge/a%41",
        "/.well-known/acme-challenge/a}b", "/.well-known/acme-challengex/a", "/.well-known/ACME-challenge/a",
        "/x/.well-known/acme-challenge/a", "/.well-known/acme-challenge/a b"};
    char longest[200];
    h2o_iovec_t t;
    size_t i, prefix = strlen(GW_ACME_PATH "/");

    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i)
        ck_assert_msg(token(bad[i], &t) == -1, "%s", bad[i]);
    memcpy(longest, GW_ACME_PATH "/", prefix);
    memset(longest + prefix, 'a', GW_ACME_TOKEN_MAX);
    longest[prefix + GW_ACME_TOKEN_MAX] = '\0';
    ck_assert_int_eq(token(longest, &t), 0);
    longest[prefix + GW_ACME_TOKEN_MAX] = 'a';
    longest[prefix + GW_ACME_TOKEN_MAX + 1] = '\0';
    ck_assert_int_eq(token(longest, &t), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("acme");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, valid);
    tcase_add_test(tc, invalid);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
