/*
 * The PROXY protocol header parser (versions 1 and 2). Incremental in the
 * way picohttpparser is: it is handed every byte received so far and says
 * "complete", "need more" or "never", deciding "never" as early as the
 * bytes allow, so that another protocol is refused at its first byte.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include "common/netaddr.h"
#include "common/proxy_header.h"

#define V1_PREFIX "PROXY "
#define V1_PREFIX_LEN (sizeof(V1_PREFIX) - 1)
#define V2_SIG "\r\n\r\n\0\r\nQUIT\n"
#define V2_SIG_LEN 12
#define V2_FIXED_LEN 16
#define V2_CMD_LOCAL 0x0
#define V2_CMD_PROXY 0x1
#define V2_FAM_TCP4 0x11 /* AF_INET, STREAM */
#define V2_FAM_TCP6 0x21 /* AF_INET6, STREAM */

/* The v1 protocol words; a line's word must be one of them. */
static const char *const v1_words[] = {"TCP4 ", "TCP6 ", "UNKNOWN", NULL};

/* 1 when s[0..len) is a prefix of `word` or starts with all of it. */
static int prefix_match(const char *s, size_t len, const char *word)
{
    size_t wlen = strlen(word);
    return memcmp(s, word, len < wlen ? len : wlen) == 0;
}

/* 0 when buf[0..len), which holds no LF, can still grow into a v1 line; -1 when not. */
static int v1_partial(const char *buf, size_t len)
{
    size_t i;
    int word_ok = 0;

    if (len >= GW_PROXY_HEADER_V1_MAX || !prefix_match(buf, len, V1_PREFIX))
        return -1;
    if (len <= V1_PREFIX_LEN)
        return 0;
    for (i = 0; v1_words[i] != NULL; ++i)
        word_ok |= prefix_match(buf + V1_PREFIX_LEN, len - V1_PREFIX_LEN, v1_words[i]);
    if (!word_ok)
        return -1;
    for (i = 0; i != len; ++i) {
        unsigned char c = (unsigned char)buf[i];
        /* a CR is only allowed as the last byte so far: the LF must follow it */
        if (!((c >= 0x20 && c <= 0x7e) || (c == '\r' && i == len - 1)))
            return -1;
    }
    return 0;
}

/* Splits s[0..len) at single spaces into at most `max` fields; an empty
 * field (two spaces, a space at an end) or more fields fail. Returns the
 * number of fields or -1. */
static int split_fields(const char *s, size_t len, const char **f, size_t *flen, int max)
{
    int n = 0;
    size_t start = 0, i;

    for (i = 0; i <= len; ++i) {
        if (i != len && s[i] != ' ')
            continue;
        if (i == start || n == max)
            return -1;
        f[n] = s + start;
        flen[n++] = i - start;
        start = i + 1;
    }
    return n;
}

/* Parses the v1 line body between "PROXY " and CRLF. 0 or -1. */
static int v1_line(const char *s, size_t len, gw_proxy_header_t *out)
{
    const char *f[5];
    size_t flen[5];
    uint16_t sport, dport;
    gw_netaddr_t src, dst;
    int family;

    if (len >= 7 && memcmp(s, "UNKNOWN", 7) == 0 && (len == 7 || s[7] == ' ')) {
        out->has_src = 0; /* the rest of the line is to be ignored (the specification) */
        return 0;
    }
    if (split_fields(s, len, f, flen, 5) != 5 || flen[0] != 4 || memcmp(f[0], "TCP", 3) != 0)
        return -1;
    if (f[0][3] == '4')
        family = AF_INET;
    else if (f[0][3] == '6')
        family = AF_INET6;
    else
        return -1;
    if (gw_port_parse(f[3], flen[3], &sport) != 0 || gw_port_parse(f[4], flen[4], &dport) != 0 ||
        gw_netaddr_parse_ip(f[1], flen[1], sport, &src) != 0 || gw_netaddr_parse_ip(f[2], flen[2], dport, &dst) != 0 ||
        src.ss.ss_family != family || dst.ss.ss_family != family)
        return -1;
    out->has_src = 1;
    memcpy(&out->src, &src.ss, src.len);
    out->src_len = src.len;
    return 0;
}

static ssize_t parse_v1(const char *buf, size_t len, gw_proxy_header_t *out)
{
    size_t scan = len < GW_PROXY_HEADER_V1_MAX ? len : GW_PROXY_HEADER_V1_MAX;
    const char *lf = memchr(buf, '\n', scan);
    size_t line_len;

    if (lf == NULL)
        return v1_partial(buf, len) == 0 ? 0 : -1;
    line_len = (size_t)(lf - buf) + 1;
    /* the line so far must have been a valid beginning, CR last */
    if (line_len < V1_PREFIX_LEN + 2 || v1_partial(buf, line_len - 1) != 0 || buf[line_len - 2] != '\r')
        return -1;
    out->version = 1;
    if (v1_line(buf + V1_PREFIX_LEN, line_len - 2 - V1_PREFIX_LEN, out) != 0)
        return -1;
    return (ssize_t)line_len;
}

/* The v2 TLVs in p[0..len): each a type byte, a 2-byte length and that many
 * bytes, together exactly filling the rest of the header. 0 or -1. */
static int v2_tlvs_fit(const unsigned char *p, size_t len)
{
    while (len != 0) {
        size_t tlv_len;
        if (len < 3)
            return -1;
        tlv_len = (size_t)p[1] << 8 | p[2];
        if (tlv_len > len - 3)
            return -1;
        p += 3 + tlv_len;
        len -= 3 + tlv_len;
    }
    return 0;
}

/* The address block of a v2 PROXY command of family `fam` at p[0..len). 0 or -1. */
static int v2_addresses(unsigned fam, const unsigned char *p, size_t len, gw_proxy_header_t *out)
{
    /* by address family: AF_UNSPEC; AF_INET (src, dst, sport, dport); AF_INET6; AF_UNIX (two 108-byte paths) */
    static const size_t addr_lens[] = {0, 12, 36, 216};
    size_t addr_len;

    if ((fam >> 4) >= sizeof(addr_lens) / sizeof(addr_lens[0]))
        return -1;
    addr_len = addr_lens[fam >> 4];
    if ((fam & 0xf) > 2 || len < addr_len || v2_tlvs_fit(p + addr_len, len - addr_len) != 0)
        return -1;
    memset(&out->src, 0, sizeof(out->src));
    if (fam == V2_FAM_TCP4) {
        struct sockaddr_in *sin = (void *)&out->src;
        sin->sin_family = AF_INET;
        memcpy(&sin->sin_addr, p, 4);
        memcpy(&sin->sin_port, p + 8, 2); /* network order on both sides */
        out->src_len = sizeof(*sin);
        out->has_src = 1;
    } else if (fam == V2_FAM_TCP6) {
        struct sockaddr_in6 *sin6 = (void *)&out->src;
        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_addr, p, 16);
        memcpy(&sin6->sin6_port, p + 32, 2);
        out->src_len = sizeof(*sin6);
        out->has_src = 1;
    } else {
        out->has_src = 0; /* UDP, a UNIX socket or unspecified: nothing to use for a TCP client (HAProxy does the same) */
    }
    return 0;
}

static ssize_t parse_v2(const unsigned char *buf, size_t len, gw_proxy_header_t *out)
{
    size_t body_len;

    if (memcmp(buf, V2_SIG, len < V2_SIG_LEN ? len : V2_SIG_LEN) != 0)
        return -1;
    /* version 2, command LOCAL or PROXY */
    if (len > 12 && ((buf[12] >> 4) != 2 || (buf[12] & 0xf) > V2_CMD_PROXY))
        return -1;
    if (len > 13 && ((buf[13] >> 4) > 3 || (buf[13] & 0xf) > 2))
        return -1;
    if (len < V2_FIXED_LEN)
        return 0;
    body_len = (size_t)buf[14] << 8 | buf[15];
    if (body_len > GW_PROXY_HEADER_V2_MAX - V2_FIXED_LEN)
        return -1;
    if (len < V2_FIXED_LEN + body_len)
        return 0;
    out->version = 2;
    if ((buf[12] & 0xf) == V2_CMD_LOCAL) {
        out->has_src = 0; /* the balancer speaking for itself: its block is to be ignored */
    } else if (v2_addresses(buf[13], buf + V2_FIXED_LEN, body_len, out) != 0) {
        return -1;
    }
    return (ssize_t)(V2_FIXED_LEN + body_len);
}

ssize_t gw_proxy_header_parse(const void *buf, size_t len, gw_proxy_header_t *out)
{
    const unsigned char *p = buf;

    if (len == 0)
        return 0;
    switch (p[0]) {
    case 'P':
        return parse_v1(buf, len, out);
    case '\r':
        return parse_v2(p, len, out);
    default:
        return -1;
    }
}
