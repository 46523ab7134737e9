/*
 * Socket addresses and networks as the configuration spells them. Only IP
 * literals are accepted (inet_pton), so nothing here ever resolves a name;
 * allowed_networks relies on gw_cidr_contains seeing the real address.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include "common/netaddr.h"
#include "common/numfmt.h"

#define IP_LITERAL_MAX 64 /* longer than any INET6_ADDRSTRLEN spelling */

int gw_port_parse(const char *s, size_t len, uint16_t *out)
{
    unsigned long v = 0;
    size_t i;

    if (len == 0 || len > 5 || s[0] == '0')
        return -1;
    for (i = 0; i != len; ++i) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = (uint16_t)v;
    return 0;
}

/* Copies s[0..len) into buf as a C string; -1 when it does not fit or holds a NUL. */
static int copy_literal(const char *s, size_t len, char *buf, size_t bufsize)
{
    if (len == 0 || len >= bufsize || memchr(s, '\0', len) != NULL)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

static void set_inet(gw_netaddr_t *out, const struct in_addr *a, uint16_t port)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)&out->ss;

    memset(out, 0, sizeof(*out));
    sin->sin_family = AF_INET;
    sin->sin_addr = *a;
    sin->sin_port = htons(port);
    out->len = sizeof(*sin);
}

static void set_inet6(gw_netaddr_t *out, const struct in6_addr *a, uint16_t port)
{
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->ss;

    memset(out, 0, sizeof(*out));
    sin6->sin6_family = AF_INET6;
    sin6->sin6_addr = *a;
    sin6->sin6_port = htons(port);
    out->len = sizeof(*sin6);
}

int gw_netaddr_parse_ip(const char *s, size_t len, uint16_t port, gw_netaddr_t *out)
{
    char buf[IP_LITERAL_MAX];
    struct in_addr a4;
    struct in6_addr a6;

    if (copy_literal(s, len, buf, sizeof(buf)) != 0)
        return -1;
    if (inet_pton(AF_INET, buf, &a4) == 1) {
        set_inet(out, &a4, port);
        return 0;
    }
    if (inet_pton(AF_INET6, buf, &a6) == 1) {
        set_inet6(out, &a6, port);
        return 0;
    }
    return -1;
}

static int parse_unix(const char *path, gw_netaddr_t *out, const char **err)
{
    struct sockaddr_un *sun = (struct sockaddr_un *)&out->ss;
    size_t len = strlen(path);

    if (len == 0 || path[0] != '/') {
        *err = "expected an absolute path after \"unix:\"";
        return -1;
    }
    if (len >= sizeof(sun->sun_path)) {
        *err = "unix socket path is too long";
        return -1;
    }
    memset(out, 0, sizeof(*out));
    sun->sun_family = AF_UNIX;
    memcpy(sun->sun_path, path, len + 1);
    out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    return 0;
}

int gw_netaddr_parse(const char *s, int allow_unix, gw_netaddr_t *out, const char **err)
{
    static const char expected[] = "expected \"ipv4:port\" or \"[ipv6]:port\" with an IP literal and a port from 1 to 65535";
    char buf[IP_LITERAL_MAX];
    const char *colon, *port_str;
    uint16_t port;

    if (strncmp(s, "unix:", 5) == 0) {
        if (!allow_unix) {
            *err = "a unix socket is not allowed here";
            return -1;
        }
        return parse_unix(s + 5, out, err);
    }

    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        struct in6_addr a6;
        if (close == NULL || close[1] != ':')
            goto Error;
        if (copy_literal(s + 1, (size_t)(close - s - 1), buf, sizeof(buf)) != 0 || inet_pton(AF_INET6, buf, &a6) != 1)
            goto Error;
        port_str = close + 2;
        if (gw_port_parse(port_str, strlen(port_str), &port) != 0)
            goto Error;
        set_inet6(out, &a6, port);
        return 0;
    }

    /* "a.b.c.d:port"; an unbracketed IPv6 address has more than one colon */
    struct in_addr a4;
    if ((colon = strchr(s, ':')) == NULL || strchr(colon + 1, ':') != NULL)
        goto Error;
    if (copy_literal(s, (size_t)(colon - s), buf, sizeof(buf)) != 0 || inet_pton(AF_INET, buf, &a4) != 1)
        goto Error;
    port_str = colon + 1;
    if (gw_port_parse(port_str, strlen(port_str), &port) != 0)
        goto Error;
    set_inet(out, &a4, port);
    return 0;

Error:
    *err = expected;
    return -1;
}

int gw_netaddr_peer_text(const struct sockaddr *sa, socklen_t len, char *buf, size_t bufsize)
{
    const struct sockaddr_in6 *sin6 = (const void *)sa;

    if (len == 0 || bufsize < INET6_ADDRSTRLEN)
        return -1;
    switch (sa->sa_family) {
    case AF_INET:
        return (int)gw_numfmt_ipv4(buf, &((const struct sockaddr_in *)sa)->sin_addr);
    case AF_INET6:
        if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr))
            return (int)gw_numfmt_ipv4(buf, &sin6->sin6_addr.s6_addr[12]);
        return inet_ntop(AF_INET6, &sin6->sin6_addr, buf, (socklen_t)bufsize) != NULL ? (int)strlen(buf) : -1;
    default:
        return -1;
    }
}

int gw_netaddr_format(const gw_netaddr_t *a, char *buf, size_t bufsize)
{
    char ip[INET6_ADDRSTRLEN];
    int n;

    switch (a->ss.ss_family) {
    case AF_INET: {
        const struct sockaddr_in *sin = (const void *)&a->ss;
        if (inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)) == NULL)
            return -1;
        n = snprintf(buf, bufsize, "%s:%u", ip, (unsigned)ntohs(sin->sin_port));
    } break;
    case AF_INET6: {
        const struct sockaddr_in6 *sin6 = (const void *)&a->ss;
        if (inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip)) == NULL)
            return -1;
        n = snprintf(buf, bufsize, "[%s]:%u", ip, (unsigned)ntohs(sin6->sin6_port));
    } break;
    case AF_UNIX: {
        const struct sockaddr_un *sun = (const void *)&a->ss;
        n = snprintf(buf, bufsize, "unix:%s", sun->sun_path);
    } break;
    default:
        return -1;
    }
    if (n < 0 || (size_t)n >= bufsize)
        return -1;
    return n;
}

uint16_t gw_netaddr_port(const gw_netaddr_t *a)
{
    switch (a->ss.ss_family) {
    case AF_INET:
        return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
    case AF_INET6:
        return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
    default:
        return 0;
    }
}

/* Parses a prefix length 0..max: digits only, no leading zero except "0". */
static int parse_prefix(const char *s, unsigned max, unsigned *out)
{
    size_t len = strlen(s), i;
    unsigned v = 0;

    if (len == 0 || len > 3 || (len > 1 && s[0] == '0'))
        return -1;
    for (i = 0; i != len; ++i) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

int gw_cidr_parse(const char *s, gw_cidr_t *out, const char **err)
{
    char buf[IP_LITERAL_MAX];
    const char *slash = strchr(s, '/');
    size_t addr_len = slash != NULL ? (size_t)(slash - s) : strlen(s);
    unsigned max, bits, i;

    memset(out, 0, sizeof(*out));
    if (copy_literal(s, addr_len, buf, sizeof(buf)) != 0)
        goto BadAddress;
    if (inet_pton(AF_INET, buf, out->addr) == 1) {
        out->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        out->family = AF_INET6;
        max = 128;
    } else {
        goto BadAddress;
    }

    if (slash == NULL) {
        out->prefix = max;
    } else if (parse_prefix(slash + 1, max, &out->prefix) != 0) {
        *err = out->family == AF_INET ? "expected a prefix length from 0 to 32 after '/'"
                                      : "expected a prefix length from 0 to 128 after '/'";
        return -1;
    }

    /* bits beyond the prefix must be zero: "10.1.0.0/8" is most likely a typo */
    for (i = 0, bits = out->prefix; i != max / 8; ++i) {
        uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
        if ((out->addr[i] & (uint8_t)~mask) != 0) {
            *err = "address has bits set beyond the prefix length";
            return -1;
        }
        bits = bits >= 8 ? bits - 8 : 0;
    }
    return 0;

BadAddress:
    *err = "expected an IP network such as \"10.0.0.0/8\" or \"fd00::/8\"";
    return -1;
}

static int prefix_matches(const uint8_t *net, const uint8_t *addr, unsigned prefix)
{
    unsigned full = prefix / 8, rest = prefix % 8;

    if (memcmp(net, addr, full) != 0)
        return 0;
    if (rest != 0) {
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        if ((net[full] & mask) != (addr[full] & mask))
            return 0;
    }
    return 1;
}

int gw_cidr_contains(const gw_cidr_t *c, const struct sockaddr *sa)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    uint8_t addr[16];
    int family;

    if (sa->sa_family == AF_INET) {
        memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        family = AF_INET;
    } else if (sa->sa_family == AF_INET6) {
        memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        family = AF_INET6;
        if (c->family == AF_INET && memcmp(addr, v4mapped, sizeof(v4mapped)) == 0) {
            /* ::ffff:a.b.c.d is the IPv4 host a.b.c.d */
            memmove(addr, addr + 12, 4);
            family = AF_INET;
        }
    } else {
        return 0;
    }

    if (family == AF_INET && c->family == AF_INET6) {
        /* an IPv4 peer against a network written in its mapped form */
        memmove(addr + 12, addr, 4);
        memcpy(addr, v4mapped, sizeof(v4mapped));
        family = AF_INET6;
    }
    if (family != c->family)
        return 0;
    return prefix_matches(c->addr, addr, c->prefix);
}

int gw_cidr_list_contains(const gw_cidr_t *list, size_t n, const struct sockaddr *sa)
{
    size_t i;

    for (i = 0; i != n; ++i)
        if (gw_cidr_contains(list + i, sa))
            return 1;
    return 0;
}

int gw_netaddr_is_loopback(const struct sockaddr *sa)
{
    gw_cidr_t nets[2];
    const char *err;

    /* parsed on each call (only error paths ask): no shared state between workers */
    if (gw_cidr_parse("127.0.0.0/8", &nets[0], &err) != 0 || gw_cidr_parse("::1/128", &nets[1], &err) != 0)
        return 0;
    return gw_cidr_list_contains(nets, 2, sa);
}
