/* Unit tests for common/numfmt.c: byte for byte what snprintf and inet_ntop write, at the edges and across ranges. */
#include <check.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/numfmt.h"

static void check_dec(uint64_t v)
{
    char want[32], got[GW_NUMFMT_DEC_SIZE];
    int n = snprintf(want, sizeof(want), "%" PRIu64, v);

    ck_assert_uint_eq(gw_numfmt_dec(got, v), (size_t)n);
    ck_assert_str_eq(got, want);
}

static void check_hex(uint64_t v)
{
    char want[32], got[GW_NUMFMT_HEX_SIZE];
    int n = snprintf(want, sizeof(want), "%" PRIx64, v);

    ck_assert_uint_eq(gw_numfmt_hex(got, v), (size_t)n);
    ck_assert_str_eq(got, want);
}

static void check_ipv4(uint32_t host_order)
{
    struct in_addr a = {htonl(host_order)};
    char want[INET_ADDRSTRLEN], got[GW_NUMFMT_IPV4_SIZE];

    ck_assert_ptr_nonnull(inet_ntop(AF_INET, &a, want, sizeof(want)));
    ck_assert_uint_eq(gw_numfmt_ipv4(got, &a), strlen(want));
    ck_assert_str_eq(got, want);
}

START_TEST(decimal_is_what_snprintf_writes)
{
    uint64_t v, p;

    check_dec(0);
    check_dec(UINT64_MAX);
    check_dec(UINT64_MAX - 1);
    check_dec(UINT32_MAX);
    check_dec(65535);
    /* every power of ten and its neighbours: each length and its carry */
    for (p = 1; p <= UINT64_MAX / 10; p *= 10) {
        check_dec(p - 1);
        check_dec(p);
        check_dec(p + 1);
    }
    check_dec(p);
    for (v = 0; v != 2000; ++v)
        check_dec(v);
}
END_TEST

START_TEST(hexadecimal_is_what_snprintf_writes)
{
    uint64_t v;
    int shift;

    check_hex(0);
    check_hex(UINT64_MAX);
    for (shift = 0; shift != 64; ++shift) {
        check_hex((uint64_t)1 << shift);
        check_hex(((uint64_t)1 << shift) - 1);
    }
    for (v = 0; v != 2000; ++v)
        check_hex(v);
}
END_TEST

START_TEST(ipv4_is_what_inet_ntop_writes)
{
    uint32_t v;

    check_ipv4(0);
    check_ipv4(UINT32_MAX); /* 255.255.255.255 */
    check_ipv4(0x7f000001); /* 127.0.0.1 */
    check_ipv4(0x0a000a09); /* 10.0.10.9 */
    check_ipv4(0x64636463); /* 100.99.100.99 */
    /* every byte value in every position */
    for (v = 0; v != 256; ++v) {
        check_ipv4(v);
        check_ipv4(v << 8 | 1);
        check_ipv4(v << 16 | 2);
        check_ipv4(v << 24 | 3);
        check_ipv4(v * 0x01010101u);
    }
    /* a stride over the whole space */
    for (v = 12345; v < UINT32_MAX - 104729; v += 1048573)
        check_ipv4(v);
}
END_TEST

START_TEST(ipv4_of_a_v4_mapped_v6_address)
{
    struct in6_addr a6;
    char got[GW_NUMFMT_IPV4_SIZE];

    ck_assert_int_eq(inet_pton(AF_INET6, "::ffff:192.0.2.255", &a6), 1);
    ck_assert(IN6_IS_ADDR_V4MAPPED(&a6));
    ck_assert_uint_eq(gw_numfmt_ipv4(got, &a6.s6_addr[12]), strlen("192.0.2.255"));
    ck_assert_str_eq(got, "192.0.2.255");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("numfmt");
    TCase *tc = tcase_create("numfmt");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, decimal_is_what_snprintf_writes);
    tcase_add_test(tc, hexadecimal_is_what_snprintf_writes);
    tcase_add_test(tc, ipv4_is_what_inet_ntop_writes);
    tcase_add_test(tc, ipv4_of_a_v4_mapped_v6_address);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
