/*
 * Preview hostnames "<port>-<sandboxId>.<domain>" (CONTRACT.md, Hostnames).
 * Decides between "not ours" (unknown_host), "ours but malformed" (bad_host)
 * and a route key. Pure: no allocation, no locale (ASCII case folding only).
 */
#include <string.h>
#include <h2o/string_.h>
#include "routing/host.h"
#include "common/netaddr.h"

#define HOST_MAX 253 /* longest DNS name in text form, without the trailing dot */

static int equals_lower(const char *s, const char *lc, size_t len)
{
    size_t i;

    for (i = 0; i != len; ++i)
        if (h2o_tolower(s[i]) != lc[i])
            return 0;
    return 1;
}

h2o_iovec_t gw_host_strip_port(h2o_iovec_t host)
{
    const char *p;

    if (host.len != 0 && host.base[0] == '[') {
        /* "[v6]" or "[v6]:port": keep the bracketed part */
        if ((p = memchr(host.base, ']', host.len)) != NULL)
            host.len = (size_t)(p - host.base) + 1;
        return host;
    }
    if ((p = memchr(host.base, ':', host.len)) != NULL) {
        /* several colons: an unbracketed IPv6 literal, which has no port to strip */
        if (memchr(p + 1, ':', host.len - (size_t)(p - host.base) - 1) != NULL)
            return host;
        host.len = (size_t)(p - host.base);
    }
    return host;
}

/* The part after the host name: nothing, or ':' and 1 to 5 digits. */
static int port_suffix_ok(const char *s, size_t len)
{
    size_t i;

    if (len == 0)
        return 1;
    if (s[0] != ':' || len < 2 || len > 6)
        return 0;
    for (i = 1; i != len; ++i)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

gw_host_result_t gw_host_parse(h2o_iovec_t host, char *const *domains, size_t num_domains, gw_host_t *out)
{
    size_t i, best = SIZE_MAX, best_len = 0, label_len, id_len;
    const char *label, *dash;
    gw_host_t parsed;

    h2o_iovec_t whole = host;
    int bad_suffix;

    host = gw_host_strip_port(host);
    /* whatever follows the name must be ":<digits>": apps build absolute URLs from Host, so
     * "x.lizard.app:@evil.example" must never reach them */
    bad_suffix = !port_suffix_ok(whole.base + host.len, whole.len - host.len);
    if (host.len != 0 && host.base[host.len - 1] == '.')
        --host.len;
    if (host.len == 0)
        return GW_HOST_UNKNOWN;

    /* the longest domain that is the host itself (the apex) or a suffix after a '.' */
    for (i = 0; i != num_domains; ++i) {
        size_t dlen = strlen(domains[i]);
        if (dlen == 0 || dlen > host.len || dlen <= best_len)
            continue;
        if (!equals_lower(host.base + host.len - dlen, domains[i], dlen))
            continue;
        if (dlen != host.len && host.base[host.len - dlen - 1] != '.')
            continue;
        best = i;
        best_len = dlen;
    }
    if (best == SIZE_MAX)
        return GW_HOST_UNKNOWN;

    /* under a preview domain from here on: anything wrong is bad_host */
    if (bad_suffix || host.len > HOST_MAX || best_len == host.len)
        return GW_HOST_BAD;
    label = host.base;
    label_len = host.len - best_len - 1;
    if (label_len == 0 || memchr(label, '.', label_len) != NULL)
        return GW_HOST_BAD;
    if ((dash = memchr(label, '-', label_len)) == NULL)
        return GW_HOST_BAD;
    if (gw_port_parse(label, (size_t)(dash - label), &parsed.port) != 0)
        return GW_HOST_BAD;
    id_len = label_len - (size_t)(dash - label) - 1;
    if (id_len > GW_SANDBOX_ID_MAX)
        return GW_HOST_BAD;
    for (i = 0; i != id_len; ++i)
        parsed.sandbox_id[i] = (char)h2o_tolower(dash[1 + i]);
    if (!gw_sandbox_id_valid(parsed.sandbox_id, id_len))
        return GW_HOST_BAD;
    parsed.sandbox_id[id_len] = '\0';
    parsed.domain_index = best;
    *out = parsed;
    return GW_HOST_OK;
}
