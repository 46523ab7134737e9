/* Unit tests for forward/wss_url.c: what tcp-forward dials, verifies and asks for. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "forward/wss_url.h"

static gw_wss_url_t url;
static const char *err;

START_TEST(test_good_urls)
{
    char auth[300];

    ck_assert_int_eq(gw_wss_url_parse("wss://5432-sb1.lizard.app/.lizard/tcp", &url, &err), 0);
    ck_assert_str_eq(url.host, "5432-sb1.lizard.app");
    ck_assert_uint_eq(url.port, 443);
    ck_assert_int_eq(url.host_is_ip, 0);
    ck_assert_str_eq(url.path, "/.lizard/tcp");
    ck_assert_int_eq(gw_wss_url_authority(&url, auth, sizeof(auth)), (int)strlen("5432-sb1.lizard.app"));
    ck_assert_str_eq(auth, "5432-sb1.lizard.app");

    ck_assert_int_eq(gw_wss_url_parse("wss://5432-sb1.lizard.app:8443/.lizard/tcp?x=1", &url, &err), 0);
    ck_assert_uint_eq(url.port, 8443);
    ck_assert_str_eq(url.path, "/.lizard/tcp?x=1");
    gw_wss_url_authority(&url, auth, sizeof(auth));
    ck_assert_str_eq(auth, "5432-sb1.lizard.app:8443");

    ck_assert_int_eq(gw_wss_url_parse("wss://[::1]:9443/t", &url, &err), 0);
    ck_assert_str_eq(url.host, "::1");
    ck_assert_int_eq(url.host_is_ip, 1);
    gw_wss_url_authority(&url, auth, sizeof(auth));
    ck_assert_str_eq(auth, "[::1]:9443");

    ck_assert_int_eq(gw_wss_url_parse("wss://127.0.0.1", &url, &err), 0);
    ck_assert_int_eq(url.host_is_ip, 1);
    ck_assert_str_eq(url.path, "/");
    ck_assert_int_eq(gw_wss_url_parse("wss://h.test?q", &url, &err), 0);
    ck_assert_str_eq(url.path, "/?q");
}
END_TEST

#define REFUSED(u, needle)                                                                                                         \
    do {                                                                                                                           \
        ck_assert_int_eq(gw_wss_url_parse(u, &url, &err), -1);                                                                     \
        ck_assert_msg(strstr(err, needle) != NULL, "%s: %s", u, err);                                                              \
    } while (0)

START_TEST(test_refused_urls)
{
    REFUSED("ws://h.test/.lizard/tcp", "ws:// is refused");
    REFUSED("https://h.test/", "must start with wss://");
    REFUSED("wss://", "no host");
    REFUSED("wss:///x", "no host");
    REFUSED("wss://h.test:0/", "port");
    REFUSED("wss://h.test:65536/", "port");
    REFUSED("wss://h.test:/", "port");
    REFUSED("wss://user:pw@h.test/", "user name");
    REFUSED("wss://[::1/", "closing ']'");
    REFUSED("wss://[h.test]/", "not an IPv6");
    REFUSED("wss://h_x.test/", "not a valid host name");
    REFUSED("wss://h.test/a b", "space");
    REFUSED("wss://h.test/a#frag", "fragment");
    REFUSED("wss://h.test/.lizard/tcp?lizard_token=secret", "does not go in the URL");
    REFUSED("wss://h.test/.lizard/tcp?a=1&lizard_token=secret", "does not go in the URL");
}
END_TEST

START_TEST(test_bounds)
{
    char long_url[3000];

    memcpy(long_url, "wss://h.test/", 13);
    memset(long_url + 13, 'a', sizeof(long_url) - 14);
    long_url[sizeof(long_url) - 1] = '\0';
    REFUSED(long_url, "longer than 2047");
    memcpy(long_url, "wss://", 6);
    memset(long_url + 6, 'a', 300);
    long_url[306] = '\0';
    REFUSED(long_url, "longer than 253");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wss_url");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_good_urls);
    tcase_add_test(tc, test_refused_urls);
    tcase_add_test(tc, test_bounds);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
