/*
 * http/cors.c: an edge port's CORS decisions and headers. The app's
 * Access-Control-* are replaced, never repeated; allowed origins get the
 * gateway's set with the app's exposed headers kept; credentials only for
 * exact origins; null and unlisted origins get none.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "http/cors.h"
#include "routing/cors_origins.h"

static h2o_mem_pool_t pool;

static gw_sandbox_port_t port_with(const char *origins, char *buf)
{
    gw_sandbox_port_t p = {.port = 3000, .access = GW_PORT_PRIVATE, .cors_edge = 1};
    h2o_iovec_t bad;
    int any;
    size_t n = gw_cors_origins_parse(origins, strlen(origins), buf, &any, &bad);

    p.cors_any = any;
    p.cors_origins = h2o_iovec_init(n != 0 ? buf : NULL, n);
    return p;
}

static size_t count(const h2o_headers_t *h, const char *name)
{
    size_t i, n = 0;
    for (i = 0; i != h->size; ++i)
        n += h2o_lcstris(h->entries[i].name->base, h->entries[i].name->len, name, strlen(name));
    return n;
}

static h2o_iovec_t value(const h2o_headers_t *h, const char *name)
{
    ssize_t i = h2o_find_header_by_str(h, name, strlen(name), -1);
    return i == -1 ? h2o_iovec_init(NULL, 0) : h->entries[i].value;
}

static void app_headers(h2o_headers_t *h)
{
    memset(h, 0, sizeof(*h));
    h2o_add_header(&pool, h, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/json"));
    h2o_add_header(&pool, h, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, NULL, H2O_STRLIT("*"));
    h2o_add_header_by_str(&pool, h, H2O_STRLIT("access-control-allow-origin"), 0, NULL, H2O_STRLIT("https://other.example"));
    h2o_add_header_by_str(&pool, h, H2O_STRLIT("access-control-expose-headers"), 0, NULL, H2O_STRLIT("X-Request-Id"));
    h2o_add_header_by_str(&pool, h, H2O_STRLIT("access-control-allow-credentials"), 0, NULL, H2O_STRLIT("true"));
    h2o_add_header_by_str(&pool, h, H2O_STRLIT("mcp-session-id"), 0, NULL, H2O_STRLIT("s1"));
}

START_TEST(test_decide)
{
    char buf[256];
    gw_sandbox_port_t p = port_with("https://app.example.com", buf);
    gw_cors_t c;

    ck_assert_int_eq(gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("https://app.example.com")), &c), 1);
    ck_assert_int_eq(c.credentials, 1);
    ck_assert_int_eq(gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("https://evil.example")), &c), 0);
    ck_assert_ptr_null(c.origin.base);
    ck_assert_int_eq(gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("null")), &c), 0);
    ck_assert_int_eq(gw_cors_decide(&p, h2o_iovec_init(NULL, 0), &c), 0);
    p = port_with("*", buf);
    ck_assert_int_eq(gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("https://evil.example")), &c), 1);
    ck_assert_int_eq(c.credentials, 0); /* "*" never with credentials */
    ck_assert_int_eq(gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("null")), &c), 0);
    p = port_with("garbage, null", buf);
    ck_assert_int_eq(gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("null")), &c), 0);
}
END_TEST

START_TEST(test_rewrite)
{
    char buf[256];
    gw_sandbox_port_t p = port_with("https://app.example.com", buf);
    h2o_headers_t h;
    gw_cors_t c;

    /* allowed: the gateway's set, once; the app's exposed header kept after the gateway's */
    app_headers(&h);
    gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("https://app.example.com")), &c);
    gw_cors_rewrite(&pool, &h, &c);
    ck_assert_uint_eq(count(&h, "access-control-allow-origin"), 1);
    ck_assert(h2o_memis(value(&h, "access-control-allow-origin").base, value(&h, "access-control-allow-origin").len,
                        H2O_STRLIT("https://app.example.com")));
    ck_assert_uint_eq(count(&h, "access-control-allow-credentials"), 1);
    ck_assert_uint_eq(count(&h, "access-control-expose-headers"), 1);
    h2o_iovec_t exposed = value(&h, "access-control-expose-headers");
    ck_assert(h2o_memis(exposed.base, exposed.len, H2O_STRLIT(GW_CORS_EXPOSED ", X-Request-Id")));
    ck_assert_uint_eq(count(&h, "vary"), 1);
    ck_assert_uint_eq(count(&h, "mcp-session-id"), 1);
    ck_assert_uint_eq(count(&h, "content-type"), 1);
    /* not allowed: none at all, Vary still */
    app_headers(&h);
    h2o_add_header(&pool, &h, H2O_TOKEN_VARY, NULL, H2O_STRLIT("Accept-Encoding, origin"));
    gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("https://evil.example")), &c);
    gw_cors_rewrite(&pool, &h, &c);
    ck_assert_uint_eq(count(&h, "access-control-allow-origin") + count(&h, "access-control-allow-credentials") +
                          count(&h, "access-control-expose-headers"),
                      0);
    ck_assert_uint_eq(count(&h, "vary"), 1); /* the app's already named Origin */
    /* "*": the origin echoed, no credentials */
    p = port_with("*", buf);
    app_headers(&h);
    gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("https://any.example")), &c);
    gw_cors_rewrite(&pool, &h, &c);
    ck_assert_uint_eq(count(&h, "access-control-allow-origin"), 1);
    ck_assert_uint_eq(count(&h, "access-control-allow-credentials"), 0);
}
END_TEST

START_TEST(test_preflight)
{
    char buf[256];
    gw_sandbox_port_t p = port_with("https://app.example.com", buf);
    h2o_headers_t h = {NULL};
    gw_cors_t c;

    gw_cors_decide(&p, h2o_iovec_init(H2O_STRLIT("https://app.example.com")), &c);
    gw_cors_preflight_headers(&pool, &h, &c, h2o_iovec_init(H2O_STRLIT("POST")),
                              h2o_iovec_init(H2O_STRLIT("authorization, mcp-session-id")));
    ck_assert(h2o_memis(value(&h, "access-control-allow-methods").base, value(&h, "access-control-allow-methods").len,
                        H2O_STRLIT("POST")));
    ck_assert(h2o_memis(value(&h, "access-control-allow-headers").base, value(&h, "access-control-allow-headers").len,
                        H2O_STRLIT("authorization, mcp-session-id")));
    ck_assert(h2o_memis(value(&h, "access-control-max-age").base, value(&h, "access-control-max-age").len, H2O_STRLIT("600")));
    ck_assert_uint_eq(count(&h, "access-control-allow-credentials"), 1);
    ck_assert_uint_eq(count(&h, "vary"), 1);
}
END_TEST

static void setup(void)
{
    h2o_mem_init_pool(&pool);
}

static void teardown(void)
{
    h2o_mem_clear_pool(&pool);
}

int main(void)
{
    Suite *s = suite_create("cors");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_decide);
    tcase_add_test(tc, test_rewrite);
    tcase_add_test(tc, test_preflight);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
