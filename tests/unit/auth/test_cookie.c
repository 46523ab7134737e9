/*
 * Unit tests for auth/cookie.c: signing and verifying the gateway's access
 * cookie, the Set-Cookie values, and removing the cookie from Cookie headers.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "common/engine.h"
#include "auth/cookie.h"
#include "common/sandbox_id.h"
#include "../bytes.h"

#define HASH_A "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
#define HASH_B "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define NOW 1700000000u
#define EXPIRES (NOW + 3600u)

static h2o_mem_pool_t pool;
static const gw_cookie_secret_t old_secret = {(const unsigned char *)"old-secret-0123456789", 21};
static const gw_cookie_secret_t new_secret = {(const unsigned char *)"new-secret-abcdefghij", 21};

static void setup(void)
{
    h2o_mem_init_pool(&pool);
}

static void teardown(void)
{
    h2o_mem_clear_pool(&pool);
}

/* A NUL-terminated copy of a signed value, for editing in tests. */
static char *sign_str(const gw_cookie_secret_t *secret, const char *sandbox, uint16_t port, uint64_t expires, const char *hash)
{
    h2o_iovec_t v = gw_cookie_sign(&pool, secret, sandbox, port, expires, hash);
    char *s;

    ck_assert_ptr_nonnull(v.base);
    s = gw_pool_alloc(&pool, v.len + 1);
    memcpy(s, v.base, v.len);
    s[v.len] = '\0';
    return s;
}

static gw_cookie_result_t verify_str(const char *value, const gw_cookie_secret_t *secrets, size_t n, const char *sandbox,
                                     uint16_t port, uint64_t now, const char *hash)
{
    return gw_cookie_verify(h2o_iovec_init(value, strlen(value)), secrets, n, sandbox, port, now, hash);
}

static gw_cookie_result_t verify_default(const char *value)
{
    return verify_str(value, &new_secret, 1, "sbx7f3a9", 3000, NOW, HASH_A);
}

START_TEST(test_sign_verify_round_trip)
{
    char *v = sign_str(&new_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A);
    size_t i;

    ck_assert_int_eq(verify_default(v), GW_COOKIE_OK);
    /* cookie-safe: only base64url characters and '.' */
    for (i = 0; v[i] != '\0'; ++i)
        ck_assert_msg(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.", v[i]) != NULL,
                      "unsafe character '%c' in %s", v[i], v);
    ck_assert_msg(strncmp(v, "v1.sbx7f3a9.3000.", 17) == 0, "unexpected layout: %s", v);
    /* the token hash is bound, not carried */
    ck_assert_ptr_null(strstr(v, "2cf24dba"));
}
END_TEST

/* The fields of a value, read without a secret (the gateway says why a refused cookie was refused). */
START_TEST(test_read_fields)
{
    char *v = sign_str(&new_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A);
    h2o_iovec_t sandbox;
    uint16_t port;
    uint64_t expires;

    ck_assert_int_eq(gw_cookie_read_fields(h2o_iovec_init(v, strlen(v)), &sandbox, &port, &expires), 0);
    ck_assert(h2o_memis(sandbox.base, sandbox.len, H2O_STRLIT("sbx7f3a9")));
    ck_assert_uint_eq(port, 3000);
    ck_assert_uint_eq(expires, EXPIRES);
    /* signed with an unknown secret: still readable, still refused */
    v = sign_str(&old_secret, "other", 8080, 5, HASH_B);
    ck_assert_int_eq(gw_cookie_read_fields(h2o_iovec_init(v, strlen(v)), &sandbox, &port, &expires), 0);
    ck_assert_uint_eq(port, 8080);
    ck_assert_int_eq(verify_default(v), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(gw_cookie_read_fields(h2o_iovec_init(H2O_STRLIT("v1.sbx.3000.99")), &sandbox, &port, &expires), -1);
    ck_assert_int_eq(gw_cookie_read_fields(h2o_iovec_init(H2O_STRLIT("garbage")), &sandbox, &port, &expires), -1);
    ck_assert_int_eq(gw_cookie_read_fields(h2o_iovec_init(NULL, 0), &sandbox, &port, &expires), -1);
}
END_TEST

START_TEST(test_uppercase_hash_equivalent)
{
    char *v = sign_str(&new_secret, "sbx1", 1, EXPIRES, HASH_A);
    ck_assert_int_eq(
        verify_str(v, &new_secret, 1, "sbx1", 1, NOW, "2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824"),
        GW_COOKIE_OK);
}
END_TEST

START_TEST(test_expiry)
{
    char *v = sign_str(&new_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A);

    ck_assert_int_eq(verify_str(v, &new_secret, 1, "sbx7f3a9", 3000, EXPIRES - 1, HASH_A), GW_COOKIE_OK);
    ck_assert_int_eq(verify_str(v, &new_secret, 1, "sbx7f3a9", 3000, EXPIRES, HASH_A), GW_COOKIE_EXPIRED);
    ck_assert_int_eq(verify_str(v, &new_secret, 1, "sbx7f3a9", 3000, EXPIRES + 86400, HASH_A), GW_COOKIE_EXPIRED);
}
END_TEST

START_TEST(test_wrong_sandbox_and_port)
{
    char *v = sign_str(&new_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A);

    /* a genuine cookie presented on another preview host */
    ck_assert_int_eq(verify_str(v, &new_secret, 1, "sbx7f3a", 3000, NOW, HASH_A), GW_COOKIE_WRONG_SANDBOX);
    ck_assert_int_eq(verify_str(v, &new_secret, 1, "sbx7f3a90", 3000, NOW, HASH_A), GW_COOKIE_WRONG_SANDBOX);
    ck_assert_int_eq(verify_str(v, &new_secret, 1, "sbx7f3a9", 3001, NOW, HASH_A), GW_COOKIE_WRONG_PORT);
}
END_TEST

/* Replaces field `index` (0-4) of a signed value with `repl`. */
static char *replace_field(const char *v, int index, const char *repl)
{
    char *out = gw_pool_alloc(&pool, strlen(v) + strlen(repl) + 1);
    const char *p = v;
    size_t len = 0;
    int i;

    for (i = 0; i != 5; ++i) {
        const char *dot = strchr(p, '.');
        size_t flen = dot != NULL ? (size_t)(dot - p) : strlen(p);
        const char *src = i == index ? repl : p;
        size_t slen = i == index ? strlen(repl) : flen;
        memcpy(out + len, src, slen);
        len += slen;
        if (i != 4)
            out[len++] = '.';
        p += flen + 1;
    }
    out[len] = '\0';
    return out;
}

START_TEST(test_tampering)
{
    char *v = sign_str(&new_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A), *t;
    char expires_later[32];
    size_t sig_at;

    ck_assert_int_eq(verify_str(replace_field(v, 1, "sbxother"), &new_secret, 1, "sbxother", 3000, NOW, HASH_A),
                     GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(verify_str(replace_field(v, 2, "3001"), &new_secret, 1, "sbx7f3a9", 3001, NOW, HASH_A),
                     GW_COOKIE_BAD_SIGNATURE);
    snprintf(expires_later, sizeof(expires_later), "%u", EXPIRES + 1000000u);
    ck_assert_int_eq(verify_default(replace_field(v, 3, expires_later)), GW_COOKIE_BAD_SIGNATURE);
    /* an unknown version is not something this gateway signed */
    ck_assert_int_eq(verify_default(replace_field(v, 0, "v2")), GW_COOKIE_MALFORMED);
    ck_assert_int_eq(verify_default(replace_field(v, 0, "V1")), GW_COOKIE_MALFORMED);
    /* one signature character flipped */
    t = replace_field(v, 0, "v1");
    sig_at = strlen(t) - 10;
    t[sig_at] = t[sig_at] == 'A' ? 'B' : 'A';
    ck_assert_int_eq(verify_default(t), GW_COOKIE_BAD_SIGNATURE);
    /* a signature from another cookie */
    ck_assert_int_eq(
        verify_default(replace_field(v, 4, strrchr(sign_str(&new_secret, "sbx7f3a9", 3001, EXPIRES, HASH_A), '.') + 1)),
        GW_COOKIE_BAD_SIGNATURE);
}
END_TEST

START_TEST(test_token_rotation_revokes)
{
    char *v = sign_str(&new_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A);

    ck_assert_int_eq(verify_str(v, &new_secret, 1, "sbx7f3a9", 3000, NOW, HASH_B), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(verify_str(v, &new_secret, 1, "sbx7f3a9", 3000, NOW, ""), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(verify_str(v, &new_secret, 1, "sbx7f3a9", 3000, NOW, NULL), GW_COOKIE_BAD_SIGNATURE);
}
END_TEST

START_TEST(test_secret_rotation)
{
    char *signed_old = sign_str(&old_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A);
    char *signed_new = sign_str(&new_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A);
    gw_cookie_secret_t both[2] = {new_secret, old_secret};

    ck_assert_str_ne(signed_old, signed_new);
    /* during rotation both verify */
    ck_assert_int_eq(verify_str(signed_old, both, 2, "sbx7f3a9", 3000, NOW, HASH_A), GW_COOKIE_OK);
    ck_assert_int_eq(verify_str(signed_new, both, 2, "sbx7f3a9", 3000, NOW, HASH_A), GW_COOKIE_OK);
    /* once the old secret is removed, its cookies stop working */
    ck_assert_int_eq(verify_str(signed_old, both, 1, "sbx7f3a9", 3000, NOW, HASH_A), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(verify_str(signed_new, both, 1, "sbx7f3a9", 3000, NOW, HASH_A), GW_COOKIE_OK);
    /* no secrets: nothing verifies */
    ck_assert_int_eq(verify_str(signed_new, NULL, 0, "sbx7f3a9", 3000, NOW, HASH_A), GW_COOKIE_BAD_SIGNATURE);
}
END_TEST

START_TEST(test_unusable_secret_or_input_does_not_sign)
{
    gw_cookie_secret_t empty = {(const unsigned char *)"", 0};
    char long_id[100];

    memset(long_id, 'a', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    ck_assert_ptr_null(gw_cookie_sign(&pool, &empty, "sbx1", 3000, EXPIRES, HASH_A).base);
    ck_assert_ptr_null(gw_cookie_sign(&pool, NULL, "sbx1", 3000, EXPIRES, HASH_A).base);
    ck_assert_ptr_null(gw_cookie_sign(&pool, &new_secret, "sbx.1", 3000, EXPIRES, HASH_A).base);
    ck_assert_ptr_null(gw_cookie_sign(&pool, &new_secret, "", 3000, EXPIRES, HASH_A).base);
    ck_assert_ptr_null(gw_cookie_sign(&pool, &new_secret, long_id, 3000, EXPIRES, HASH_A).base);
}
END_TEST

START_TEST(test_extreme_fields_round_trip)
{
    char *v = sign_str(&new_secret, "z", 65535, UINT64_MAX, HASH_A);
    ck_assert_int_eq(verify_str(v, &new_secret, 1, "z", 65535, NOW, HASH_A), GW_COOKIE_OK);
}
END_TEST

START_TEST(test_malformed)
{
    char *v = sign_str(&new_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A);
    char huge[4096], *trimmed;
    static const char *bad[] = {
        "",
        ".",
        "....",
        "v1",
        "v1.sbx7f3a9.3000.1700003600",
        "v1.sbx7f3a9.3000.1700003600.",
        "v1..3000.1700003600.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "v1.sbx7f3a9.30a0.1700003600.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "v1.sbx7f3a9.03000.1700003600.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "v1.sbx7f3a9.65536.1700003600.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "v1.sbx7f3a9.-300.1700003600.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "v1.sbx7f3a9.3000.+1700003600.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "v1.sbx7f3a9.3000.18446744073709551616.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "v1.sbx7f3a9.3000.99999999999999999999999.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "v1.sbx7f3a9.3000.1700003600.AAAA",
        "v1.sbx7f3a9.3000.1700003600.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "v1.sbx7f3a9.3000.1700003600.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA+",
        "v1.sbx 7f3a9.3000.1700003600.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "v1.sbx7f3a9.3000.1700003600.extra.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    };
    size_t i;

    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i)
        ck_assert_msg(verify_default(bad[i]) == GW_COOKIE_MALFORMED, "accepted as well-formed: \"%s\"", bad[i]);
    ck_assert_int_eq(gw_cookie_verify(h2o_iovec_init(NULL, 0), &new_secret, 1, "sbx7f3a9", 3000, NOW, HASH_A), GW_COOKIE_MALFORMED);

    /* huge: a valid value followed by padding */
    memset(huge, 'A', sizeof(huge));
    memcpy(huge, v, strlen(v));
    ck_assert_int_eq(gw_cookie_verify(h2o_iovec_init(huge, sizeof(huge)), &new_secret, 1, "sbx7f3a9", 3000, NOW, HASH_A),
                     GW_COOKIE_MALFORMED);
    /* a valid value with a trailing separator or missing its last character */
    trimmed = gw_pool_alloc(&pool, strlen(v) + 2);
    memcpy(trimmed, v, strlen(v) - 1);
    trimmed[strlen(v) - 1] = '\0';
    ck_assert_int_eq(verify_default(trimmed), GW_COOKIE_MALFORMED);
    memcpy(trimmed, v, strlen(v));
    trimmed[strlen(v)] = '.';
    trimmed[strlen(v) + 1] = '\0';
    ck_assert_int_eq(verify_default(trimmed), GW_COOKIE_MALFORMED);
    /* the value compared with length: a NUL inside does not cut it short */
    ck_assert_int_eq(gw_cookie_verify(h2o_iovec_init(v, strlen(v) + 1), &new_secret, 1, "sbx7f3a9", 3000, NOW, HASH_A),
                     GW_COOKIE_MALFORMED);
}
END_TEST

static void assert_iovec_str(h2o_iovec_t v, const char *expected)
{
    ck_assert_ptr_nonnull(v.base);
    ck_assert_msg(v.len == strlen(expected) && memcmp(v.base, expected, v.len) == 0, "got \"%.*s\", want \"%s\"", (int)v.len,
                  v.base, expected);
}

START_TEST(test_set_and_clear_header)
{
    h2o_iovec_t name = h2o_iovec_init(H2O_STRLIT("__Host-lizard_access")), value = h2o_iovec_init(H2O_STRLIT("v1.abc.3000.1.sig"));

    assert_iovec_str(gw_cookie_set_header(&pool, name, value, 86400, GW_COOKIE_SAME_SITE_LAX),
                     "__Host-lizard_access=v1.abc.3000.1.sig; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=86400");
    assert_iovec_str(gw_cookie_set_header(&pool, name, value, 60, GW_COOKIE_SAME_SITE_STRICT),
                     "__Host-lizard_access=v1.abc.3000.1.sig; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=60");
    assert_iovec_str(gw_cookie_set_header(&pool, name, value, 86400, GW_COOKIE_SAME_SITE_NONE),
                     "__Host-lizard_access=v1.abc.3000.1.sig; Path=/; Secure; HttpOnly; SameSite=None; Partitioned; Max-Age=86400");
    assert_iovec_str(gw_cookie_clear_header(&pool, name, GW_COOKIE_SAME_SITE_LAX),
                     "__Host-lizard_access=; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=0");
    assert_iovec_str(gw_cookie_clear_header(&pool, name, GW_COOKIE_SAME_SITE_NONE),
                     "__Host-lizard_access=; Path=/; Secure; HttpOnly; SameSite=None; Partitioned; Max-Age=0");
}
END_TEST

/* Runs gw_cookie_extract on NULL-terminated field strings for the default name. */
static size_t extract(const char **fields, h2o_iovec_t *found, h2o_iovec_t *rest)
{
    h2o_iovec_t iov[8];
    size_t n;

    for (n = 0; fields[n] != NULL; ++n)
        iov[n] = h2o_iovec_init(fields[n], strlen(fields[n]));
    return gw_cookie_extract(&pool, iov, n, h2o_iovec_init(H2O_STRLIT("__Host-lizard_access")), found, rest);
}

START_TEST(test_extract_only_cookie)
{
    const char *f[] = {"__Host-lizard_access=v1.x.1.2.sig", NULL};
    h2o_iovec_t found, rest;

    ck_assert_uint_eq(extract(f, &found, &rest), 1);
    assert_iovec_str(found, "v1.x.1.2.sig");
    ck_assert_ptr_null(rest.base);
    ck_assert_uint_eq(rest.len, 0);
}
END_TEST

START_TEST(test_extract_positions)
{
    const char *first[] = {"__Host-lizard_access=V; a=1; b=2", NULL};
    const char *middle[] = {"a=1; __Host-lizard_access=V; b=2", NULL};
    const char *last[] = {"a=1; b=2; __Host-lizard_access=V", NULL};
    const char **cases[] = {first, middle, last};
    h2o_iovec_t found, rest;
    size_t i;

    for (i = 0; i != 3; ++i) {
        ck_assert_uint_eq(extract(cases[i], &found, &rest), 1);
        assert_iovec_str(found, "V");
        assert_iovec_str(rest, "a=1; b=2");
    }
}
END_TEST

START_TEST(test_extract_repeated)
{
    const char *f[] = {"__Host-lizard_access=first; a=1; __Host-lizard_access=second", NULL};
    h2o_iovec_t found, rest;

    ck_assert_uint_eq(extract(f, &found, &rest), 2);
    assert_iovec_str(found, "first");
    assert_iovec_str(rest, "a=1");
}
END_TEST

START_TEST(test_extract_similar_names_kept)
{
    const char *f[] = {"__Host-lizard_access2=x; lizard_access=y; __host-lizard_access=z; x__Host-lizard_access=w", NULL};
    h2o_iovec_t found, rest;

    ck_assert_uint_eq(extract(f, &found, &rest), 0);
    ck_assert_ptr_null(found.base);
    assert_iovec_str(rest, "__Host-lizard_access2=x; lizard_access=y; __host-lizard_access=z; x__Host-lizard_access=w");
}
END_TEST

START_TEST(test_extract_whitespace_and_empty_pairs)
{
    const char *f[] = {"  a=1 ;__Host-lizard_access = V ;;\tb=x y ; ", NULL};
    h2o_iovec_t found, rest;

    ck_assert_uint_eq(extract(f, &found, &rest), 1);
    assert_iovec_str(found, "V");
    assert_iovec_str(rest, "a=1; b=x y");
}
END_TEST

START_TEST(test_extract_multiple_fields)
{
    /* HTTP/2 sends one field per cookie */
    const char *f[] = {"a=1", "__Host-lizard_access=V", "b=2; c=3", "", "d", NULL};
    h2o_iovec_t found, rest;

    ck_assert_uint_eq(extract(f, &found, &rest), 1);
    assert_iovec_str(found, "V");
    assert_iovec_str(rest, "a=1; b=2; c=3; d");
}
END_TEST

START_TEST(test_extract_absent_and_empty)
{
    const char *none[] = {NULL};
    const char *others[] = {"a=1;b=\"q;\"", NULL};
    h2o_iovec_t found, rest;

    ck_assert_uint_eq(extract(none, &found, &rest), 0);
    ck_assert_ptr_null(found.base);
    ck_assert_ptr_null(rest.base);

    ck_assert_uint_eq(extract(others, &found, &rest), 0);
    ck_assert_ptr_null(found.base);
    assert_iovec_str(rest, "a=1; b=\"q; \"");
}
END_TEST

START_TEST(test_extract_empty_value)
{
    const char *f[] = {"__Host-lizard_access=; a=1", NULL};
    h2o_iovec_t found, rest;

    ck_assert_uint_eq(extract(f, &found, &rest), 1);
    ck_assert_ptr_nonnull(found.base);
    ck_assert_uint_eq(found.len, 0);
    assert_iovec_str(rest, "a=1");
}
END_TEST

/* attacker bytes */

typedef struct {
    size_t full_len; /* the valid value's length: only it verifies */
} bytes_ctx_t;

static void verify_any(const char *buf, size_t len, void *data)
{
    bytes_ctx_t *ctx = data;
    h2o_iovec_t v = h2o_iovec_init(buf, len), sandbox;
    uint16_t port;
    uint64_t expires;
    gw_cookie_result_t r = gw_cookie_verify(v, &new_secret, 1, "sbx7f3a9", 3000, NOW, HASH_A),
                       rl = gw_cookie_verify_link(v, &new_secret, 1, "sbx7f3a9", 3000, NOW, 7);

    /* one byte changed, missing or cut off: the signature no longer holds */
    if (len != ctx->full_len || ctx->full_len == SIZE_MAX) {
        ck_assert_int_ne(r, GW_COOKIE_OK);
        ck_assert_int_ne(rl, GW_COOKIE_OK);
    }
    (void)gw_cookie_is_link(v);
    if (gw_cookie_read_fields(v, &sandbox, &port, &expires) == 0) {
        ck_assert(sandbox.base >= buf && sandbox.base + sandbox.len <= buf + len);
        ck_assert(gw_sandbox_id_valid(sandbox.base, sandbox.len));
    }
}

START_TEST(test_bytes_value)
{
    h2o_iovec_t plain = gw_cookie_sign(&pool, &new_secret, "sbx7f3a9", 3000, EXPIRES, HASH_A),
                link = gw_cookie_sign_link(&pool, &new_secret, "sbx7f3a9", 3000, EXPIRES, 7);
    bytes_ctx_t ctx;

    ck_assert_int_eq(gw_cookie_verify(plain, &new_secret, 1, "sbx7f3a9", 3000, NOW, HASH_A), GW_COOKIE_OK);
    ck_assert_int_eq(gw_cookie_verify_link(link, &new_secret, 1, "sbx7f3a9", 3000, NOW, 7), GW_COOKIE_OK);
    ctx.full_len = plain.len; /* every prefix but the whole */
    gw_bytes_each_prefix(plain.base, plain.len - 1, verify_any, &ctx);
    gw_bytes_each_prefix(link.base, link.len - 1, verify_any, &ctx);
    ctx.full_len = SIZE_MAX; /* every mutation */
    gw_bytes_each_mutation(plain.base, plain.len, verify_any, &ctx);
    gw_bytes_each_mutation(link.base, link.len, verify_any, &ctx);
}
END_TEST

static void extract_any(const char *buf, size_t len, void *data)
{
    h2o_iovec_t field = h2o_iovec_init(buf, len), found, rest;
    size_t n = gw_cookie_extract(&pool, &field, 1, h2o_iovec_init(H2O_STRLIT("__Host-lizard_access")), &found, &rest);

    (void)data;
    ck_assert_uint_le(found.len, len);
    ck_assert_uint_le(rest.len, len);
    ck_assert(n != 0 || found.base == NULL);
    if (found.base != NULL)
        ck_assert(found.len == 0 || memchr(found.base, ';', found.len) == NULL);
}

START_TEST(test_bytes_header)
{
    static const char field[] = "a=1; __Host-lizard_access=v1.sbx.3000.1.sig;b= 2 ;;__Host-lizard_access=x; c";

    gw_bytes_each_prefix(field, sizeof(field) - 1, extract_any, NULL);
    gw_bytes_each_mutation(field, sizeof(field) - 1, extract_any, NULL);
}
END_TEST

static Suite *cookie_suite(void)
{
    Suite *s = suite_create("cookie");
    TCase *sign = tcase_create("sign_verify"), *hdr = tcase_create("headers"), *ext = tcase_create("extract");

    tcase_add_checked_fixture(sign, setup, teardown);
    tcase_add_test(sign, test_sign_verify_round_trip);
    tcase_add_test(sign, test_read_fields);
    tcase_add_test(sign, test_uppercase_hash_equivalent);
    tcase_add_test(sign, test_expiry);
    tcase_add_test(sign, test_wrong_sandbox_and_port);
    tcase_add_test(sign, test_tampering);
    tcase_add_test(sign, test_token_rotation_revokes);
    tcase_add_test(sign, test_secret_rotation);
    tcase_add_test(sign, test_unusable_secret_or_input_does_not_sign);
    tcase_add_test(sign, test_extreme_fields_round_trip);
    tcase_add_test(sign, test_malformed);
    suite_add_tcase(s, sign);

    tcase_add_checked_fixture(hdr, setup, teardown);
    tcase_add_test(hdr, test_set_and_clear_header);
    suite_add_tcase(s, hdr);

    tcase_add_checked_fixture(ext, setup, teardown);
    tcase_add_test(ext, test_extract_only_cookie);
    tcase_add_test(ext, test_extract_positions);
    tcase_add_test(ext, test_extract_repeated);
    tcase_add_test(ext, test_extract_similar_names_kept);
    tcase_add_test(ext, test_extract_whitespace_and_empty_pairs);
    tcase_add_test(ext, test_extract_multiple_fields);
    tcase_add_test(ext, test_extract_absent_and_empty);
    tcase_add_test(ext, test_extract_empty_value);
    suite_add_tcase(s, ext);

    TCase *bytes = tcase_create("bytes");
    /* thousands of parses each, under ASan on a loaded machine: not a time bound, just room */
    tcase_set_timeout(bytes, 120);
    tcase_add_checked_fixture(bytes, setup, teardown);
    tcase_add_test(bytes, test_bytes_value);
    tcase_add_test(bytes, test_bytes_header);
    suite_add_tcase(s, bytes);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(cookie_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
