/*
 * http/credentials.c: which credential decides (header, then query, then
 * cookie), what each is checked as (an "lzs1." value in the header or the
 * query is a share link; the cookie is always the gateway's own, an access
 * cookie or the one a link became), and the grant or the refusal's cause.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include "common/engine.h"
#include "auth/share_link.h"
#include "http/credentials.h"

/* sha256("test") */
#define TOKEN_HASH "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define LINK_SECRET "share-link-secret-0123456789abcdef"
#define COOKIE_SECRET "cookie-secret-0123456789abcdefghij"
#define NOW 1700000000u

static h2o_mem_pool_t pool;
static gw_sandbox_t *sbx;
static gw_credential_keys_t keys;
static gw_link_key_t link_key = {"k1", (unsigned char *)LINK_SECRET, sizeof(LINK_SECRET) - 1};

/* sbx1 with port 3000 private, token "test", link_epoch 2. */
static gw_sandbox_t *record(void)
{
    static const char resp[] = "*10\r\n$5\r\nstate\r\n$7\r\nrunning\r\n$4\r\naddr\r\n$8\r\n10.0.0.7\r\n"
                               "$12\r\ntoken_sha256\r\n$64\r\n" TOKEN_HASH "\r\n$9\r\nport:3000\r\n$7\r\nprivate\r\n"
                               "$10\r\nlink_epoch\r\n$1\r\n2\r\n";
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    gw_sandbox_t *s = NULL;
    const char *err = NULL;

    ck_assert_int_eq(redisReaderFeed(rd, resp, sizeof(resp) - 1), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    redisReaderFree(rd);
    ck_assert_int_eq(gw_sandbox_parse("sbx1", reply, &s, &err), 0);
    freeReplyObject(reply);
    return s;
}

static void setup(void)
{
    static const gw_cookie_secret_t secret = {(const unsigned char *)COOKIE_SECRET, sizeof(COOKIE_SECRET) - 1};
    char *err = NULL;

    h2o_mem_init_pool(&pool);
    sbx = record();
    setenv("TEST_CREDENTIAL_LINK_KEYS", "k1:" LINK_SECRET, 1);
    keys.link_keys = gw_link_keys_new("TEST_CREDENTIAL_LINK_KEYS", NULL, &err);
    ck_assert_ptr_nonnull(keys.link_keys);
    keys.cookie_keys = gw_cookie_keys_new(&(gw_cookie_keys_config_t){.secrets = &secret, .num_secrets = 1});
    keys.link_max_ttl_s = 3600;
}

static void teardown(void)
{
    gw_link_keys_free(keys.link_keys);
    gw_cookie_keys_free(keys.cookie_keys);
    gw_sandbox_release(sbx);
    h2o_mem_clear_pool(&pool);
}

static h2o_iovec_t link_for(uint16_t port, uint64_t epoch)
{
    return gw_share_link_sign(&pool, &link_key, "sbx1", port, NOW + 600, epoch);
}

static gw_credential_status_t check(gw_credentials_t c, gw_grant_t *grant, gw_error_why_t *why, int *from)
{
    *grant = (gw_grant_t){.record = sbx, .port = 3000, .kind = GW_GRANT_PUBLIC};
    *why = GW_WHY_DEFAULT;
    return gw_credentials_check(&c, &keys, sbx, 3000, NOW, grant, why, from);
}

START_TEST(test_access_token)
{
    gw_grant_t g;
    gw_error_why_t why;
    int from;

    ck_assert_int_eq(check((gw_credentials_t){.header = h2o_iovec_init(H2O_STRLIT("test"))}, &g, &why, &from), GW_CREDENTIAL_OK);
    ck_assert_int_eq(g.kind, GW_GRANT_TOKEN);
    ck_assert_int_eq(from, GW_CREDENTIAL_FROM_HEADER);
    ck_assert_int_eq(check((gw_credentials_t){.header = h2o_iovec_init(H2O_STRLIT("nope"))}, &g, &why, &from),
                     GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_WRONG_TOKEN_HEADER);
    ck_assert_int_eq(check((gw_credentials_t){.query = h2o_iovec_init(H2O_STRLIT("test")), .has_query = 1}, &g, &why, &from),
                     GW_CREDENTIAL_OK);
    ck_assert_int_eq(from, GW_CREDENTIAL_FROM_QUERY);
    ck_assert_int_eq(check((gw_credentials_t){.query = h2o_iovec_init(H2O_STRLIT("")), .has_query = 1}, &g, &why, &from),
                     GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_WRONG_LINK);
    ck_assert_int_eq(check((gw_credentials_t){{NULL, 0}, {NULL, 0}, 0, {NULL, 0}, {NULL, 0}}, &g, &why, &from), GW_CREDENTIAL_NONE);
}
END_TEST

START_TEST(test_share_link_everywhere)
{
    h2o_iovec_t link = link_for(3000, 2);
    gw_grant_t g;
    gw_error_why_t why;
    int from;

    ck_assert_int_eq(check((gw_credentials_t){.header = link}, &g, &why, &from), GW_CREDENTIAL_OK);
    ck_assert_int_eq(g.kind, GW_GRANT_LINK);
    ck_assert_uint_eq(g.expires_at, NOW + 600);
    ck_assert_uint_eq(g.link_epoch, 2);
    ck_assert_int_eq(check((gw_credentials_t){.query = link, .has_query = 1}, &g, &why, &from), GW_CREDENTIAL_OK);
    ck_assert_int_eq(g.kind, GW_GRANT_LINK);
    /* the link itself is no cookie (the cookie is not the token) */
    ck_assert_int_eq(check((gw_credentials_t){.cookie = link}, &g, &why, &from), GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(from, GW_CREDENTIAL_FROM_COOKIE);
    /* never compared with the access token, and each refusal says why */
    ck_assert_int_eq(check((gw_credentials_t){.header = link_for(3001, 2)}, &g, &why, &from), GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_LINK_OTHER_PORT);
    ck_assert_int_eq(check((gw_credentials_t){.query = link_for(3000, 1), .has_query = 1}, &g, &why, &from), GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_LINK_REVOKED);
    ck_assert_int_eq(check((gw_credentials_t){.query = h2o_iovec_init(H2O_STRLIT("lzs1.x.y")), .has_query = 1}, &g, &why, &from),
                     GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_LINK_SIGNATURE);
}
END_TEST

/* The cookie a link becomes: the gateway's own, binding sandbox, port,
 * expiry and link_epoch; worth what the link was, until a new epoch. */
START_TEST(test_link_cookie)
{
    h2o_iovec_t cookie, access;
    gw_grant_t g;
    gw_error_why_t why;
    int from;

    ck_assert_int_eq(gw_cookie_keys_sign_link(keys.cookie_keys, &pool, "sbx1", 3000, NOW + 60, 2, &cookie), 0);
    ck_assert(gw_cookie_is_link(cookie));
    ck_assert(!gw_share_link_is(cookie));
    ck_assert_int_eq(check((gw_credentials_t){.cookie = cookie}, &g, &why, &from), GW_CREDENTIAL_OK);
    ck_assert_int_eq(g.kind, GW_GRANT_LINK);
    ck_assert_uint_eq(g.expires_at, NOW + 60);
    ck_assert_uint_eq(g.link_epoch, 2);
    ck_assert_int_eq(from, GW_CREDENTIAL_FROM_COOKIE);
    /* another epoch, port, or an expired one */
    ck_assert_int_eq(gw_cookie_keys_sign_link(keys.cookie_keys, &pool, "sbx1", 3000, NOW + 60, 1, &cookie), 0);
    ck_assert_int_eq(check((gw_credentials_t){.cookie = cookie}, &g, &why, &from), GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_LINK_REVOKED);
    ck_assert_int_eq(gw_cookie_keys_sign_link(keys.cookie_keys, &pool, "sbx1", 3001, NOW + 60, 2, &cookie), 0);
    ck_assert_int_eq(check((gw_credentials_t){.cookie = cookie}, &g, &why, &from), GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(gw_cookie_keys_sign_link(keys.cookie_keys, &pool, "sbx1", 3000, NOW - 1, 2, &cookie), 0);
    ck_assert_int_eq(check((gw_credentials_t){.cookie = cookie}, &g, &why, &from), GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_LINK_EXPIRED);
    /* the two kinds never verify as each other: an access cookie with "v1" changed to "l1", and back */
    ck_assert_int_eq(gw_cookie_keys_sign(keys.cookie_keys, &pool, "sbx1", 3000, NOW + 60, TOKEN_HASH, &access), 0);
    char *forged = gw_pool_alloc(&pool, access.len);
    memcpy(forged, access.base, access.len);
    forged[0] = 'l';
    ck_assert_int_eq(check((gw_credentials_t){.cookie = h2o_iovec_init(forged, access.len)}, &g, &why, &from),
                     GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(gw_cookie_keys_sign_link(keys.cookie_keys, &pool, "sbx1", 3000, NOW + 60, 2, &cookie), 0);
    forged = gw_pool_alloc(&pool, cookie.len);
    memcpy(forged, cookie.base, cookie.len);
    forged[0] = 'v';
    ck_assert_int_eq(check((gw_credentials_t){.cookie = h2o_iovec_init(forged, cookie.len)}, &g, &why, &from),
                     GW_CREDENTIAL_REFUSED);
}
END_TEST

START_TEST(test_gateway_cookie_and_order)
{
    h2o_iovec_t cookie;
    gw_grant_t g;
    gw_error_why_t why;
    int from;

    ck_assert_int_eq(gw_cookie_keys_sign(keys.cookie_keys, &pool, "sbx1", 3000, NOW + 60, TOKEN_HASH, &cookie), 0);
    ck_assert_int_eq(check((gw_credentials_t){.cookie = cookie}, &g, &why, &from), GW_CREDENTIAL_OK);
    ck_assert_int_eq(g.kind, GW_GRANT_COOKIE);
    ck_assert_uint_eq(g.expires_at, NOW + 60);
    /* the header decides when present, even beside a valid cookie */
    ck_assert_int_eq(check((gw_credentials_t){.header = h2o_iovec_init(H2O_STRLIT("nope")), .cookie = cookie}, &g, &why, &from),
                     GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(from, GW_CREDENTIAL_FROM_HEADER);
    /* another port's cookie */
    ck_assert_int_eq(gw_cookie_keys_sign(keys.cookie_keys, &pool, "sbx1", 3001, NOW + 60, TOKEN_HASH, &cookie), 0);
    ck_assert_int_eq(check((gw_credentials_t){.cookie = cookie}, &g, &why, &from), GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_COOKIE_NOT_VALID);
}
END_TEST

/* Authorization: Bearer (CONTRACT.md, Authentication 4): the scheme, the
 * value, whose it is, and its place between the header and the query. */
START_TEST(test_bearer)
{
    gw_grant_t g;
    gw_error_why_t why;
    int from;
    h2o_iovec_t v;

    v = gw_credentials_bearer(h2o_iovec_init(H2O_STRLIT("Bearer test")));
    ck_assert(h2o_memis(v.base, v.len, H2O_STRLIT("test")));
    v = gw_credentials_bearer(h2o_iovec_init(H2O_STRLIT("bEaReR    abc.def")));
    ck_assert(h2o_memis(v.base, v.len, H2O_STRLIT("abc.def")));
    /* no value, another scheme, no space */
    ck_assert_ptr_null(gw_credentials_bearer(h2o_iovec_init(H2O_STRLIT("Bearer"))).base);
    ck_assert_ptr_null(gw_credentials_bearer(h2o_iovec_init(H2O_STRLIT("Bearer   "))).base);
    ck_assert_ptr_null(gw_credentials_bearer(h2o_iovec_init(H2O_STRLIT("Basic dGVzdA=="))).base);
    ck_assert_ptr_null(gw_credentials_bearer(h2o_iovec_init(H2O_STRLIT("Bearertest"))).base);
    ck_assert_ptr_null(gw_credentials_bearer(h2o_iovec_init(H2O_STRLIT(""))).base);
    /* the gateway's: the access token, or any share link (another port's is refused, not passed on) */
    ck_assert(gw_credentials_bearer_is_ours(h2o_iovec_init(H2O_STRLIT("test")), sbx));
    ck_assert(gw_credentials_bearer_is_ours(link_for(3001, 2), sbx));
    ck_assert(!gw_credentials_bearer_is_ours(h2o_iovec_init(H2O_STRLIT("eyJhbGciOi.app.jwt")), sbx));
    ck_assert(!gw_credentials_bearer_is_ours(h2o_iovec_init(H2O_STRLIT("tes")), sbx));

    ck_assert_int_eq(check((gw_credentials_t){.bearer = h2o_iovec_init(H2O_STRLIT("test"))}, &g, &why, &from), GW_CREDENTIAL_OK);
    ck_assert_int_eq(from, GW_CREDENTIAL_FROM_BEARER);
    ck_assert_int_eq(g.kind, GW_GRANT_TOKEN);
    ck_assert_int_eq(check((gw_credentials_t){.bearer = link_for(3000, 2)}, &g, &why, &from), GW_CREDENTIAL_OK);
    ck_assert_int_eq(g.kind, GW_GRANT_LINK);
    ck_assert_int_eq(check((gw_credentials_t){.bearer = link_for(3001, 2)}, &g, &why, &from), GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_LINK_OTHER_PORT);
    /* a token that no longer matches (the record changed while the request was held) */
    ck_assert_int_eq(check((gw_credentials_t){.bearer = h2o_iovec_init(H2O_STRLIT("old"))}, &g, &why, &from),
                     GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(why, GW_WHY_WRONG_BEARER);
    /* after the header, before the query */
    ck_assert_int_eq(
        check((gw_credentials_t){.header = h2o_iovec_init(H2O_STRLIT("nope")), .bearer = h2o_iovec_init(H2O_STRLIT("test"))}, &g,
              &why, &from),
        GW_CREDENTIAL_REFUSED);
    ck_assert_int_eq(from, GW_CREDENTIAL_FROM_HEADER);
    ck_assert_int_eq(check((gw_credentials_t){.bearer = h2o_iovec_init(H2O_STRLIT("test")),
                                              .query = h2o_iovec_init(H2O_STRLIT("nope")),
                                              .has_query = 1},
                           &g, &why, &from),
                     GW_CREDENTIAL_OK);
    ck_assert_int_eq(from, GW_CREDENTIAL_FROM_BEARER);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("credentials");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_access_token);
    tcase_add_test(tc, test_share_link_everywhere);
    tcase_add_test(tc, test_gateway_cookie_and_order);
    tcase_add_test(tc, test_link_cookie);
    tcase_add_test(tc, test_bearer);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
