/*
 * Unit tests for auth/warning.c: which requests get the page, its HTML, the
 * language choice, the bindings of the CSRF token and consent cookie (signed
 * with auth/cookie.c), and the return path after consent.
 */
#define _GNU_SOURCE /* memmem */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "common/engine.h"
#include "auth/cookie.h"
#include "auth/warning.h"

#define NOW 1700000000u
#define HOST "3000-sbx7f3a9.lizard.app"

static h2o_mem_pool_t pool;
static const gw_cookie_secret_t secret = {(const unsigned char *)"warning-secret-0123456789abcdefghij", 35};

static void setup(void)
{
    h2o_mem_init_pool(&pool);
}

static void teardown(void)
{
    h2o_mem_clear_pool(&pool);
}

static h2o_iovec_t iov(const char *s)
{
    return s != NULL ? h2o_iovec_init(s, strlen(s)) : h2o_iovec_init(NULL, 0);
}

/* gw_warning_applies for a request with these headers (NULL: absent). */
static int applies(const char *method, const char *dest, int upgrade, int prefers_html, int other_origin)
{
    gw_warning_request_t r = {iov(method), iov(dest), upgrade, prefers_html, other_origin};
    return gw_warning_applies(&r);
}

START_TEST(test_applies)
{
    /* top-level document navigations, of any method: an auto-submitted form of another site does not skip the page,
     * nor does the sandbox's own form breaking out of a frame */
    ck_assert(applies("GET", "document", 0, 0, 0));
    ck_assert(applies("HEAD", "Document", 0, 0, 0));
    ck_assert(applies("POST", "document", 0, 0, 1));
    ck_assert(applies("POST", "document", 0, 1, 0));
    ck_assert(applies("PUT", "document", 0, 0, 0));
    /* never what is not a navigation */
    ck_assert(!applies("POST", "empty", 0, 1, 1));
    ck_assert(!applies("GET", "empty", 0, 1, 0));
    ck_assert(!applies("GET", "script", 0, 1, 1));
    ck_assert(!applies("GET", "websocket", 1, 0, 0));
    ck_assert(!applies("GET", NULL, 1, 1, 0));
    ck_assert(!applies("GET", "document", 1, 1, 0));
    /* frames never: the page is for the top level only, whatever the mode */
    ck_assert(!applies("GET", "iframe", 0, 1, 0));
    ck_assert(!applies("GET", "frame", 0, 1, 1));
    ck_assert(!applies("POST", "iframe", 0, 1, 1));
    /* without Fetch Metadata: Accept decides for GET and HEAD; another method needs another site's Origin too */
    ck_assert(applies("GET", NULL, 0, 1, 0));
    ck_assert(applies("HEAD", NULL, 0, 1, 0));
    ck_assert(!applies("GET", NULL, 0, 0, 0));
    ck_assert(applies("POST", NULL, 0, 1, 1));
    ck_assert(!applies("POST", NULL, 0, 1, 0));
    ck_assert(!applies("POST", NULL, 0, 0, 1));
}
END_TEST

START_TEST(test_nonce)
{
    char a[GW_WARNING_NONCE_LEN + 1], b[GW_WARNING_NONCE_LEN + 1];

    ck_assert_int_eq(gw_warning_nonce_new(a), 0);
    ck_assert_int_eq(gw_warning_nonce_new(b), 0);
    ck_assert_uint_eq(strlen(a), GW_WARNING_NONCE_LEN);
    ck_assert_str_ne(a, b);
    ck_assert(gw_warning_nonce_ok(iov(a)));
    ck_assert(gw_warning_nonce_ok(iov("AAAAAAAAAAAAAAAAAAAA-_")));
    ck_assert(!gw_warning_nonce_ok(iov(NULL)));
    ck_assert(!gw_warning_nonce_ok(iov("")));
    ck_assert(!gw_warning_nonce_ok(iov("AAAAAAAAAAAAAAAAAAAAA")));
    ck_assert(!gw_warning_nonce_ok(iov("AAAAAAAAAAAAAAAAAAAAAAA")));
    ck_assert(!gw_warning_nonce_ok(iov("AAAAAAAAAAAAAAAAAAAA+/")));
    ck_assert(!gw_warning_nonce_ok(iov("AAAAAAAAAAAAAAAAAAAA==")));
    ck_assert(!gw_warning_nonce_ok(iov("AAAAAAAAAAAAAAAAAAAA; ")));
}
END_TEST

START_TEST(test_render)
{
    h2o_iovec_t body = gw_warning_render(&pool, gw_warning_strings(iov(NULL)), iov(HOST), iov("123.abc"), iov("/a?b=1&c=<x>\""));
    char *html = gw_pool_alloc(&pool, body.len + 1);

    memcpy(html, body.base, body.len);
    html[body.len] = '\0';
    ck_assert_ptr_nonnull(strstr(html, "<html lang=\"en\">"));
    ck_assert_ptr_nonnull(strstr(html, "<strong class=\"host\">" HOST "</strong> is served by code running in a sandbox, not by "
                                       "the platform."));
    ck_assert_ptr_nonnull(strstr(html, "Do not enter passwords"));
    ck_assert_ptr_nonnull(strstr(html, "<form method=\"post\" action=\"/.lizard/consent\">"));
    ck_assert_ptr_nonnull(strstr(html, "name=\"csrf\" value=\"123.abc\""));
    /* the reflected return path is escaped */
    ck_assert_ptr_nonnull(strstr(html, "name=\"return\" value=\"/a?b=1&amp;c=&lt;x&gt;&quot;\""));
    ck_assert_ptr_nonnull(strstr(html, "<button type=\"submit\">Continue to the preview</button>"));
    ck_assert_ptr_null(strstr(html, "<script"));
    ck_assert_ptr_nonnull(strstr(html, "noindex"));
}
END_TEST

START_TEST(test_render_escapes_host)
{
    h2o_iovec_t body = gw_warning_render(&pool, gw_warning_strings(iov(NULL)), iov("<b>"), iov("t"), iov("/"));

    ck_assert_ptr_null(memmem(body.base, body.len, "<b>", 3));
    ck_assert_ptr_nonnull(memmem(body.base, body.len, "&lt;b&gt;", 9));
}
END_TEST

START_TEST(test_languages)
{
    ck_assert_str_eq(gw_warning_strings(iov(NULL))->lang, "en");
    ck_assert_str_eq(gw_warning_strings(iov("de-DE,de;q=0.9,en;q=0.8"))->lang, "de");
    ck_assert_str_eq(gw_warning_strings(iov("fr-FR, de;q=0.5"))->lang, "de");
    ck_assert_str_eq(gw_warning_strings(iov("fr-FR"))->lang, "en");
    ck_assert_str_eq(gw_warning_strings(iov("de;q=0, en"))->lang, "en");
    ck_assert_str_eq(gw_warning_strings(iov("DE;q=0.001"))->lang, "de");
    ck_assert_str_eq(gw_warning_strings(iov(","))->lang, "en");
    /* every language has every sentence, and names the host */
    const gw_warning_strings_t *de = gw_warning_strings(iov("de"));
    ck_assert_ptr_nonnull(strstr(de->served_by, "$H"));
    ck_assert_ptr_nonnull(de->continue_label);
    h2o_iovec_t body = gw_warning_render(&pool, de, iov(HOST), iov("t"), iov("/"));
    ck_assert_ptr_nonnull(memmem(body.base, body.len, "<html lang=\"de\">", 16));
    ck_assert_ptr_nonnull(memmem(body.base, body.len, "Weiter zur Vorschau", 19));
}
END_TEST

#define NONCE_A "nonceAAAAAAAAAAAAAAAAA"
#define NONCE_B "nonceBBBBBBBBBBBBBBBBB"

START_TEST(test_binding)
{
    char csrf[GW_WARNING_BINDING_SIZE], csrf_upper[GW_WARNING_BINDING_SIZE], consent[GW_WARNING_BINDING_SIZE],
        other[GW_WARNING_BINDING_SIZE], consent_b[GW_WARNING_BINDING_SIZE];

    gw_warning_binding(GW_WARNING_CSRF, iov(HOST), iov(NONCE_A), csrf);
    gw_warning_binding(GW_WARNING_CSRF, iov("3000-SBX7F3A9.lizard.app"), iov(NONCE_A), csrf_upper);
    gw_warning_binding(GW_WARNING_CONSENT, iov(HOST), iov(NONCE_A), consent);
    gw_warning_binding(GW_WARNING_CONSENT, iov(HOST), iov(NONCE_B), consent_b);
    gw_warning_binding(GW_WARNING_CSRF, iov("3000-sbx7f3a9.other.app"), iov(NONCE_A), other);
    ck_assert_uint_eq(strlen(csrf), 5 + 64);
    ck_assert_str_eq(csrf, csrf_upper);
    ck_assert_str_ne(csrf, consent);
    ck_assert_str_ne(csrf, other);
    /* a consent binds the browser's nonce too (issue 36): one given in another browser is worth nothing here */
    ck_assert_str_ne(consent, consent_b);

    /* a CSRF token: time- and host-bound, and not a consent cookie */
    h2o_iovec_t token = gw_cookie_sign(&pool, &secret, "sbx7f3a9", 3000, NOW + GW_WARNING_CSRF_TTL_S, csrf);
    ck_assert_ptr_nonnull(token.base);
    ck_assert_int_eq(gw_cookie_verify(token, &secret, 1, "sbx7f3a9", 3000, NOW + 10, csrf), GW_COOKIE_OK);
    ck_assert_int_eq(gw_cookie_verify(token, &secret, 1, "sbx7f3a9", 3000, NOW + GW_WARNING_CSRF_TTL_S, csrf), GW_COOKIE_EXPIRED);
    ck_assert_int_eq(gw_cookie_verify(token, &secret, 1, "sbx7f3a9", 3000, NOW, other), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(gw_cookie_verify(token, &secret, 1, "sbx7f3a9", 3000, NOW, consent), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(gw_cookie_verify(token, &secret, 1, "sbx7f3a9", 3001, NOW, csrf), GW_COOKIE_WRONG_PORT);
}
END_TEST

/* The token is bound to the browser it was shown to: a token made for one
 * nonce (the page fetched by the sandbox's server) is refused with any other
 * nonce (the victim's browser), and with none. */
START_TEST(test_binding_to_the_browser)
{
    char mine[GW_WARNING_BINDING_SIZE], theirs[GW_WARNING_BINDING_SIZE], none[GW_WARNING_BINDING_SIZE],
        cut[GW_WARNING_BINDING_SIZE];

    gw_warning_binding(GW_WARNING_CSRF, iov(HOST), iov(NONCE_A), mine);
    gw_warning_binding(GW_WARNING_CSRF, iov(HOST), iov(NONCE_B), theirs);
    gw_warning_binding(GW_WARNING_CSRF, iov(HOST), iov(NULL), none);
    gw_warning_binding(GW_WARNING_CSRF, iov(HOST), iov("nonceAAAAAAAAAAAAAAAA"), cut);
    ck_assert_str_ne(mine, theirs);
    ck_assert_str_ne(mine, none);
    ck_assert_str_ne(mine, cut);

    h2o_iovec_t fetched_elsewhere = gw_cookie_sign(&pool, &secret, "sbx7f3a9", 3000, NOW + GW_WARNING_CSRF_TTL_S, theirs);
    ck_assert_int_eq(gw_cookie_verify(fetched_elsewhere, &secret, 1, "sbx7f3a9", 3000, NOW, theirs), GW_COOKIE_OK);
    ck_assert_int_eq(gw_cookie_verify(fetched_elsewhere, &secret, 1, "sbx7f3a9", 3000, NOW, mine), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(gw_cookie_verify(fetched_elsewhere, &secret, 1, "sbx7f3a9", 3000, NOW, none), GW_COOKIE_BAD_SIGNATURE);

    /* a nonce longer than the format is cut, never read past: the binding of its first GW_WARNING_NONCE_LEN bytes */
    char longer[GW_WARNING_BINDING_SIZE];
    gw_warning_binding(GW_WARNING_CSRF, iov(HOST), iov(NONCE_A "tail"), longer);
    ck_assert_str_eq(longer, mine);

    /* the same for a consent cookie: one given in the browser of nonce B (the sandbox's own) fails with nonce A, with
     * none, and one issued before issue 36 (bound to the host alone) fails with any */
    char consent_a[GW_WARNING_BINDING_SIZE], consent_b[GW_WARNING_BINDING_SIZE], consent_none[GW_WARNING_BINDING_SIZE];
    gw_warning_binding(GW_WARNING_CONSENT, iov(HOST), iov(NONCE_A), consent_a);
    gw_warning_binding(GW_WARNING_CONSENT, iov(HOST), iov(NONCE_B), consent_b);
    gw_warning_binding(GW_WARNING_CONSENT, iov(HOST), iov(NULL), consent_none);
    h2o_iovec_t given_elsewhere = gw_cookie_sign(&pool, &secret, "sbx7f3a9", 3000, NOW + 86400, consent_b);
    ck_assert_int_eq(gw_cookie_verify(given_elsewhere, &secret, 1, "sbx7f3a9", 3000, NOW, consent_b), GW_COOKIE_OK);
    ck_assert_int_eq(gw_cookie_verify(given_elsewhere, &secret, 1, "sbx7f3a9", 3000, NOW, consent_a), GW_COOKIE_BAD_SIGNATURE);
    ck_assert_int_eq(gw_cookie_verify(given_elsewhere, &secret, 1, "sbx7f3a9", 3000, NOW, consent_none), GW_COOKIE_BAD_SIGNATURE);
}
END_TEST

START_TEST(test_return_path)
{
    ck_assert(gw_warning_return_path_ok(iov("/")));
    ck_assert(gw_warning_return_path_ok(iov("/a/b?c=d&e=%20")));
    ck_assert(!gw_warning_return_path_ok(iov("")));
    ck_assert(!gw_warning_return_path_ok(iov("a")));
    ck_assert(!gw_warning_return_path_ok(iov("//evil.example/")));
    ck_assert(!gw_warning_return_path_ok(iov("/\\evil.example/")));
    ck_assert(!gw_warning_return_path_ok(iov("https://evil.example/")));
    ck_assert(!gw_warning_return_path_ok(iov("/a b")));
    ck_assert(!gw_warning_return_path_ok(iov("/a\r\nSet-Cookie: x=1")));
    ck_assert(!gw_warning_return_path_ok(iov("/\xc3\xa4")));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("warning");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_applies);
    tcase_add_test(tc, test_nonce);
    tcase_add_test(tc, test_render);
    tcase_add_test(tc, test_render_escapes_host);
    tcase_add_test(tc, test_languages);
    tcase_add_test(tc, test_binding);
    tcase_add_test(tc, test_binding_to_the_browser);
    tcase_add_test(tc, test_return_path);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
