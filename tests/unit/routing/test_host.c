/*
 * routing/host.c: "<port>-<sandboxId>.<domain>" (CONTRACT.md, Hostnames).
 * Every rule of the contract: what is ours, what is malformed, what is not ours.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "routing/host.h"
#include "../bytes.h"

static char *domains[] = {"lizard.app", "eu.lizard.app", "preview.example.com"};
#define NUM_DOMAINS (sizeof(domains) / sizeof(domains[0]))

static gw_host_result_t parse(const char *host, gw_host_t *out)
{
    return gw_host_parse(h2o_iovec_init(host, strlen(host)), domains, NUM_DOMAINS, out);
}

static void assert_ok(const char *host, unsigned port, const char *id, size_t domain_index)
{
    gw_host_t h;
    memset(&h, 0xaa, sizeof(h));
    ck_assert_msg(parse(host, &h) == GW_HOST_OK, "\"%s\" not OK", host);
    ck_assert_uint_eq(h.port, port);
    ck_assert_str_eq(h.sandbox_id, id);
    ck_assert_uint_eq(h.domain_index, domain_index);
}

static void assert_result(const char *host, gw_host_result_t expected)
{
    gw_host_t h;
    gw_host_result_t got = parse(host, &h);
    ck_assert_msg(got == expected, "\"%s\": got %d, expected %d", host, (int)got, (int)expected);
}

START_TEST(basic)
{
    assert_ok("3000-sbx7f3a9.lizard.app", 3000, "sbx7f3a9", 0);
    assert_ok("1-a.lizard.app", 1, "a", 0);
    assert_ok("65535-0.lizard.app", 65535, "0", 0);
    assert_ok("8080-abc.preview.example.com", 8080, "abc", 2);
}
END_TEST

START_TEST(case_insensitive)
{
    assert_ok("3000-SBX1.lizard.app", 3000, "sbx1", 0);
    assert_ok("3000-SbX1.LIZARD.App", 3000, "sbx1", 0);
    assert_ok("443-ABCDEF.Preview.Example.COM", 443, "abcdef", 2);
}
END_TEST

START_TEST(port_suffix_and_trailing_dot)
{
    assert_ok("3000-sbx1.lizard.app:443", 3000, "sbx1", 0);
    assert_ok("3000-sbx1.lizard.app:8443", 3000, "sbx1", 0);
    assert_ok("3000-sbx1.lizard.app.", 3000, "sbx1", 0);
    assert_ok("3000-sbx1.lizard.app.:443", 3000, "sbx1", 0);
    /* only one trailing dot is stripped */
    assert_result("3000-sbx1.lizard.app..", GW_HOST_UNKNOWN);
    /* the suffix is a port or nothing: apps build absolute URLs from Host */
    assert_result("3000-sbx1.lizard.app:@evil.example", GW_HOST_BAD);
    assert_result("3000-sbx1.lizard.app:443 x", GW_HOST_BAD);
    assert_result("3000-sbx1.lizard.app:", GW_HOST_BAD);
    assert_result("3000-sbx1.lizard.app:1234567", GW_HOST_BAD);
    assert_result("3000-sbx1.lizard.app:44a", GW_HOST_BAD);
}
END_TEST

START_TEST(longest_domain_wins)
{
    assert_ok("3000-sbx1.eu.lizard.app", 3000, "sbx1", 1);
    /* the apex of the longer domain is malformed, not a sandbox "eu" */
    assert_result("eu.lizard.app", GW_HOST_BAD);
}
END_TEST

START_TEST(unknown_hosts)
{
    assert_result("", GW_HOST_UNKNOWN);
    assert_result(":443", GW_HOST_UNKNOWN);
    assert_result("example.com", GW_HOST_UNKNOWN);
    assert_result("127.0.0.1", GW_HOST_UNKNOWN);
    assert_result("127.0.0.1:8080", GW_HOST_UNKNOWN);
    assert_result("[::1]:443", GW_HOST_UNKNOWN);
    assert_result("[::1]", GW_HOST_UNKNOWN);
    assert_result("lizard.app.evil.com", GW_HOST_UNKNOWN);
    assert_result("3000-sbx1.lizard.app.evil.com", GW_HOST_UNKNOWN);
    assert_result("evillizard.app", GW_HOST_UNKNOWN);
    assert_result("3000-sbx1.evillizard.app", GW_HOST_UNKNOWN);
    assert_result("lizard.ap", GW_HOST_UNKNOWN);
    assert_result("app", GW_HOST_UNKNOWN);
}
END_TEST

START_TEST(bad_hosts)
{
    static const char *bad[] = {
        "lizard.app",            /* the apex */
        "LIZARD.APP.",           /* the apex, any case, trailing dot */
        "lizard.app:443",        /* the apex with a port */
        ".lizard.app",           /* empty label */
        "a.3000-x.lizard.app",   /* two labels */
        "3000-x.a.lizard.app",   /* two labels */
        "3000.lizard.app",       /* no '-' */
        "sbx1.lizard.app",       /* no '-' */
        "-sbx1.lizard.app",      /* no port */
        "3000-.lizard.app",      /* no id */
        "0-sbx1.lizard.app",     /* port 0 */
        "03000-sbx1.lizard.app", /* leading zero */
        "+3000-sbx1.lizard.app", /* sign */
        "65536-sbx1.lizard.app", /* too big */
        "100000-sbx1.lizard.app",
        "30a0-sbx1.lizard.app",
        "3000-sbx-1.lizard.app", /* '-' in the id */
        "3000-sbx_1.lizard.app", /* '_' in the id */
        "3000-sbx%31.lizard.app",
        "3000-sbx 1.lizard.app",
    };
    size_t i;
    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i)
        assert_result(bad[i], GW_HOST_BAD);
}
END_TEST

START_TEST(id_length_limit)
{
    char host[128], id56[57], id57[58];
    memset(id56, 'a', 56);
    id56[56] = '\0';
    memset(id57, 'b', 57);
    id57[57] = '\0';

    snprintf(host, sizeof(host), "3000-%s.lizard.app", id56);
    assert_ok(host, 3000, id56, 0);
    snprintf(host, sizeof(host), "3000-%s.lizard.app", id57);
    assert_result(host, GW_HOST_BAD);
}
END_TEST

START_TEST(host_length_limit)
{
    /* a 240-character domain leaves room for a short label only */
    static char longdomain[241];
    char *doms[1] = {longdomain};
    char host[400];
    gw_host_t h;
    size_t i;

    for (i = 0; i != 240; ++i)
        longdomain[i] = (i % 10 == 9) ? '.' : 'd';
    longdomain[239] = 'd';
    longdomain[240] = '\0';

    /* "6-a." + 240 = 244 characters: fine */
    snprintf(host, sizeof(host), "6-a.%s", longdomain);
    ck_assert_uint_eq(strlen(host), 244);
    ck_assert_int_eq(gw_host_parse(h2o_iovec_init(host, strlen(host)), doms, 1, &h), GW_HOST_OK);
    /* 254 characters under the domain: bad_host */
    snprintf(host, sizeof(host), "3000-abcdefgh.%s", longdomain);
    ck_assert_uint_eq(strlen(host), 254);
    ck_assert_int_eq(gw_host_parse(h2o_iovec_init(host, strlen(host)), doms, 1, &h), GW_HOST_BAD);
    /* exactly 253 is allowed */
    snprintf(host, sizeof(host), "3000-abcdefg.%s", longdomain);
    ck_assert_uint_eq(strlen(host), 253);
    ck_assert_int_eq(gw_host_parse(h2o_iovec_init(host, strlen(host)), doms, 1, &h), GW_HOST_OK);
}
END_TEST

START_TEST(not_nul_terminated)
{
    /* the iovec's length counts, not a NUL */
    const char buf[] = "3000-sbx1.lizard.appXXXX";
    gw_host_t h;
    ck_assert_int_eq(gw_host_parse(h2o_iovec_init(buf, 20), domains, NUM_DOMAINS, &h), GW_HOST_OK);
    ck_assert_str_eq(h.sandbox_id, "sbx1");
    ck_assert_int_eq(gw_host_parse(h2o_iovec_init(buf, 24), domains, NUM_DOMAINS, &h), GW_HOST_UNKNOWN);
}
END_TEST

START_TEST(strip_port)
{
    h2o_iovec_t r;
    r = gw_host_strip_port(h2o_iovec_init(H2O_STRLIT("example.com:8080")));
    ck_assert_uint_eq(r.len, 11);
    r = gw_host_strip_port(h2o_iovec_init(H2O_STRLIT("example.com")));
    ck_assert_uint_eq(r.len, 11);
    r = gw_host_strip_port(h2o_iovec_init(H2O_STRLIT("[::1]:443")));
    ck_assert_uint_eq(r.len, 5);
    ck_assert(memcmp(r.base, "[::1]", 5) == 0);
    r = gw_host_strip_port(h2o_iovec_init(H2O_STRLIT("[fd00::1]")));
    ck_assert_uint_eq(r.len, 9);
    r = gw_host_strip_port(h2o_iovec_init(H2O_STRLIT("")));
    ck_assert_uint_eq(r.len, 0);
}
END_TEST

/* What holds for any bytes: no read past the end, and an accepted host is
 * a port and a contract sandbox id under one of the domains. */
static void parse_any(const char *buf, size_t len, void *data)
{
    int *accepted = data;
    gw_host_t out;
    h2o_iovec_t stripped = gw_host_strip_port(h2o_iovec_init(buf, len));

    ck_assert_ptr_eq(stripped.base, buf);
    ck_assert_uint_le(stripped.len, len);
    memset(&out, 0xaa, sizeof(out));
    if (gw_host_parse(h2o_iovec_init(buf, len), domains, NUM_DOMAINS, &out) == GW_HOST_OK) {
        ck_assert(gw_sandbox_id_valid(out.sandbox_id, strlen(out.sandbox_id)));
        ck_assert_uint_ne(out.port, 0);
        ck_assert_uint_lt(out.domain_index, NUM_DOMAINS);
        ++*accepted;
    }
}

START_TEST(every_prefix_and_mutation)
{
    static const char *valid[] = {"3000-sbx7f3a9.lizard.app", "8080-abc.eu.lizard.app.:443", "1-Z9.PREVIEW.example.com",
                                  "[::1]:8080", "65535-a.lizard.app:65535"};
    size_t i;

    for (i = 0; i != sizeof(valid) / sizeof(valid[0]); ++i) {
        int accepted = 0;
        gw_bytes_each_prefix(valid[i], strlen(valid[i]), parse_any, &accepted);
        gw_bytes_each_mutation(valid[i], strlen(valid[i]), parse_any, &accepted);
    }
}
END_TEST

START_TEST(prefixes_of_a_host)
{
    static const char host[] = "3000-sbx7f3a9.lizard.app:443";
    size_t k;
    gw_host_t out;

    /* accepted: the name whole (24 bytes), then with ":4", ":44", ":443"; a bare ':' is bad_host */
    for (k = 0; k <= sizeof(host) - 1; ++k) {
        char *copy = malloc(k);
        memcpy(copy, host, k);
        gw_host_result_t r = gw_host_parse(h2o_iovec_init(copy, k), domains, NUM_DOMAINS, &out);
        if (k == 24 || k >= 26) {
            ck_assert_int_eq(r, GW_HOST_OK);
            ck_assert_str_eq(out.sandbox_id, "sbx7f3a9");
            ck_assert_uint_eq(out.port, 3000);
        } else {
            ck_assert_int_eq(r, k == 25 ? GW_HOST_BAD : GW_HOST_UNKNOWN);
        }
        free(copy);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("host");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, basic);
    tcase_add_test(tc, case_insensitive);
    tcase_add_test(tc, port_suffix_and_trailing_dot);
    tcase_add_test(tc, longest_domain_wins);
    tcase_add_test(tc, unknown_hosts);
    tcase_add_test(tc, bad_hosts);
    tcase_add_test(tc, id_length_limit);
    tcase_add_test(tc, host_length_limit);
    tcase_add_test(tc, not_nul_terminated);
    tcase_add_test(tc, strip_port);
    suite_add_tcase(s, tc);
    TCase *bytes = tcase_create("bytes");
    /* thousands of parses each, under ASan on a loaded machine: not a time bound, just room */
    tcase_set_timeout(bytes, 120);
    tcase_add_test(bytes, every_prefix_and_mutation);
    tcase_add_test(bytes, prefixes_of_a_host);
    suite_add_tcase(s, bytes);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
