/*
 * The gateway's access cookie. Its value is "v1.<sandbox>.<port>.<expires>.<sig>"
 * where sig is base64url (unpadded) HMAC-SHA256, under a configured secret,
 * of "v1.<sandbox>.<port>.<expires>\n<token_sha256>". The token hash is signed
 * but not carried: rotating the sandbox's token makes every cookie fail.
 * The cookie a share link becomes is the same with "l1" and the link's
 * epoch ("l1.<sandbox>.<port>.<expires>\nlink_epoch=<n>"): a new link_epoch
 * makes it fail, and the two kinds can never verify as each other. A
 * view-only link (CONTRACT.md, Desktops) becomes a "w1" cookie, the same
 * again: it never verifies as a full link's, so it stays view-only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <h2o/string_.h>
#include "auth/cookie.h"
#include "common/engine.h"
#include "common/sandbox_id.h"

#define COOKIE_VERSION "v1"
#define LINK_COOKIE_VERSION "l1" /* same length as COOKIE_VERSION */
#define VIEW_COOKIE_VERSION "w1" /* a view-only link's; same length */
#define MAX_PORT_DIGITS 5
#define MAX_EXPIRES_DIGITS 20
/* base64url of 32 bytes without padding */
#define SIG_LEN 43
/* the longest well-formed value: "v1." sandbox "." port "." expires "." sig */
#define MAX_VALUE_LEN (sizeof(COOKIE_VERSION) + GW_SANDBOX_ID_MAX + 1 + MAX_PORT_DIGITS + 1 + MAX_EXPIRES_DIGITS + 1 + SIG_LEN)
/* token_sha256 is 64 hex digits by contract; anything longer is not signed */
#define MAX_TOKEN_HASH_LEN 128

static int is_base64url(int c)
{
    return ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-' || c == '_';
}

/* Computes the signature (SIG_LEN base64url characters + NUL) of `payload`
 * bound to the token hash. Returns -1 when the hash is too long or the
 * secret unusable. */
static int compute_sig(const gw_cookie_secret_t *secret, const char *payload, size_t payload_len, const char *token_sha256_hex,
                       char sig[SIG_LEN + 1])
{
    char input[MAX_VALUE_LEN + 1 + MAX_TOKEN_HASH_LEN];
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    size_t hash_len = token_sha256_hex != NULL ? strlen(token_sha256_hex) : 0;

    /* an empty key would make every cookie forgeable */
    if (secret == NULL || secret->bytes == NULL || secret->len == 0 || secret->len > INT32_MAX)
        return -1;
    if (payload_len > MAX_VALUE_LEN || hash_len > MAX_TOKEN_HASH_LEN)
        return -1;

    memcpy(input, payload, payload_len);
    input[payload_len] = '\n';
    /* the contract stores lowercase hex; accept either case the same way */
    h2o_memcpy(input + payload_len + 1, token_sha256_hex, hash_len); /* NULL when hash_len is 0 */
    h2o_strtolower(input + payload_len + 1, hash_len);

    if (HMAC(EVP_sha256(), secret->bytes, (int)secret->len, (const unsigned char *)input, payload_len + 1 + hash_len, mac,
             &mac_len) == NULL ||
        mac_len != 32)
        return -1;
    h2o_base64_encode(sig, mac, mac_len, 1);
    OPENSSL_cleanse(mac, sizeof(mac));
    return 0;
}

/* "link_epoch=<n>": what a link cookie binds in place of the token hash */
#define LINK_BINDING_MAX (sizeof("link_epoch=") + 20)
static const char *link_binding(char buf[LINK_BINDING_MAX], uint64_t epoch)
{
    snprintf(buf, LINK_BINDING_MAX, "link_epoch=%" PRIu64, epoch);
    return buf;
}

static h2o_iovec_t sign_as(h2o_mem_pool_t *pool, const char *version, const gw_cookie_secret_t *secret, const char *sandbox_id,
                           uint16_t port, uint64_t expires_at, const char *binding)
{
    char payload[MAX_VALUE_LEN + 1], sig[SIG_LEN + 1];
    int payload_len;
    char *out;

    if (sandbox_id == NULL || !gw_sandbox_id_valid(sandbox_id, strlen(sandbox_id)))
        return h2o_iovec_init(NULL, 0);
    payload_len = snprintf(payload, sizeof(payload), "%s.%s.%u.%" PRIu64, version, sandbox_id, (unsigned)port, expires_at);
    if (payload_len < 0 || (size_t)payload_len >= sizeof(payload))
        return h2o_iovec_init(NULL, 0);
    if (compute_sig(secret, payload, payload_len, binding, sig) != 0)
        return h2o_iovec_init(NULL, 0);

    out = gw_pool_alloc(pool, payload_len + 1 + SIG_LEN + 1);
    memcpy(out, payload, payload_len);
    out[payload_len] = '.';
    memcpy(out + payload_len + 1, sig, SIG_LEN + 1);
    return h2o_iovec_init(out, payload_len + 1 + SIG_LEN);
}

h2o_iovec_t gw_cookie_sign(h2o_mem_pool_t *pool, const gw_cookie_secret_t *secret, const char *sandbox_id, uint16_t port,
                           uint64_t expires_at, const char *token_sha256_hex)
{
    return sign_as(pool, COOKIE_VERSION, secret, sandbox_id, port, expires_at, token_sha256_hex);
}

h2o_iovec_t gw_cookie_sign_link(h2o_mem_pool_t *pool, const gw_cookie_secret_t *secret, const char *sandbox_id, uint16_t port,
                                uint64_t expires_at, uint64_t link_epoch)
{
    char binding[LINK_BINDING_MAX];
    return sign_as(pool, LINK_COOKIE_VERSION, secret, sandbox_id, port, expires_at, link_binding(binding, link_epoch));
}

h2o_iovec_t gw_cookie_sign_view_link(h2o_mem_pool_t *pool, const gw_cookie_secret_t *secret, const char *sandbox_id, uint16_t port,
                                     uint64_t expires_at, uint64_t link_epoch)
{
    char binding[LINK_BINDING_MAX];
    return sign_as(pool, VIEW_COOKIE_VERSION, secret, sandbox_id, port, expires_at, link_binding(binding, link_epoch));
}

int gw_cookie_is_view_link(h2o_iovec_t value)
{
    return value.len > sizeof(VIEW_COOKIE_VERSION) && memcmp(value.base, VIEW_COOKIE_VERSION ".", sizeof(VIEW_COOKIE_VERSION)) == 0;
}

int gw_cookie_is_link(h2o_iovec_t value)
{
    return (value.len > sizeof(LINK_COOKIE_VERSION) &&
            memcmp(value.base, LINK_COOKIE_VERSION ".", sizeof(LINK_COOKIE_VERSION)) == 0) ||
           gw_cookie_is_view_link(value);
}

/* Parses a decimal of at most max_digits, no sign, no leading zero (except
 * "0" itself), into *out without overflow. */
static int parse_decimal(const char *s, size_t len, size_t max_digits, uint64_t max_value, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;

    if (len == 0 || len > max_digits || (len > 1 && s[0] == '0'))
        return -1;
    for (i = 0; i != len; ++i) {
        unsigned d;
        if (s[i] < '0' || s[i] > '9')
            return -1;
        d = (unsigned)(s[i] - '0');
        if (v > (max_value - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Splits a value into its five fields and parses them; -1 when it is not
 * well-formed. */
static int parse_value(h2o_iovec_t value, const char *fields[5], size_t lens[5], uint64_t *cookie_port, uint64_t *cookie_expires)
{
    const char *end = value.base + value.len, *p;
    size_t n = 0, i;

    if (value.base == NULL || value.len == 0 || value.len > MAX_VALUE_LEN)
        return -1;

    /* exactly five '.'-separated fields */
    for (p = value.base; n != 5; ++n) {
        const char *dot = memchr(p, '.', end - p);
        if (dot == NULL)
            dot = end;
        fields[n] = p;
        lens[n] = dot - p;
        if (dot == end) {
            ++n;
            break;
        }
        p = dot + 1;
    }
    if (n != 5 || fields[4] + lens[4] != end)
        return -1;
    if (!(lens[0] == sizeof(COOKIE_VERSION) - 1 &&
          (memcmp(fields[0], COOKIE_VERSION, lens[0]) == 0 || memcmp(fields[0], LINK_COOKIE_VERSION, lens[0]) == 0 ||
           memcmp(fields[0], VIEW_COOKIE_VERSION, lens[0]) == 0)))
        return -1;
    if (!gw_sandbox_id_valid(fields[1], lens[1]))
        return -1;
    if (parse_decimal(fields[2], lens[2], MAX_PORT_DIGITS, UINT16_MAX, cookie_port) != 0 ||
        parse_decimal(fields[3], lens[3], MAX_EXPIRES_DIGITS, UINT64_MAX, cookie_expires) != 0)
        return -1;
    if (lens[4] != SIG_LEN)
        return -1;
    for (i = 0; i != SIG_LEN; ++i)
        if (!is_base64url((unsigned char)fields[4][i]))
            return -1;
    return 0;
}

int gw_cookie_read_fields(h2o_iovec_t value, h2o_iovec_t *sandbox_id, uint16_t *port, uint64_t *expires_at)
{
    const char *fields[5];
    size_t lens[5];
    uint64_t cookie_port, cookie_expires;

    if (parse_value(value, fields, lens, &cookie_port, &cookie_expires) != 0)
        return -1;
    *sandbox_id = h2o_iovec_init(fields[1], lens[1]);
    *port = (uint16_t)cookie_port;
    *expires_at = cookie_expires;
    return 0;
}

static gw_cookie_result_t verify_as(h2o_iovec_t value, const char *version, const gw_cookie_secret_t *secrets, size_t num_secrets,
                                    const char *sandbox_id, uint16_t port, uint64_t now, const char *binding)
{
    const char *fields[5];
    size_t lens[5], i;
    uint64_t cookie_port, cookie_expires;
    char sig[SIG_LEN + 1];
    int verified = 0;

    if (parse_value(value, fields, lens, &cookie_port, &cookie_expires) != 0)
        return GW_COOKIE_MALFORMED;
    if (memcmp(fields[0], version, lens[0]) != 0)
        return GW_COOKIE_MALFORMED; /* the other kind of cookie */

    /* the payload is the value up to the dot before the signature; strict
     * parsing above makes it canonical, so it can be MACed as received */
    for (i = 0; i != num_secrets && !verified; ++i) {
        if (compute_sig(&secrets[i], value.base, fields[4] - 1 - value.base, binding, sig) != 0)
            continue;
        verified = CRYPTO_memcmp(sig, fields[4], SIG_LEN) == 0;
    }
    if (!verified)
        return GW_COOKIE_BAD_SIGNATURE;

    /* the signature holds: the fields are the gateway's own */
    if (now >= cookie_expires)
        return GW_COOKIE_EXPIRED;
    if (sandbox_id == NULL || strlen(sandbox_id) != lens[1] || memcmp(sandbox_id, fields[1], lens[1]) != 0)
        return GW_COOKIE_WRONG_SANDBOX;
    if (cookie_port != port)
        return GW_COOKIE_WRONG_PORT;
    return GW_COOKIE_OK;
}

gw_cookie_result_t gw_cookie_verify(h2o_iovec_t value, const gw_cookie_secret_t *secrets, size_t num_secrets,
                                    const char *sandbox_id, uint16_t port, uint64_t now, const char *token_sha256_hex)
{
    return verify_as(value, COOKIE_VERSION, secrets, num_secrets, sandbox_id, port, now, token_sha256_hex);
}

gw_cookie_result_t gw_cookie_verify_link(h2o_iovec_t value, const gw_cookie_secret_t *secrets, size_t num_secrets,
                                         const char *sandbox_id, uint16_t port, uint64_t now, uint64_t link_epoch)
{
    char binding[LINK_BINDING_MAX];
    return verify_as(value, LINK_COOKIE_VERSION, secrets, num_secrets, sandbox_id, port, now, link_binding(binding, link_epoch));
}

gw_cookie_result_t gw_cookie_verify_view_link(h2o_iovec_t value, const gw_cookie_secret_t *secrets, size_t num_secrets,
                                              const char *sandbox_id, uint16_t port, uint64_t now, uint64_t link_epoch)
{
    char binding[LINK_BINDING_MAX];
    return verify_as(value, VIEW_COOKIE_VERSION, secrets, num_secrets, sandbox_id, port, now, link_binding(binding, link_epoch));
}

static const char *same_site_attr(gw_cookie_same_site_t same_site)
{
    switch (same_site) {
    case GW_COOKIE_SAME_SITE_STRICT:
        return "Strict";
    case GW_COOKIE_SAME_SITE_NONE:
        /* third-party (iframe) previews need a partitioned (CHIPS) cookie */
        return "None; Partitioned";
    default:
        return "Lax";
    }
}

h2o_iovec_t gw_cookie_set_header(h2o_mem_pool_t *pool, h2o_iovec_t name, h2o_iovec_t value, uint64_t max_age,
                                 gw_cookie_same_site_t same_site)
{
    static const char fmt[] = "%.*s=%.*s; Path=/; Secure; HttpOnly; SameSite=%s; Max-Age=%" PRIu64;
    const char *ss = same_site_attr(same_site);
    size_t cap = name.len + value.len + sizeof(fmt) + strlen(ss) + MAX_EXPIRES_DIGITS;
    char *out = gw_pool_alloc(pool, cap);
    int len;

    /* host-only on purpose (no Domain=): a __Host- cookie must not have one,
     * and a cookie for one preview must not reach another sandbox's host */
    len = snprintf(out, cap, fmt, (int)name.len, name.base != NULL ? name.base : "", (int)value.len,
                   value.base != NULL ? value.base : "", ss, max_age);
    if (len < 0 || (size_t)len >= cap)
        return h2o_iovec_init(NULL, 0);
    return h2o_iovec_init(out, len);
}

h2o_iovec_t gw_cookie_clear_header(h2o_mem_pool_t *pool, h2o_iovec_t name, gw_cookie_same_site_t same_site)
{
    return gw_cookie_set_header(pool, name, h2o_iovec_init("", 0), 0, same_site);
}

static int is_ows(int c)
{
    return c == ' ' || c == '\t';
}

/* Iterates over the ';'-separated cookie pairs of one Cookie field, with the
 * whitespace around each pair removed and empty pairs skipped. *cursor starts
 * at field.base; returns 0 after the last pair. */
static int next_pair(const char **cursor, const char *field_end, h2o_iovec_t *pair)
{
    const char *p = *cursor;

    while (p != NULL && p < field_end) {
        const char *semi = memchr(p, ';', field_end - p), *pair_end = semi != NULL ? semi : field_end;
        *cursor = semi != NULL ? semi + 1 : NULL;
        while (p < pair_end && is_ows((unsigned char)*p))
            ++p;
        while (pair_end > p && is_ows((unsigned char)pair_end[-1]))
            --pair_end;
        if (p != pair_end) {
            *pair = h2o_iovec_init(p, pair_end - p);
            return 1;
        }
        p = *cursor;
    }
    *cursor = NULL;
    return 0;
}

/* 1 when the pair's name (before '=', whitespace trimmed) is `name`; then
 * *value is the rest after '=' with leading whitespace removed. */
static int pair_is(h2o_iovec_t pair, h2o_iovec_t name, h2o_iovec_t *value)
{
    const char *eq = memchr(pair.base, '=', pair.len), *name_end;

    if (eq == NULL)
        return 0;
    for (name_end = eq; name_end > pair.base && is_ows((unsigned char)name_end[-1]); --name_end)
        ;
    if ((size_t)(name_end - pair.base) != name.len || memcmp(pair.base, name.base, name.len) != 0)
        return 0;
    for (++eq; eq < pair.base + pair.len && is_ows((unsigned char)*eq); ++eq)
        ;
    *value = h2o_iovec_init(eq, pair.base + pair.len - eq);
    return 1;
}

size_t gw_cookie_extract(h2o_mem_pool_t *pool, const h2o_iovec_t *fields, size_t num_fields, h2o_iovec_t name, h2o_iovec_t *found,
                         h2o_iovec_t *rest)
{
    size_t i, removed = 0, rest_cap = 0, rest_len = 0;
    const char *cursor;
    h2o_iovec_t pair, value;
    char *out;

    *found = h2o_iovec_init(NULL, 0);
    *rest = h2o_iovec_init(NULL, 0);

    /* first pass: find the gateway's cookie and size what remains */
    for (i = 0; i != num_fields; ++i) {
        if (fields[i].base == NULL)
            continue;
        for (cursor = fields[i].base; next_pair(&cursor, fields[i].base + fields[i].len, &pair);) {
            if (pair_is(pair, name, &value)) {
                if (removed++ == 0)
                    *found = value;
            } else {
                rest_cap += pair.len + 2;
            }
        }
    }
    if (rest_cap == 0)
        return removed;

    /* second pass: join the others with "; " in their original order */
    out = gw_pool_alloc(pool, rest_cap + 1);
    for (i = 0; i != num_fields; ++i) {
        if (fields[i].base == NULL)
            continue;
        for (cursor = fields[i].base; next_pair(&cursor, fields[i].base + fields[i].len, &pair);) {
            if (pair_is(pair, name, &value))
                continue;
            if (rest_len != 0) {
                out[rest_len++] = ';';
                out[rest_len++] = ' ';
            }
            memcpy(out + rest_len, pair.base, pair.len);
            rest_len += pair.len;
        }
    }
    out[rest_len] = '\0';
    *rest = h2o_iovec_init(out, rest_len);
    return removed;
}
