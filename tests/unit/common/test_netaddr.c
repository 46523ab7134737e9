/*
 * common/netaddr.c: addresses and networks as the configuration spells
 * them; the allowed_networks check that keeps the gateway off its own host.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include "common/netaddr.h"

static gw_netaddr_t must_parse(const char *s, int allow_unix)
{
    gw_netaddr_t a;
    const char *err = NULL;
    ck_assert_msg(gw_netaddr_parse(s, allow_unix, &a, &err) == 0, "parse %s: %s", s, err != NULL ? err : "");
    return a;
}

static void assert_rejected(const char *s, int allow_unix)
{
    gw_netaddr_t a;
    const char *err = NULL;
    ck_assert_msg(gw_netaddr_parse(s, allow_unix, &a, &err) == -1, "\"%s\" was accepted", s);
    ck_assert_ptr_nonnull(err);
    ck_assert_uint_gt(strlen(err), 0);
}

static void assert_roundtrip(const char *s)
{
    char buf[128];
    gw_netaddr_t a = must_parse(s, 1);
    ck_assert_int_eq(gw_netaddr_format(&a, buf, sizeof(buf)), (int)strlen(s));
    ck_assert_str_eq(buf, s);
}

START_TEST(ipv4_with_port)
{
    gw_netaddr_t a = must_parse("1.2.3.4:80", 0);
    const struct sockaddr_in *sin = (const void *)&a.ss;
    ck_assert_int_eq(sin->sin_family, AF_INET);
    ck_assert_uint_eq(ntohl(sin->sin_addr.s_addr), 0x01020304);
    ck_assert_uint_eq(gw_netaddr_port(&a), 80);
    ck_assert_uint_eq(a.len, sizeof(struct sockaddr_in));
    assert_roundtrip("127.0.0.1:6379");
    assert_roundtrip("0.0.0.0:65535");
    assert_roundtrip("10.0.0.1:1");
}
END_TEST

START_TEST(ipv6_with_port)
{
    gw_netaddr_t a = must_parse("[::1]:443", 0);
    const struct sockaddr_in6 *sin6 = (const void *)&a.ss;
    ck_assert_int_eq(sin6->sin6_family, AF_INET6);
    ck_assert(IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr));
    ck_assert_uint_eq(gw_netaddr_port(&a), 443);
    ck_assert_uint_eq(a.len, sizeof(struct sockaddr_in6));
    assert_roundtrip("[::1]:443");
    assert_roundtrip("[fd00::1:2]:8080");
}
END_TEST

START_TEST(unix_path)
{
    gw_netaddr_t a = must_parse("unix:/run/redis.sock", 1);
    const struct sockaddr_un *sun = (const void *)&a.ss;
    ck_assert_int_eq(sun->sun_family, AF_UNIX);
    ck_assert_str_eq(sun->sun_path, "/run/redis.sock");
    ck_assert_uint_eq(gw_netaddr_port(&a), 0);
    assert_roundtrip("unix:/run/redis.sock");
    /* not allowed where only TCP makes sense */
    assert_rejected("unix:/run/redis.sock", 0);
    assert_rejected("unix:", 1);
    assert_rejected("unix:relative.sock", 1);
    char longpath[300] = "unix:/";
    memset(longpath + 6, 'a', 200);
    longpath[206] = '\0';
    assert_rejected(longpath, 1);
}
END_TEST

START_TEST(rejects_hostnames_and_junk)
{
    static const char *bad[] = {"localhost:80", "redis.internal:6379",
                                "1.2.3.4",      "1.2.3.4:",
                                "1.2.3.4:0",    "1.2.3.4:65536",
                                "1.2.3.4:+80",  "1.2.3.4:-1",
                                "1.2.3.4:80x",  "1.2.3.4:080",
                                "1.2.3.4:8 0",  " 1.2.3.4:80",
                                "1.2.3:80",     "::1:443",
                                "[::1]",        "[::1]443",
                                "[::1]:",       "[1.2.3.4]:80",
                                "[::1:443",     "",
                                ":80",          "1.2.3.4:99999999999"};
    size_t i;
    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i)
        assert_rejected(bad[i], 1);
}
END_TEST

START_TEST(parse_ip_literal)
{
    gw_netaddr_t a;
    char buf[64];
    ck_assert_int_eq(gw_netaddr_parse_ip("10.1.2.3", 8, 3000, &a), 0);
    ck_assert_int_eq(gw_netaddr_format(&a, buf, sizeof(buf)), 13);
    ck_assert_str_eq(buf, "10.1.2.3:3000");
    ck_assert_int_eq(gw_netaddr_parse_ip("fd00::1", 7, 0, &a), 0);
    ck_assert_int_eq(a.ss.ss_family, AF_INET6);
    ck_assert_uint_eq(gw_netaddr_port(&a), 0);
    /* only the first len bytes count */
    ck_assert_int_eq(gw_netaddr_parse_ip("10.1.2.3trailing", 8, 1, &a), 0);
    ck_assert_int_eq(gw_netaddr_parse_ip("sandbox.local", 13, 1, &a), -1);
    ck_assert_int_eq(gw_netaddr_parse_ip("", 0, 1, &a), -1);
    ck_assert_int_eq(gw_netaddr_parse_ip("[::1]", 5, 1, &a), -1);
    ck_assert_int_eq(gw_netaddr_parse_ip("10.1.2.3 ", 9, 1, &a), -1);
}
END_TEST

START_TEST(format_too_small)
{
    gw_netaddr_t a = must_parse("127.0.0.1:6379", 0);
    char buf[8];
    ck_assert_int_eq(gw_netaddr_format(&a, buf, sizeof(buf)), -1);
}
END_TEST

static gw_cidr_t must_cidr(const char *s)
{
    gw_cidr_t c;
    const char *err = NULL;
    ck_assert_msg(gw_cidr_parse(s, &c, &err) == 0, "cidr %s: %s", s, err != NULL ? err : "");
    return c;
}

static int contains(const gw_cidr_t *c, const char *ip)
{
    gw_netaddr_t a;
    ck_assert_int_eq(gw_netaddr_parse_ip(ip, strlen(ip), 80, &a), 0);
    return gw_cidr_contains(c, (const struct sockaddr *)&a.ss);
}

/* the client address used as the limiter key, in X-Forwarded-For and in
 * the access log: one spelling per address */
START_TEST(peer_text)
{
    char buf[INET6_ADDRSTRLEN], small[INET6_ADDRSTRLEN - 1];
    gw_netaddr_t a;

    a = must_parse("203.0.113.9:443", 0);
    ck_assert_int_eq(gw_netaddr_peer_text((void *)&a.ss, a.len, buf, sizeof(buf)), 11);
    ck_assert_str_eq(buf, "203.0.113.9");
    a = must_parse("[::ffff:10.0.0.255]:1", 0);
    ck_assert_int_eq(gw_netaddr_peer_text((void *)&a.ss, a.len, buf, sizeof(buf)), 10);
    ck_assert_str_eq(buf, "10.0.0.255");
    a = must_parse("[2001:db8::1]:80", 0);
    ck_assert_int_eq(gw_netaddr_peer_text((void *)&a.ss, a.len, buf, sizeof(buf)), 11);
    ck_assert_str_eq(buf, "2001:db8::1");
    /* unknown: no length, a unix socket, a buffer that could not hold every IPv6 */
    ck_assert_int_eq(gw_netaddr_peer_text((void *)&a.ss, 0, buf, sizeof(buf)), -1);
    ck_assert_int_eq(gw_netaddr_peer_text((void *)&a.ss, a.len, small, sizeof(small)), -1);
    a = must_parse("unix:/run/x.sock", 1);
    ck_assert_int_eq(gw_netaddr_peer_text((void *)&a.ss, a.len, buf, sizeof(buf)), -1);
}
END_TEST

START_TEST(cidr_parse)
{
    gw_cidr_t c = must_cidr("10.0.0.0/8");
    ck_assert_int_eq(c.family, AF_INET);
    ck_assert_uint_eq(c.prefix, 8);
    ck_assert_uint_eq(c.addr[0], 10);
    c = must_cidr("fd00::/8");
    ck_assert_int_eq(c.family, AF_INET6);
    ck_assert_uint_eq(c.prefix, 8);
    c = must_cidr("192.168.1.7");
    ck_assert_uint_eq(c.prefix, 32);
    c = must_cidr("::1");
    ck_assert_uint_eq(c.prefix, 128);
    c = must_cidr("0.0.0.0/0");
    ck_assert_uint_eq(c.prefix, 0);
    c = must_cidr("10.128.0.0/9");
    ck_assert_uint_eq(c.prefix, 9);

    static const char *bad[] = {"10.0.0.0/33", "fd00::/129",  "10.1.0.0/8",  "10.0.0.1/31", "fd00::1/64", "10.0.0.0/",
                                "10.0.0.0/08", "10.0.0.0/-1", "10.0.0.0/8x", "lan/8",       "",           "10.0.0/8",
                                "/8"};
    size_t i;
    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        const char *err = NULL;
        ck_assert_msg(gw_cidr_parse(bad[i], &c, &err) == -1, "\"%s\" was accepted", bad[i]);
        ck_assert_ptr_nonnull(err);
    }
}
END_TEST

START_TEST(cidr_contains)
{
    gw_cidr_t ten = must_cidr("10.0.0.0/8"), odd = must_cidr("10.128.0.0/9"), v6 = must_cidr("fd00::/8"),
              host = must_cidr("192.168.1.7"), all = must_cidr("0.0.0.0/0");

    ck_assert(contains(&ten, "10.0.0.1"));
    ck_assert(contains(&ten, "10.255.255.255"));
    ck_assert(!contains(&ten, "11.0.0.0"));
    ck_assert(!contains(&ten, "127.0.0.1"));
    ck_assert(contains(&odd, "10.200.1.1"));
    ck_assert(!contains(&odd, "10.127.255.255"));
    ck_assert(contains(&v6, "fd12:3456::1"));
    ck_assert(!contains(&v6, "fe80::1"));
    ck_assert(!contains(&v6, "10.0.0.1"));
    ck_assert(!contains(&ten, "fd00::1"));
    ck_assert(contains(&host, "192.168.1.7"));
    ck_assert(!contains(&host, "192.168.1.8"));
    ck_assert(contains(&all, "8.8.8.8"));

    /* an IPv4-mapped IPv6 peer is the IPv4 address it carries */
    ck_assert(contains(&ten, "::ffff:10.1.2.3"));
    ck_assert(!contains(&ten, "::ffff:127.0.0.1"));
    ck_assert(!contains(&v6, "::ffff:10.1.2.3"));
    /* a network written in mapped form holds plain IPv4 peers too */
    gw_cidr_t mapped = must_cidr("::ffff:10.0.0.0/104");
    ck_assert(contains(&mapped, "10.9.9.9"));
    ck_assert(!contains(&mapped, "11.9.9.9"));

    /* unix sockets are never inside a network */
    gw_netaddr_t u = must_parse("unix:/tmp/x.sock", 1);
    ck_assert(!gw_cidr_contains(&all, (const struct sockaddr *)&u.ss));
}
END_TEST

START_TEST(is_loopback)
{
    static const struct {
        const char *ip;
        int loopback;
    } cases[] = {{"127.0.0.1", 1}, {"127.255.1.2", 1}, {"::1", 1},     {"::ffff:127.0.0.1", 1}, {"10.0.0.7", 0},
                 {"128.0.0.1", 0}, {"::2", 0},         {"fd00::1", 0}, {"::ffff:10.0.0.1", 0},  {"0.0.0.0", 0}};
    size_t i;

    for (i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        gw_netaddr_t a;
        ck_assert_int_eq(gw_netaddr_parse_ip(cases[i].ip, strlen(cases[i].ip), 80, &a), 0);
        ck_assert_msg(gw_netaddr_is_loopback((const struct sockaddr *)&a.ss) == cases[i].loopback, "%s", cases[i].ip);
    }
}
END_TEST

START_TEST(cidr_list)
{
    gw_cidr_t list[2];
    list[0] = must_cidr("10.0.0.0/8");
    list[1] = must_cidr("fd00::/8");
    gw_netaddr_t a;
    ck_assert_int_eq(gw_netaddr_parse_ip("fd00::5", 7, 1, &a), 0);
    ck_assert(gw_cidr_list_contains(list, 2, (const struct sockaddr *)&a.ss));
    ck_assert_int_eq(gw_netaddr_parse_ip("127.0.0.1", 9, 1, &a), 0);
    ck_assert(!gw_cidr_list_contains(list, 2, (const struct sockaddr *)&a.ss));
    ck_assert(!gw_cidr_list_contains(list, 0, (const struct sockaddr *)&a.ss));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("netaddr");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, ipv4_with_port);
    tcase_add_test(tc, ipv6_with_port);
    tcase_add_test(tc, unix_path);
    tcase_add_test(tc, rejects_hostnames_and_junk);
    tcase_add_test(tc, parse_ip_literal);
    tcase_add_test(tc, format_too_small);
    tcase_add_test(tc, peer_text);
    tcase_add_test(tc, cidr_parse);
    tcase_add_test(tc, cidr_contains);
    tcase_add_test(tc, cidr_list);
    tcase_add_test(tc, is_loopback);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
