/*
 * Share links: token = "lzs1." P "." S with
 *   P = base64url_nopad("<sandboxId>|<port>|<exp>|<epoch>|<kid>")
 *   S = base64url_nopad(HMAC-SHA256(secret[kid], "lzs1." P))
 * and view-only links, "lzv1." P "." S with S over "lzv1." P.
 * The MAC covers P as sent, so the payload is decoded only to find the kid,
 * and its fields are trusted only once the signature holds. Both parts are
 * strict base64url: no padding, no other alphabet, and only the canonical
 * spelling of their bytes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <h2o/string_.h>
#include "auth/share_link.h"
#include "common/engine.h"
#include "common/errfmt.h"
#include "common/sandbox_id.h"
#include "common/secret_file.h"

#define PREFIX_LEN (sizeof(GW_SHARE_LINK_PREFIX) - 1)
/* base64url of 32 bytes without padding */
#define SIG_LEN 43
/* "<sandbox 56>|<port 5>|<exp 20>|<epoch 20>|<kid 64>" */
#define PAYLOAD_MAX (GW_SANDBOX_ID_MAX + 1 + 5 + 1 + 20 + 1 + 20 + 1 + GW_LINK_KID_MAX)
#define ENCODED_PAYLOAD_MAX ((PAYLOAD_MAX * 4 + 2) / 3)
#define TOKEN_MAX (PREFIX_LEN + ENCODED_PAYLOAD_MAX + 1 + SIG_LEN)

static int is_base64url(int c)
{
    return ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-' || c == '_';
}

static int is_kid_char(int c)
{
    return is_base64url(c) || c == '.';
}

_Static_assert(sizeof(GW_VIEW_LINK_PREFIX) == sizeof(GW_SHARE_LINK_PREFIX), "both prefixes have one length");

static int is_view_link(h2o_iovec_t token)
{
    return token.len >= PREFIX_LEN && memcmp(token.base, GW_VIEW_LINK_PREFIX, PREFIX_LEN) == 0;
}

int gw_share_link_is(h2o_iovec_t token)
{
    return token.len >= PREFIX_LEN && (memcmp(token.base, GW_SHARE_LINK_PREFIX, PREFIX_LEN) == 0 || is_view_link(token));
}

void gw_share_link_keys_free(gw_link_key_t *keys, size_t num_keys)
{
    size_t i;

    if (keys == NULL)
        return;
    for (i = 0; i != num_keys; ++i) {
        if (keys[i].secret != NULL) {
            OPENSSL_cleanse(keys[i].secret, keys[i].secret_len);
            free(keys[i].secret);
        }
    }
    free(keys);
}

const gw_link_key_t *gw_share_link_keys_find(const gw_link_key_t *keys, size_t num_keys, const char *kid, size_t kid_len)
{
    size_t i;

    /* kids are not secret: a plain comparison */
    for (i = 0; i != num_keys; ++i)
        if (strlen(keys[i].kid) == kid_len && memcmp(keys[i].kid, kid, kid_len) == 0)
            return &keys[i];
    return NULL;
}

int gw_share_link_keys_parse(const char *text, size_t len, const char *origin, gw_link_key_t **keys, size_t *num_keys, char **err)
{
    gw_link_key_t *list;
    const char *s, *colon;
    size_t count = 0, line = 0, pos = 0, line_len, kid_len, i;

    *keys = NULL;
    *num_keys = 0;
    *err = NULL;
    if (memchr(text, '\0', len) != NULL)
        return gw_errorf(err, "%s: contains a NUL byte; expected lines <kid>:<secret>", origin);
    list = h2o_mem_alloc(GW_LINK_MAX_KEYS * sizeof(*list));
    memset(list, 0, GW_LINK_MAX_KEYS * sizeof(*list));

    /* the same lines as every secret file: blanks, comments and CR are layout */
    while (gw_secret_file_next_line(text, len, &pos, &line, &s, &line_len)) {
        /* messages name the line and the kid (not secret), never a secret's byte */
        if ((colon = memchr(s, ':', line_len)) == NULL) {
            gw_errorf(err, "%s: line %zu: expected <kid>:<secret>", origin, line);
            goto Error;
        }
        kid_len = colon - s;
        if (kid_len == 0 || kid_len > GW_LINK_KID_MAX) {
            gw_errorf(err, "%s: line %zu: the key id must be 1 to %d characters", origin, line, GW_LINK_KID_MAX);
            goto Error;
        }
        for (i = 0; i != kid_len; ++i) {
            if (!is_kid_char((unsigned char)s[i])) {
                gw_errorf(err, "%s: line %zu: the key id may hold only letters, digits and . _ -", origin, line);
                goto Error;
            }
        }
        if (gw_share_link_keys_find(list, count, s, kid_len) != NULL) {
            gw_errorf(err, "%s: line %zu: the key id %.*s appears twice", origin, line, (int)kid_len, s);
            goto Error;
        }
        if (line_len - kid_len - 1 < GW_LINK_SECRET_MIN) {
            gw_errorf(err, "%s: line %zu: the secret of key %.*s is shorter than %d bytes", origin, line, (int)kid_len, s,
                      GW_LINK_SECRET_MIN);
            goto Error;
        }
        if (count == GW_LINK_MAX_KEYS) {
            gw_errorf(err, "%s: line %zu: more than %d keys", origin, line, GW_LINK_MAX_KEYS);
            goto Error;
        }
        memcpy(list[count].kid, s, kid_len);
        list[count].kid[kid_len] = '\0';
        list[count].secret_len = line_len - kid_len - 1;
        list[count].secret = h2o_mem_alloc(list[count].secret_len);
        memcpy(list[count].secret, colon + 1, list[count].secret_len);
        ++count;
    }
    if (count == 0) {
        gw_errorf(err, "%s: holds no key (only blank lines and comments)", origin);
        goto Error;
    }
    *keys = list;
    *num_keys = count;
    return 0;

Error:
    gw_share_link_keys_free(list, count);
    return -1;
}

int gw_share_link_keys_load(const char *env_name, const char *path, gw_link_key_t **keys, size_t *num_keys, char **err)
{
    char origin[300], *buf;
    size_t len;
    int ret;

    *keys = NULL;
    *num_keys = 0;
    if (env_name != NULL) {
        const char *v = getenv(env_name);
        snprintf(origin, sizeof(origin), "environment variable %s", env_name);
        if (v == NULL || v[0] == '\0')
            return gw_errorf(err, "%s is not set or is empty", origin);
        if (strlen(v) > GW_LINK_KEYS_MAX_SIZE)
            return gw_errorf(err, "%s: larger than %d bytes", origin, GW_LINK_KEYS_MAX_SIZE);
        return gw_share_link_keys_parse(v, strlen(v), origin, keys, num_keys, err);
    }
    if (path == NULL)
        return gw_errorf(err, "no share link keys configured");
    if (gw_secret_file_read(path, GW_LINK_KEYS_MAX_SIZE, &buf, &len, err) != 0)
        return -1;
    ret = gw_share_link_keys_parse(buf, len, path, keys, num_keys, err);
    OPENSSL_cleanse(buf, len);
    free(buf);
    return ret;
}

/* S (SIG_LEN characters + NUL) of the signed input "lzs1." P. */
static int compute_sig(const gw_link_key_t *key, const char *signed_input, size_t len, char sig[SIG_LEN + 1])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;

    if (key->secret_len == 0 || key->secret_len > INT32_MAX)
        return -1;
    if (HMAC(EVP_sha256(), key->secret, (int)key->secret_len, (const unsigned char *)signed_input, len, mac, &mac_len) == NULL ||
        mac_len != 32)
        return -1;
    h2o_base64_encode(sig, mac, mac_len, 1);
    OPENSSL_cleanse(mac, sizeof(mac));
    return 0;
}

static h2o_iovec_t sign_as(const char *prefix, h2o_mem_pool_t *pool, const gw_link_key_t *key, const char *sandbox_id,
                           uint16_t port, uint64_t expires_at, uint64_t epoch)
{
    char payload[PAYLOAD_MAX + 1], sig[SIG_LEN + 1], *out;
    size_t encoded_len;
    int payload_len;

    if (sandbox_id == NULL || !gw_sandbox_id_valid(sandbox_id, strlen(sandbox_id)) || port == 0)
        return h2o_iovec_init(NULL, 0);
    payload_len = snprintf(payload, sizeof(payload), "%s|%u|%" PRIu64 "|%" PRIu64 "|%s", sandbox_id, (unsigned)port, expires_at,
                           epoch, key->kid);
    if (payload_len < 0 || (size_t)payload_len >= sizeof(payload))
        return h2o_iovec_init(NULL, 0);

    out = gw_pool_alloc(pool, TOKEN_MAX + 1);
    memcpy(out, prefix, PREFIX_LEN);
    encoded_len = h2o_base64_encode(out + PREFIX_LEN, payload, payload_len, 1);
    if (compute_sig(key, out, PREFIX_LEN + encoded_len, sig) != 0)
        return h2o_iovec_init(NULL, 0);
    out[PREFIX_LEN + encoded_len] = '.';
    memcpy(out + PREFIX_LEN + encoded_len + 1, sig, SIG_LEN + 1);
    return h2o_iovec_init(out, PREFIX_LEN + encoded_len + 1 + SIG_LEN);
}

h2o_iovec_t gw_share_link_sign(h2o_mem_pool_t *pool, const gw_link_key_t *key, const char *sandbox_id, uint16_t port,
                               uint64_t expires_at, uint64_t epoch)
{
    return sign_as(GW_SHARE_LINK_PREFIX, pool, key, sandbox_id, port, expires_at, epoch);
}

h2o_iovec_t gw_share_link_sign_view(h2o_mem_pool_t *pool, const gw_link_key_t *key, const char *sandbox_id, uint16_t port,
                                    uint64_t expires_at, uint64_t epoch)
{
    return sign_as(GW_VIEW_LINK_PREFIX, pool, key, sandbox_id, port, expires_at, epoch);
}

/* A decimal with no sign and no leading zero ("0" itself allowed), at most
 * max_value (and at most 19 digits: h2o_strtosize's bound), into *out. */
static int parse_uint(const char *s, size_t len, uint64_t max_value, uint64_t *out)
{
    size_t v = h2o_strtosize(s, len);

    if (v == SIZE_MAX || (len > 1 && s[0] == '0') || v > max_value)
        return -1;
    *out = v;
    return 0;
}

/* Splits the decoded payload into its five '|'-separated fields. */
static int split_payload(const char *payload, size_t len, h2o_iovec_t fields[5])
{
    const char *p = payload, *end = payload + len;
    size_t n;

    for (n = 0; n != 5; ++n) {
        const char *bar = memchr(p, '|', end - p);
        if (bar == NULL)
            bar = end;
        fields[n] = h2o_iovec_init(p, bar - p);
        if (bar == end)
            return n == 4 ? 0 : -1;
        p = bar + 1;
    }
    return -1; /* a sixth field */
}

/* The fields of a payload whose signature holds; -1 when outside the format. */
static int read_fields(const h2o_iovec_t fields[5], gw_share_link_t *link)
{
    uint64_t port;
    size_t i;

    if (!gw_sandbox_id_valid(fields[0].base, fields[0].len))
        return -1;
    if (parse_uint(fields[1].base, fields[1].len, UINT16_MAX, &port) != 0 || port == 0)
        return -1;
    if (parse_uint(fields[2].base, fields[2].len, UINT64_MAX, &link->expires_at) != 0 ||
        parse_uint(fields[3].base, fields[3].len, UINT64_MAX, &link->epoch) != 0)
        return -1;
    if (fields[4].len == 0 || fields[4].len > GW_LINK_KID_MAX)
        return -1;
    for (i = 0; i != fields[4].len; ++i)
        if (!is_kid_char((unsigned char)fields[4].base[i]))
            return -1;
    memcpy(link->sandbox_id, fields[0].base, fields[0].len);
    link->sandbox_id[fields[0].len] = '\0';
    link->port = (uint16_t)port;
    memcpy(link->kid, fields[4].base, fields[4].len);
    link->kid[fields[4].len] = '\0';
    return 0;
}

gw_link_result_t gw_share_link_verify(h2o_iovec_t token, const gw_link_key_t *keys, size_t num_keys, const char *sandbox_id,
                                      uint16_t port, const uint64_t *current_epoch, uint64_t now, uint64_t max_ttl_s,
                                      gw_share_link_t *out)
{
    char decoded[PAYLOAD_MAX + 3], canonical[(PAYLOAD_MAX + 2) / 3 * 4 + 1], sig[SIG_LEN + 1];
    const char *payload, *dot;
    size_t payload_len, i;
    h2o_iovec_t fields[5], raw;
    gw_share_link_t link;
    const gw_link_key_t *key;

    if (!gw_share_link_is(token) || token.len > TOKEN_MAX)
        return GW_LINK_MALFORMED;
    payload = token.base + PREFIX_LEN;
    if ((dot = memchr(payload, '.', token.base + token.len - payload)) == NULL || dot == payload ||
        (size_t)(token.base + token.len - (dot + 1)) != SIG_LEN)
        return GW_LINK_MALFORMED;
    payload_len = dot - payload;
    for (i = 0; i != payload_len; ++i)
        if (!is_base64url((unsigned char)payload[i]))
            return GW_LINK_MALFORMED;
    for (i = 0; i != SIG_LEN; ++i)
        if (!is_base64url((unsigned char)dot[1 + i]))
            return GW_LINK_MALFORMED;

    /* the payload only names the key here: nothing else of it is read before the signature holds */
    raw = h2o_decode_base64url(NULL, payload, payload_len);
    if (raw.base == NULL)
        return GW_LINK_MALFORMED;
    if (raw.len > PAYLOAD_MAX) {
        free(raw.base);
        return GW_LINK_MALFORMED;
    }
    memcpy(decoded, raw.base, raw.len);
    free(raw.base);
    /* strict base64url without padding: P must be the one spelling of its bytes. The decoder ignores the unused low
     * bits of a last character ("MR" reads as "MQ"), so several spellings would verify once signed */
    if (h2o_base64_encode(canonical, decoded, raw.len, 1) != payload_len || memcmp(canonical, payload, payload_len) != 0)
        return GW_LINK_MALFORMED;
    if (split_payload(decoded, raw.len, fields) != 0)
        return GW_LINK_MALFORMED;
    if ((key = gw_share_link_keys_find(keys, num_keys, fields[4].base, fields[4].len)) == NULL)
        return GW_LINK_UNKNOWN_KEY;
    if (compute_sig(key, token.base, dot - token.base, sig) != 0 || CRYPTO_memcmp(sig, dot + 1, SIG_LEN) != 0)
        return GW_LINK_BAD_SIGNATURE;

    /* the signature holds: the fields are the control plane's */
    if (read_fields(fields, &link) != 0)
        return GW_LINK_MALFORMED;
    link.view_only = is_view_link(token);
    if (out != NULL)
        *out = link;
    if (sandbox_id == NULL || strcmp(link.sandbox_id, sandbox_id) != 0)
        return GW_LINK_WRONG_SANDBOX;
    if (link.port != port)
        return GW_LINK_WRONG_PORT;
    if (now >= link.expires_at)
        return GW_LINK_EXPIRED;
    if (link.expires_at - now > max_ttl_s)
        return GW_LINK_TOO_LONG;
    if (current_epoch == NULL || link.epoch != *current_epoch)
        return GW_LINK_REVOKED;
    return GW_LINK_OK;
}

const char *gw_link_result_name(gw_link_result_t result)
{
    switch (result) {
    case GW_LINK_OK:
        return "ok";
    case GW_LINK_MALFORMED:
        return "malformed";
    case GW_LINK_UNKNOWN_KEY:
        return "unknown_key";
    case GW_LINK_BAD_SIGNATURE:
        return "signature";
    case GW_LINK_WRONG_SANDBOX:
        return "other_sandbox";
    case GW_LINK_WRONG_PORT:
        return "other_port";
    case GW_LINK_EXPIRED:
        return "expired";
    case GW_LINK_TOO_LONG:
        return "beyond_max_ttl";
    case GW_LINK_REVOKED:
        return "revoked";
    }
    return "unknown";
}
