/* Unit tests for http/redirect.c: every Location the gateway makes is an
 * absolute https URL on the request's own host, whatever the path looks
 * like; the port is the one the client named (none for 443). */
#include <check.h>
#include <string.h>
#include "http/redirect.h"

static h2o_mem_pool_t pool;

static void setup(void)
{
    h2o_mem_init_pool(&pool);
}

static void teardown(void)
{
    h2o_mem_clear_pool(&pool);
}

static h2o_iovec_t iov(const char *s)
{
    return h2o_iovec_init(s, strlen(s));
}

#define ck_assert_iov_eq(v, s)                                                                                                     \
    do {                                                                                                                           \
        h2o_iovec_t v_ = (v);                                                                                                      \
        ck_assert_msg(h2o_memis(v_.base, v_.len, (s), strlen(s)), "got \"%.*s\", expected \"%s\"", (int)v_.len, v_.base, (s));     \
    } while (0)

#define HOST "3000-sbx1.lizard.test"

/* the paths of the open redirect (issue 20): each stays a path on the host */
START_TEST(test_paths_that_look_like_hosts)
{
    static const char *const paths[] = {"//evil.example/x",  "/\\evil.example", "///evil.example",     "/\\/evil.example",
                                        "/\\\\evil.example", "//evil.example",  "/%2F%2Fevil.example", "//evil.example:443/x?y=1"};
    size_t i;

    for (i = 0; i != sizeof(paths) / sizeof(paths[0]); ++i) {
        h2o_iovec_t url = gw_redirect_location(&pool, iov(HOST), iov(paths[i]));
        h2o_iovec_t want = h2o_concat(&pool, iov("https://" HOST), iov(paths[i]));
        ck_assert_msg(h2o_memis(url.base, url.len, want.base, want.len), "%s -> %.*s", paths[i], (int)url.len, url.base);
    }
}
END_TEST

START_TEST(test_ports)
{
    /* the port the client named: a TLS listener's, or the load balancer's in front of a trusted one */
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST ":8443"), iov("/a?b=1")), "https://" HOST ":8443/a?b=1");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST ":443"), iov("/")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST), iov("/")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST ":00443"), iov("/")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST ":08443"), iov("/")), "https://" HOST ":8443/");
    /* outside 1-65535: left out */
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST ":99999"), iov("/")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST ":0"), iov("/")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST ":"), iov("/")), "https://" HOST "/");
    /* explicit: the plain listener's redirect names the TLS listener's port */
    ck_assert_iov_eq(gw_redirect_url(&pool, iov(HOST), 8443, iov("/p")), "https://" HOST ":8443/p");
    ck_assert_iov_eq(gw_redirect_url(&pool, iov(HOST), 443, iov("/p")), "https://" HOST "/p");
}
END_TEST

START_TEST(test_host_lowercased_path_kept)
{
    ck_assert_iov_eq(gw_redirect_location(&pool, iov("3000-SBX1.Lizard.Test:8443"), iov("/A/B?C=D")),
                     "https://3000-sbx1.lizard.test:8443/A/B?C=D");
}
END_TEST

START_TEST(test_what_is_not_a_path)
{
    /* "OPTIONS *", an empty target, and bytes a Location must not carry: the root */
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST), iov("*")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST), iov("")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST), iov("evil.example")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST), iov("/a\r\nSet-Cookie: x=1")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST), iov("/a b")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST), iov("/\xc3\xa4")), "https://" HOST "/");
    ck_assert_iov_eq(gw_redirect_location(&pool, iov(HOST), h2o_iovec_init("/a\0b", 4)), "https://" HOST "/");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redirect");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_paths_that_look_like_hosts);
    tcase_add_test(tc, test_ports);
    tcase_add_test(tc, test_host_lowercased_path_kept);
    tcase_add_test(tc, test_what_is_not_a_path);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
