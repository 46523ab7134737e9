/*
 * cors_origins:<n> (see cors_origins.h): each entry checked against the
 * serialization of an origin (RFC 6454 section 6.1), normalized as browsers
 * send it, so that a request's Origin is matched with one memcmp per entry.
 */
#include <string.h>
#include "routing/cors_origins.h"

#define MAX_HOST_LEN 253

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static int is_alpha(char c)
{
    c = lower(c);
    return c >= 'a' && c <= 'z';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ); returns its length, 0 if none */
static size_t scheme_len(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || !is_alpha(s[0]))
        return 0;
    for (i = 1; i != len && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.'); ++i)
        ;
    return i;
}

/* host: a DNS name of letters, digits, '-', '.' and '_', or a bracketed IPv6 literal; returns its length, 0 if none */
static size_t host_len(const char *s, size_t len)
{
    size_t i = 0;

    if (len != 0 && s[0] == '[') {
        for (i = 1; i != len && (is_digit(s[i]) || (lower(s[i]) >= 'a' && lower(s[i]) <= 'f') || s[i] == ':' || s[i] == '.'); ++i)
            ;
        return i > 2 && i != len && s[i] == ']' ? i + 1 : 0;
    }
    for (; i != len && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '-' || s[i] == '.' || s[i] == '_'); ++i)
        ;
    return i <= MAX_HOST_LEN && (i == 0 || s[0] != '.') ? i : 0;
}

/* ":" port, 1-65535, no leading zero; returns the port, 0 if not one */
static unsigned port_of(const char *s, size_t len)
{
    unsigned port = 0;
    size_t i;

    if (len < 2 || len > 6 || s[0] != ':' || s[1] == '0')
        return 0;
    for (i = 1; i != len; ++i) {
        if (!is_digit(s[i]))
            return 0;
        port = port * 10 + (unsigned)(s[i] - '0');
    }
    return port <= 65535 ? port : 0;
}

/* One entry (blanks trimmed): its normalized form into out; returns its length, 0 when it is not an origin. */
static size_t normalize(const char *s, size_t len, char *out)
{
    size_t sl = scheme_len(s, len), hl, i, n = 0;
    unsigned port = 0;

    if (sl == 0 || len < sl + 3 || memcmp(s + sl, "://", 3) != 0)
        return 0;
    if ((hl = host_len(s + sl + 3, len - sl - 3)) == 0)
        return 0;
    if (sl + 3 + hl != len && (port = port_of(s + sl + 3 + hl, len - sl - 3 - hl)) == 0)
        return 0; /* anything after the host but a port: a path, a '/', userinfo, a query */
    for (i = 0; i != sl + 3 + hl; ++i)
        out[n++] = lower(s[i]);
    if (port != 0 && !(port == 80 && sl == 4 && memcmp(out, "http", 4) == 0) &&
        !(port == 443 && sl == 5 && memcmp(out, "https", 5) == 0)) {
        memcpy(out + n, s + sl + 3 + hl, len - sl - 3 - hl);
        n += len - sl - 3 - hl;
    }
    return n;
}

size_t gw_cors_origins_parse(const char *s, size_t len, char *out, int *any, h2o_iovec_t *first_bad)
{
    size_t pos = 0, written = 0;

    *any = 0;
    *first_bad = h2o_iovec_init(NULL, 0);
    while (pos <= len) {
        const char *comma = memchr(s + pos, ',', len - pos);
        size_t end = comma != NULL ? (size_t)(comma - s) : len, b = pos, e = end, n;
        while (b != e && is_blank(s[b]))
            ++b;
        while (e != b && is_blank(s[e - 1]))
            --e;
        if (e - b == 1 && s[b] == '*') {
            *any = 1;
        } else if (e != b) {
            if ((n = normalize(s + b, e - b, out + written)) != 0) {
                out[written + n] = ',';
                written += n + 1;
            } else if (first_bad->base == NULL) {
                *first_bad = h2o_iovec_init(s + b, e - b);
            }
        }
        pos = end + 1;
    }
    return written;
}

int gw_cors_origins_contain(h2o_iovec_t list, h2o_iovec_t origin)
{
    const char *p, *end;

    if (origin.len == 0 || list.len == 0)
        return 0;
    p = list.base;
    end = list.base + list.len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t n = (size_t)(comma - p); /* every entry ends in ',' */
        if (n == origin.len && memcmp(p, origin.base, n) == 0)
            return 1;
        p = comma + 1;
    }
    return 0;
}
