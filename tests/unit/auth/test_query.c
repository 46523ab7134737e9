/*
 * Unit tests for auth/query.c: taking ?lizard_token= out of a request target
 * while every other parameter reaches the sandbox byte for byte.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "auth/query.h"
#include "../bytes.h"

static h2o_mem_pool_t pool;
static char value_buf[256], stripped_buf[512];

static void setup(void)
{
    h2o_mem_init_pool(&pool);
}

static void teardown(void)
{
    h2o_mem_clear_pool(&pool);
}

/* Runs gw_query_take for "lizard_token" and copies the outputs into
 * NUL-terminated buffers. value_buf is "(null)" when no value was set. */
static size_t take(const char *path)
{
    h2o_iovec_t value, stripped;
    size_t n =
        gw_query_take(&pool, h2o_iovec_init(path, strlen(path)), h2o_iovec_init(H2O_STRLIT("lizard_token")), &value, &stripped);

    ck_assert_uint_lt(value.len, sizeof(value_buf));
    ck_assert_uint_lt(stripped.len, sizeof(stripped_buf));
    if (value.base == NULL) {
        strncpy(value_buf, "(null)", sizeof(value_buf));
    } else {
        memcpy(value_buf, value.base, value.len);
        value_buf[value.len] = '\0';
    }
    memcpy(stripped_buf, stripped.base, stripped.len);
    stripped_buf[stripped.len] = '\0';
    return n;
}

START_TEST(test_only_parameter)
{
    ck_assert_uint_eq(take("/app?lizard_token=abc123"), 1);
    ck_assert_str_eq(value_buf, "abc123");
    ck_assert_str_eq(stripped_buf, "/app");
}
END_TEST

START_TEST(test_first_parameter)
{
    ck_assert_uint_eq(take("/?lizard_token=tok&a=1&b=2"), 1);
    ck_assert_str_eq(value_buf, "tok");
    ck_assert_str_eq(stripped_buf, "/?a=1&b=2");
}
END_TEST

START_TEST(test_middle_parameter)
{
    ck_assert_uint_eq(take("/x/y?a=1&lizard_token=tok&b=2"), 1);
    ck_assert_str_eq(value_buf, "tok");
    ck_assert_str_eq(stripped_buf, "/x/y?a=1&b=2");
}
END_TEST

START_TEST(test_last_parameter)
{
    ck_assert_uint_eq(take("/?a=1&b=2&lizard_token=tok"), 1);
    ck_assert_str_eq(value_buf, "tok");
    ck_assert_str_eq(stripped_buf, "/?a=1&b=2");
}
END_TEST

START_TEST(test_repeated_parameter)
{
    ck_assert_uint_eq(take("/?lizard_token=first&a=1&lizard_token=second&b=2&lizard_token=third"), 3);
    ck_assert_str_eq(value_buf, "first");
    ck_assert_str_eq(stripped_buf, "/?a=1&b=2");

    ck_assert_uint_eq(take("/?lizard_token=a&lizard_token=b"), 2);
    ck_assert_str_eq(value_buf, "a");
    ck_assert_str_eq(stripped_buf, "/");
}
END_TEST

START_TEST(test_percent_encoded_name)
{
    ck_assert_uint_eq(take("/?a=1&lizard%5Ftoken=tok&b=2"), 1);
    ck_assert_str_eq(value_buf, "tok");
    ck_assert_str_eq(stripped_buf, "/?a=1&b=2");

    ck_assert_uint_eq(take("/?%6C%69zard_token=tok"), 1);
    ck_assert_str_eq(stripped_buf, "/");
}
END_TEST

START_TEST(test_value_percent_decoded_plus_kept)
{
    ck_assert_uint_eq(take("/?lizard_token=a%2Bb%3D%3D"), 1);
    ck_assert_str_eq(value_buf, "a+b==");
    /* '+' is not a space here: base64 tokens survive unencoded links */
    ck_assert_uint_eq(take("/?lizard_token=a+b"), 1);
    ck_assert_str_eq(value_buf, "a+b");
    /* a broken escape is kept literally */
    ck_assert_uint_eq(take("/?lizard_token=a%zzb%4"), 1);
    ck_assert_str_eq(value_buf, "a%zzb%4");
}
END_TEST

START_TEST(test_empty_and_no_value)
{
    ck_assert_uint_eq(take("/?a=1&lizard_token=&b=2"), 1);
    ck_assert_str_eq(value_buf, "");
    ck_assert_str_eq(stripped_buf, "/?a=1&b=2");

    ck_assert_uint_eq(take("/?a=1&lizard_token"), 1);
    ck_assert_str_eq(value_buf, "");
    ck_assert_str_eq(stripped_buf, "/?a=1");
}
END_TEST

START_TEST(test_absent)
{
    ck_assert_uint_eq(take("/path?a=1&b=2"), 0);
    ck_assert_str_eq(value_buf, "(null)");
    ck_assert_str_eq(stripped_buf, "/path?a=1&b=2");

    ck_assert_uint_eq(take("/path"), 0);
    ck_assert_str_eq(stripped_buf, "/path");

    ck_assert_uint_eq(take("/lizard_token=x"), 0);
    ck_assert_str_eq(stripped_buf, "/lizard_token=x");
}
END_TEST

START_TEST(test_similar_names_kept)
{
    ck_assert_uint_eq(take("/?xlizard_token=1&lizard_tokens=2&Lizard_token=3&lizard_token%3D=4"), 0);
    ck_assert_str_eq(stripped_buf, "/?xlizard_token=1&lizard_tokens=2&Lizard_token=3&lizard_token%3D=4");

    ck_assert_uint_eq(take("/?xlizard_token=1&lizard_token=t&lizard_tokens=2"), 1);
    ck_assert_str_eq(value_buf, "t");
    ck_assert_str_eq(stripped_buf, "/?xlizard_token=1&lizard_tokens=2");
}
END_TEST

START_TEST(test_other_parameters_byte_for_byte)
{
    ck_assert_uint_eq(take("/p%20q?a=%41&&b&c=&d=x=y&lizard_token=t&e=%zz+1"), 1);
    ck_assert_str_eq(stripped_buf, "/p%20q?a=%41&&b&c=&d=x=y&e=%zz+1");
    /* removing a middle parameter never creates an empty one */
    ck_assert_uint_eq(take("/?a&&b&lizard_token=t&c"), 1);
    ck_assert_str_eq(stripped_buf, "/?a&&b&c");
}
END_TEST

START_TEST(test_fragment_ignored)
{
    ck_assert_uint_eq(take("/?a=1&lizard_token=t#frag&lizard_token=u"), 1);
    ck_assert_str_eq(value_buf, "t");
    ck_assert_str_eq(stripped_buf, "/?a=1#frag&lizard_token=u");

    ck_assert_uint_eq(take("/#?lizard_token=t"), 0);
    ck_assert_str_eq(stripped_buf, "/#?lizard_token=t");
}
END_TEST

START_TEST(test_question_mark_dropped_only_when_empty)
{
    ck_assert_uint_eq(take("/a/b/?lizard_token=t"), 1);
    ck_assert_str_eq(stripped_buf, "/a/b/");
    ck_assert_uint_eq(take("/?&lizard_token=t"), 1);
    ck_assert_str_eq(stripped_buf, "/");
    ck_assert_uint_eq(take("/?lizard_token=t&x"), 1);
    ck_assert_str_eq(stripped_buf, "/?x");
}
END_TEST

static void take_any(const char *buf, size_t len, void *data)
{
    h2o_iovec_t path = h2o_iovec_init(buf, len), value, stripped;
    size_t n = gw_query_take(&pool, path, h2o_iovec_init(H2O_STRLIT("lizard_token")), &value, &stripped);

    (void)data;
    if (n == 0) {
        ck_assert(stripped.base == path.base && stripped.len == path.len);
    } else {
        /* at least "lizard_token" went */
        ck_assert_uint_le(stripped.len + sizeof("lizard_token") - 1, len);
        ck_assert_uint_le(value.len, len);
    }
}

START_TEST(test_bytes)
{
    static const char *paths[] = {"/app/x?a=1&lizard_token=abc%20d+e&b=%zz&lizard_token&c=#frag",
                                  "/?lizard%5Ftoken=%41%4&%6c%69zard_token=x", "?lizard_token="};
    size_t i;

    for (i = 0; i != sizeof(paths) / sizeof(paths[0]); ++i) {
        gw_bytes_each_prefix(paths[i], strlen(paths[i]), take_any, NULL);
        gw_bytes_each_mutation(paths[i], strlen(paths[i]), take_any, NULL);
    }
}
END_TEST

static Suite *query_suite(void)
{
    Suite *s = suite_create("query");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_only_parameter);
    tcase_add_test(tc, test_first_parameter);
    tcase_add_test(tc, test_middle_parameter);
    tcase_add_test(tc, test_last_parameter);
    tcase_add_test(tc, test_repeated_parameter);
    tcase_add_test(tc, test_percent_encoded_name);
    tcase_add_test(tc, test_value_percent_decoded_plus_kept);
    tcase_add_test(tc, test_empty_and_no_value);
    tcase_add_test(tc, test_absent);
    tcase_add_test(tc, test_similar_names_kept);
    tcase_add_test(tc, test_other_parameters_byte_for_byte);
    tcase_add_test(tc, test_fragment_ignored);
    tcase_add_test(tc, test_question_mark_dropped_only_when_empty);
    suite_add_tcase(s, tc);
    TCase *bytes = tcase_create("bytes");
    /* thousands of parses each, under ASan on a loaded machine: not a time bound, just room */
    tcase_set_timeout(bytes, 120);
    tcase_add_checked_fixture(bytes, setup, teardown);
    tcase_add_test(bytes, test_bytes);
    suite_add_tcase(s, bytes);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(query_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
