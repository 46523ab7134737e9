/*
 * The PROXY protocol header parser (common/proxy_header.c): v1 and v2, each
 * header fed one byte at a time (every prefix is "need more", the whole is
 * its exact length whatever follows), every refusal decided at the byte that
 * makes it one and never taken back, and the bounds.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include "common/netaddr.h"
#include "common/proxy_header.h"

#define V2_SIG "\r\n\r\n\0\r\nQUIT\n"
#define FOLLOWING "\x16\x03\x01\x02\x00\x01GET / HTTP/1.1\r\n\r\n" /* a ClientHello's first bytes, or a request */

static const char *src_text(const gw_proxy_header_t *h, char *buf)
{
    ck_assert_int_eq(gw_netaddr_peer_text((const void *)&h->src, h->src_len, buf, INET6_ADDRSTRLEN) > 0, 1);
    return buf;
}

static uint16_t src_port(const gw_proxy_header_t *h)
{
    return ntohs(h->src.ss_family == AF_INET ? ((const struct sockaddr_in *)&h->src)->sin_port
                                             : ((const struct sockaddr_in6 *)&h->src)->sin6_port);
}

/* hdr[0..len) is one complete header: every shorter prefix needs more; the
 * whole, alone or followed by the client's bytes, parses to exactly len. */
static void parse_split(const char *hdr, size_t len, gw_proxy_header_t *out)
{
    char buf[GW_PROXY_HEADER_V2_MAX + sizeof(FOLLOWING)];
    size_t k;

    ck_assert_uint_le(len, GW_PROXY_HEADER_V2_MAX);
    memcpy(buf, hdr, len);
    memcpy(buf + len, FOLLOWING, sizeof(FOLLOWING) - 1);
    for (k = 0; k != len; ++k)
        ck_assert_msg(gw_proxy_header_parse(buf, k, out) == 0, "prefix of %zu bytes (of %zu) is not incomplete", k, len);
    for (k = len; k <= len + sizeof(FOLLOWING) - 1; ++k)
        ck_assert_int_eq(gw_proxy_header_parse(buf, k, out), (ssize_t)len);
}

/* bad[0..len) is refused once `at` bytes are there (and not before), and at every length after. */
static void refused_at(const char *bad, size_t len, size_t at)
{
    gw_proxy_header_t h;
    size_t k;

    for (k = 0; k <= len; ++k)
        ck_assert_msg(gw_proxy_header_parse(bad, k, &h) == (k < at ? 0 : -1), "%zu bytes: %zd", k,
                      gw_proxy_header_parse(bad, k, &h));
}

START_TEST(test_v1_tcp4)
{
    static const char hdr[] = "PROXY TCP4 203.0.113.7 10.0.0.5 51234 443\r\n";
    gw_proxy_header_t h;
    char ip[INET6_ADDRSTRLEN];

    parse_split(hdr, sizeof(hdr) - 1, &h);
    ck_assert_int_eq(h.version, 1);
    ck_assert_int_eq(h.has_src, 1);
    ck_assert_int_eq(h.src.ss_family, AF_INET);
    ck_assert_str_eq(src_text(&h, ip), "203.0.113.7");
    ck_assert_uint_eq(src_port(&h), 51234);
}
END_TEST

START_TEST(test_v1_tcp6_and_unknown)
{
    static const char tcp6[] = "PROXY TCP6 2001:db8::1 2001:db8::2 65535 8443\r\n";
    static const char tcp6_longest[] =
        "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    /* the specification's longest line: 107 bytes */
    static const char longest[] =
        "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    gw_proxy_header_t h;
    char ip[INET6_ADDRSTRLEN];

    parse_split(tcp6, sizeof(tcp6) - 1, &h);
    ck_assert_int_eq(h.src.ss_family, AF_INET6);
    ck_assert_str_eq(src_text(&h, ip), "2001:db8::1");
    ck_assert_uint_eq(src_port(&h), 65535);

    parse_split(tcp6_longest, sizeof(tcp6_longest) - 1, &h);
    ck_assert_int_eq(h.has_src, 1);
    ck_assert_uint_eq(sizeof(longest) - 1, GW_PROXY_HEADER_V1_MAX);
    parse_split(longest, sizeof(longest) - 1, &h);
    ck_assert_int_eq(h.has_src, 0);

    parse_split("PROXY UNKNOWN\r\n", 15, &h);
    ck_assert_int_eq(h.has_src, 0);
    /* UNKNOWN: the rest of the line is ignored */
    parse_split("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n", 35, &h);
    ck_assert_int_eq(h.has_src, 0);
}
END_TEST

START_TEST(test_v1_refused)
{
    /* another protocol: refused at its first byte that is no header's */
    refused_at("GET / HTTP/1.1\r\n", 16, 1);
    refused_at("\x16\x03\x01\x02\x00", 5, 1);
    refused_at("PROXZ", 5, 5);
    refused_at("PROXY TCP5 1.2.3.4 1.2.3.5 1 2\r\n", 32, 10);
    refused_at("PROXY tcp4 1.2.3.4 1.2.3.5 1 2\r\n", 32, 7);
    /* a complete line that is wrong: refused at its LF */
    refused_at("PROXY TCP4 1.2.3.4 1.2.3.5 1 2\n", 31, 31);       /* LF without CR */
    refused_at("PROXY TCP4 1.2.3.4 1.2.3.5 1 2 3\r\n", 34, 34);   /* a field too many */
    refused_at("PROXY TCP4 1.2.3.4 1.2.3.5 1\r\n", 30, 30);       /* one missing */
    refused_at("PROXY TCP4 1.2.3.4  1.2.3.5 1 2\r\n", 33, 33);    /* an empty field */
    refused_at("PROXY TCP4 2001:db8::1 1.2.3.5 1 2\r\n", 36, 36); /* TCP4 with an IPv6 address */
    refused_at("PROXY TCP6 1.2.3.4 2001:db8::2 1 2\r\n", 36, 36); /* TCP6 with an IPv4 address */
    refused_at("PROXY TCP4 1.2.3.4 1.2.3.5 65536 2\r\n", 36, 36); /* port out of range */
    refused_at("PROXY TCP4 1.2.3.4 1.2.3.5 080 2\r\n", 34, 34);   /* leading zero */
    refused_at("PROXY TCP4 1.2.3.4 1.2.3.5 +80 2\r\n", 34, 34);   /* sign */
    refused_at("PROXY TCP4 1.2.3.256 1.2.3.5 1 2\r\n", 34, 34);   /* not an address */
    refused_at("PROXY TCP4 lb.example 1.2.3.5 1 2\r\n", 35, 35);  /* a name */
    refused_at("PROXY TCP4\r\n", 12, 11);                         /* "TCP4" without its space */
    refused_at("PROXY UNKNOWNX\r\n", 16, 16);
    /* a CR not followed by LF, a control byte: refused at once */
    refused_at("PROXY TCP4 1.2.3.4\r 1.2.3.5 1 2\r\n", 33, 20);
    refused_at("PROXY TCP4 1.2.3.4\t1.2.3.5 1 2\r\n", 32, 19);
    refused_at("PROXY TCP4 1.2.3.4\0 1.2.3.5 1 2\r\n", 33, 19);
}
END_TEST

START_TEST(test_v1_bound)
{
    char line[256];
    gw_proxy_header_t h;

    /* 107 bytes without a LF: refused at the 107th, never waited on */
    memset(line, '1', sizeof(line));
    memcpy(line, "PROXY UNKNOWN ", 14);
    refused_at(line, sizeof(line), GW_PROXY_HEADER_V1_MAX);
    /* a LF beyond 107 bytes is not looked for */
    memcpy(line + 200, "\r\n", 2);
    ck_assert_int_eq(gw_proxy_header_parse(line, 202, &h), -1);
}
END_TEST

/* A v2 header: signature, ver_cmd, fam, the block (addresses + tlvs). */
static size_t v2(char *out, unsigned char ver_cmd, unsigned char fam, const void *block, size_t block_len)
{
    memcpy(out, V2_SIG, 12);
    out[12] = (char)ver_cmd;
    out[13] = (char)fam;
    out[14] = (char)(block_len >> 8);
    out[15] = (char)(block_len & 0xff);
    memcpy(out + 16, block, block_len);
    return 16 + block_len;
}

START_TEST(test_v2_tcp4_with_tlvs)
{
    /* 198.51.100.9:40000 -> 10.0.0.5:443; then the TLVs AWS's NLB and others
     * send: AWS VPC endpoint id (0xEA), ALPN (0x01), AUTHORITY (0x02),
     * NOOP padding (0x04) and a zero-length one, CRC32C (0x03) */
    static const unsigned char block[] = {198,  51,  100, 9,    10,   0,    0,    5,    0x9c, 0x40, 0x01, 0xbb, 0xea, 0x00, 0x17,
                                          0x01, 'v', 'p', 'c',  'e',  '-',  '0',  '1',  '2',  '3',  '4',  '5',  '6',  '7',  '8',
                                          '9',  'a', 'b', 'c',  'd',  'e',  'f',  '0',  0x01, 0x00, 0x02, 'h',  '2',  0x02, 0x00,
                                          0x0b, 'l', 'i', 'z',  'a',  'r',  'd',  '.',  'a',  'p',  'p',  's',  0x04, 0x00, 0x03,
                                          0,    0,   0,   0x04, 0x00, 0x00, 0x03, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef};
    char hdr[256], ip[INET6_ADDRSTRLEN];
    gw_proxy_header_t h;
    size_t len = v2(hdr, 0x21, 0x11, block, sizeof(block));

    parse_split(hdr, len, &h);
    ck_assert_int_eq(h.version, 2);
    ck_assert_int_eq(h.has_src, 1);
    ck_assert_str_eq(src_text(&h, ip), "198.51.100.9");
    ck_assert_uint_eq(src_port(&h), 40000);
}
END_TEST

START_TEST(test_v2_tcp6_local_and_others)
{
    unsigned char block[216 + 8] = {0};
    char hdr[512], ip[INET6_ADDRSTRLEN];
    gw_proxy_header_t h;
    size_t len;

    /* TCP6 2001:db8::42 port 1 */
    block[0] = 0x20, block[1] = 0x01, block[2] = 0x0d, block[3] = 0xb8, block[15] = 0x42, block[33] = 1;
    parse_split(hdr, len = v2(hdr, 0x21, 0x21, block, 36), &h);
    ck_assert_int_eq(h.has_src, 1);
    ck_assert_int_eq(h.src.ss_family, AF_INET6);
    ck_assert_str_eq(src_text(&h, ip), "2001:db8::42");
    ck_assert_uint_eq(src_port(&h), 1);

    /* LOCAL (the balancer's health check): its block, whatever it holds, is skipped */
    parse_split(hdr, v2(hdr, 0x20, 0x00, block, 0), &h);
    ck_assert_int_eq(h.has_src, 0);
    parse_split(hdr, v2(hdr, 0x20, 0x11, block, 12), &h);
    ck_assert_int_eq(h.has_src, 0);
    parse_split(hdr, v2(hdr, 0x20, 0x11, block, 5), &h); /* not even an address block */
    ck_assert_int_eq(h.has_src, 0);

    /* PROXY of UDP, UNIX or UNSPEC: read, nothing to use */
    parse_split(hdr, v2(hdr, 0x21, 0x12, block, 12), &h);
    ck_assert_int_eq(h.has_src, 0);
    parse_split(hdr, v2(hdr, 0x21, 0x31, block, 216), &h);
    ck_assert_int_eq(h.has_src, 0);
    parse_split(hdr, v2(hdr, 0x21, 0x00, block, 0), &h);
    ck_assert_int_eq(h.has_src, 0);
}
END_TEST

START_TEST(test_v2_refused)
{
    unsigned char block[64] = {1, 2, 3, 4, 5, 6, 7, 8, 0, 80, 0, 80};
    char hdr[512];
    size_t len;

    refused_at("\r\n\r\n\0\r\nQUIX\n", 12, 11); /* the signature */
    refused_at("\r\n\r\nGET", 7, 5);
    len = v2(hdr, 0x11, 0x11, block, 12); /* version 1 in binary */
    refused_at(hdr, len, 13);
    len = v2(hdr, 0x22, 0x11, block, 12); /* command 2 */
    refused_at(hdr, len, 13);
    len = v2(hdr, 0x21, 0x41, block, 12); /* family 4 */
    refused_at(hdr, len, 14);
    len = v2(hdr, 0x21, 0x13, block, 12); /* transport 3 */
    refused_at(hdr, len, 14);
    len = v2(hdr, 0x21, 0x11, block, 11); /* an IPv4 block too short for its addresses */
    refused_at(hdr, len, len);
    len = v2(hdr, 0x21, 0x21, block, 35);
    refused_at(hdr, len, len);
    /* TLVs that overrun: a TLV header cut, a length past the end */
    block[12] = 0x01;
    len = v2(hdr, 0x21, 0x11, block, 14);
    refused_at(hdr, len, len);
    block[13] = 0x00, block[14] = 0x05, block[15] = 'h', block[16] = '2';
    len = v2(hdr, 0x21, 0x11, block, 17);
    refused_at(hdr, len, len);
}
END_TEST

START_TEST(test_v2_bound)
{
    static char hdr[GW_PROXY_HEADER_V2_MAX + 16];
    unsigned char *block = calloc(1, GW_PROXY_HEADER_V2_MAX);
    gw_proxy_header_t h;
    size_t tlv_len = GW_PROXY_HEADER_V2_MAX - 16 - 12 - 3;

    /* the largest accepted: one NOOP TLV filling the header to GW_PROXY_HEADER_V2_MAX bytes */
    block[12] = 0x04, block[13] = (unsigned char)(tlv_len >> 8), block[14] = (unsigned char)tlv_len;
    parse_split(hdr, v2(hdr, 0x21, 0x11, block, GW_PROXY_HEADER_V2_MAX - 16), &h);
    /* one byte more is refused as soon as its length field is there: nothing is waited for */
    tlv_len += 1;
    block[13] = (unsigned char)(tlv_len >> 8), block[14] = (unsigned char)tlv_len;
    v2(hdr, 0x21, 0x11, block, GW_PROXY_HEADER_V2_MAX - 16 + 1);
    refused_at(hdr, GW_PROXY_HEADER_V2_MAX + 1, 16);
    /* the largest a header can announce */
    hdr[14] = (char)0xff, hdr[15] = (char)0xff;
    refused_at(hdr, 16, 16);
    free(block);
}
END_TEST

static Suite *proxy_header_suite(void)
{
    Suite *s = suite_create("proxy_header");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_v1_tcp4);
    tcase_add_test(tc, test_v1_tcp6_and_unknown);
    tcase_add_test(tc, test_v1_refused);
    tcase_add_test(tc, test_v1_bound);
    tcase_add_test(tc, test_v2_tcp4_with_tlvs);
    tcase_add_test(tc, test_v2_tcp6_local_and_others);
    tcase_add_test(tc, test_v2_refused);
    tcase_add_test(tc, test_v2_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(proxy_header_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
