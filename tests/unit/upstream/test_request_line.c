/* Unit tests for upstream/request_line.c: token methods, target forms, the
 * absolute-form made origin-form, the last check of the upstream line. */
#include <check.h>
#include <string.h>
#include "upstream/request_line.h"
#include "../bytes.h"

static h2o_iovec_t iov(const char *s)
{
    return h2o_iovec_init(s, strlen(s));
}

static int iov_is(h2o_iovec_t v, const char *s)
{
    return h2o_memis(v.base, v.len, s, strlen(s));
}

START_TEST(test_method_is_token)
{
    ck_assert_int_eq(gw_request_method_is_token(iov("GET")), 1);
    ck_assert_int_eq(gw_request_method_is_token(iov("PROPFIND")), 1);
    ck_assert_int_eq(gw_request_method_is_token(iov("M-SEARCH")), 1);
    ck_assert_int_eq(gw_request_method_is_token(iov("x!#$%&'*+.^_`|~9")), 1);
    ck_assert_int_eq(gw_request_method_is_token(iov("")), 0);
    ck_assert_int_eq(gw_request_method_is_token(iov("GET /inj HTTP/1.1")), 0);
    ck_assert_int_eq(gw_request_method_is_token(iov("GET\t")), 0);
    ck_assert_int_eq(gw_request_method_is_token(iov("GET\r\nX: y")), 0);
    ck_assert_int_eq(gw_request_method_is_token(iov("G(T")), 0);
    ck_assert_int_eq(gw_request_method_is_token(iov("GE:T")), 0);
    ck_assert_int_eq(gw_request_method_is_token(iov("G\xc3\xa9T")), 0);
    ck_assert_int_eq(gw_request_method_is_token(h2o_iovec_init("GE\0T", 4)), 0);
}
END_TEST

START_TEST(test_target_forms)
{
    h2o_mem_pool_t pool;
    h2o_iovec_t authority, origin;

    h2o_mem_init_pool(&pool);
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("/a?b=1"), &authority, &origin), GW_TARGET_ORIGIN);
    ck_assert(iov_is(origin, "/a?b=1"));
    ck_assert_ptr_null(authority.base);

    ck_assert_int_eq(gw_request_target_parse(&pool, iov("OPTIONS"), iov("*"), &authority, &origin), GW_TARGET_ASTERISK);
    ck_assert(iov_is(origin, "*"));
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("*"), &authority, &origin), GW_TARGET_INVALID);
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("OPTIONS"), iov("*x"), &authority, &origin), GW_TARGET_INVALID);

    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("http://evil/x?y=1"), &authority, &origin), GW_TARGET_ABSOLUTE);
    ck_assert(iov_is(authority, "evil"));
    ck_assert(iov_is(origin, "/x?y=1"));
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("HTTPS://3000-a.lizard.test:8443/p"), &authority, &origin),
                     GW_TARGET_ABSOLUTE);
    ck_assert(iov_is(authority, "3000-a.lizard.test:8443"));
    ck_assert(iov_is(origin, "/p"));
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("http://h"), &authority, &origin), GW_TARGET_ABSOLUTE);
    ck_assert(iov_is(authority, "h"));
    ck_assert(iov_is(origin, "/"));
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("http://h?q=1"), &authority, &origin), GW_TARGET_ABSOLUTE);
    ck_assert(iov_is(authority, "h"));
    ck_assert(iov_is(origin, "/?q=1"));
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("http://[::1]:80/v6"), &authority, &origin),
                     GW_TARGET_ABSOLUTE);
    ck_assert(iov_is(authority, "[::1]:80"));
    ck_assert(iov_is(origin, "/v6"));

    /* not forwardable */
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov(""), &authority, &origin), GW_TARGET_INVALID);
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("echo"), &authority, &origin), GW_TARGET_INVALID);
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("CONNECT"), iov("evil:443"), &authority, &origin), GW_TARGET_INVALID);
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("ftp://h/x"), &authority, &origin), GW_TARGET_INVALID);
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("http:/h/x"), &authority, &origin), GW_TARGET_INVALID);
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("http:///x"), &authority, &origin), GW_TARGET_INVALID);
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("http://"), &authority, &origin), GW_TARGET_INVALID);
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("http://user:pw@h/x"), &authority, &origin), GW_TARGET_INVALID);
    /* an @ after the authority is part of the path */
    ck_assert_int_eq(gw_request_target_parse(&pool, iov("GET"), iov("http://h/@x"), &authority, &origin), GW_TARGET_ABSOLUTE);
    ck_assert(iov_is(origin, "/@x"));
    h2o_mem_clear_pool(&pool);
}
END_TEST

START_TEST(test_line_check)
{
    ck_assert_int_eq(gw_request_line_check(iov("GET"), iov("/")), 0);
    ck_assert_int_eq(gw_request_line_check(iov("POST"), iov("/a/b?c=%20d&e=~")), 0);
    ck_assert_int_eq(gw_request_line_check(iov("OPTIONS"), iov("*")), 0);

    /* the method */
    ck_assert_int_eq(gw_request_line_check(iov("GET /inj-m HTTP/1.1"), iov("/inj")), -1);
    ck_assert_int_eq(gw_request_line_check(iov(""), iov("/")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("GET\n"), iov("/")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("CONNECT"), iov("/")), -1);
    /* the target */
    ck_assert_int_eq(gw_request_line_check(iov("GET"), iov("")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("GET"), iov("*")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("GET"), iov("http://evil/x")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("GET"), iov("/a b")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("GET"), iov("/a HTTP/1.1\r\nX: y")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("GET"), iov("/a\tb")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("GET"), iov("/a\x7f")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("GET"), iov("/\xc3\xa9")), -1);
    ck_assert_int_eq(gw_request_line_check(iov("GET"), h2o_iovec_init("/a\0b", 4)), -1);
}
END_TEST

/* The target's bytes as they come, under each of a few methods. */
static void target_any(const char *buf, size_t len, void *data)
{
    static const char *methods[] = {"GET", "OPTIONS", "CONNECT", "POST"};
    h2o_iovec_t target = h2o_iovec_init(buf, len), authority, origin;
    h2o_mem_pool_t pool;
    size_t i, j;

    (void)data;
    h2o_mem_init_pool(&pool);
    for (i = 0; i != sizeof(methods) / sizeof(methods[0]); ++i) {
        switch (gw_request_target_parse(&pool, iov(methods[i]), target, &authority, &origin)) {
        case GW_TARGET_ABSOLUTE:
            ck_assert(authority.base >= buf && authority.base + authority.len <= buf + len);
            ck_assert(origin.len != 0 && origin.base[0] == '/');
            break;
        default:
            break;
        }
        if (gw_request_line_check(iov(methods[i]), target) == 0) {
            for (j = 0; j != len; ++j)
                ck_assert(buf[j] > 0x20 && buf[j] < 0x7f);
        }
    }
    h2o_mem_clear_pool(&pool);
}

static void method_any(const char *buf, size_t len, void *data)
{
    size_t i;

    (void)data;
    if (gw_request_method_is_token(h2o_iovec_init(buf, len))) {
        ck_assert_uint_ne(len, 0);
        for (i = 0; i != len; ++i)
            ck_assert(buf[i] > 0x20 && buf[i] < 0x7f && strchr("\"(),/:;<=>?@[\\]{}", buf[i]) == NULL);
    }
    (void)gw_request_line_check(h2o_iovec_init(buf, len), iov("/"));
}

START_TEST(test_bytes)
{
    static const char *targets[] = {"http://user@Example.COM:8080/a/b?c=d#e", "https://[::1]:443?x", "/a%20b?q=1&r", "*",
                                    "example.com:443"};
    size_t i;

    for (i = 0; i != sizeof(targets) / sizeof(targets[0]); ++i) {
        gw_bytes_each_prefix(targets[i], strlen(targets[i]), target_any, NULL);
        gw_bytes_each_mutation(targets[i], strlen(targets[i]), target_any, NULL);
    }
    gw_bytes_each_prefix("M-SEARCH", 8, method_any, NULL);
    gw_bytes_each_mutation("M-SEARCH", 8, method_any, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("request_line");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_method_is_token);
    tcase_add_test(tc, test_target_forms);
    tcase_add_test(tc, test_line_check);
    suite_add_tcase(s, tc);
    TCase *bytes = tcase_create("bytes");
    /* thousands of parses each, under ASan on a loaded machine: not a time bound, just room */
    tcase_set_timeout(bytes, 120);
    tcase_add_test(bytes, test_bytes);
    suite_add_tcase(s, bytes);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
