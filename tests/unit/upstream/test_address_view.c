/*
 * upstream/address_view.c: which request headers a `localhost` port sees
 * rewritten (Origin, Referer on the preview origin only), which response
 * headers come back as the preview origin (Location, Content-Location,
 * Refresh, Access-Control-Allow-Origin on the app's own loopback origin
 * only), and what any sandbox's Set-Cookie may not do (a Domain covering a
 * preview domain, the gateway's cookie names), with ports 443 and not 443,
 * IPv6 literals, relative URLs and case.
 */
#include <check.h>
#include <string.h>
#include "upstream/address_view.h"

static h2o_mem_pool_t pool;
static char *domains[] = {"lizard.app", "preview.example.org"};
static const gw_cookie_rules_t rules = {domains, 2, "__Host-lizard_access"};

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
    return h2o_iovec_init(s, strlen(s));
}

static gw_address_view_t view(const char *authority, uint16_t localhost_port)
{
    gw_address_view_t v;
    gw_address_view_init(&v, &pool, iov(authority), localhost_port, &rules);
    return v;
}

static char *str(h2o_iovec_t s)
{
    return h2o_strdup(&pool, s.base, s.len).base;
}

/* The response header as the client gets it; NULL: dropped. */
static char *res(const gw_address_view_t *v, const h2o_token_t *token, const char *value)
{
    h2o_iovec_t val = iov(value);
    if (!gw_address_view_response_header(v, &pool, token, &val))
        return NULL;
    return str(val);
}

START_TEST(test_origins)
{
    gw_address_view_t v = view("3000-SBX1.Lizard.App:8443", 3000);
    ck_assert_str_eq(str(v.preview_origin), "https://3000-sbx1.lizard.app:8443");
    ck_assert_str_eq(str(v.localhost_origin), "http://localhost:3000");

    /* https's own port is left out, as browsers do in Origin */
    v = view("3000-sbx1.lizard.app:443", 3000);
    ck_assert_str_eq(str(v.preview_origin), "https://3000-sbx1.lizard.app");
    v = view("3000-sbx1.lizard.app", 5173);
    ck_assert_str_eq(str(v.preview_origin), "https://3000-sbx1.lizard.app");
    ck_assert_str_eq(str(v.localhost_origin), "http://localhost:5173");
    /* a trailing dot is the browser's origin too */
    v = view("3000-sbx1.lizard.app.", 3000);
    ck_assert_str_eq(str(v.preview_origin), "https://3000-sbx1.lizard.app.");

    /* nothing that would need escaping gets into a URL: no origin, nothing rewritten */
    v = view("3000-sbx1.lizard.app/x", 3000);
    ck_assert_uint_eq(v.preview_origin.len, 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app/x"), 1), 0);
    ck_assert_str_eq(res(&v, H2O_TOKEN_LOCATION, "http://localhost:3000/"), "http://localhost:3000/");

    /* preserve mode: no origin is built, nothing but cookies is looked at */
    v = view("3000-sbx1.lizard.app", 0);
    ck_assert_uint_eq(v.preview_origin.len, 0);
    ck_assert_uint_eq(v.localhost_origin.len, 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app"), 1), 0);
}
END_TEST

START_TEST(test_request_origin_and_referer)
{
    gw_address_view_t v = view("3000-sbx1.lizard.app:8443", 3000), v443 = view("3000-sbx1.lizard.app", 3000);
    const char *origin = "https://3000-sbx1.lizard.app:8443";
    size_t n = strlen(origin);

    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov(origin), 1), n);
    /* scheme and host case-insensitive */
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("HTTPS://3000-SBX1.lizard.APP:8443"), 1), n);
    /* other origins pass: another port, another scheme, another sandbox, a longer host, null */
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app"), 1), 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app:84430"), 1), 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("http://3000-sbx1.lizard.app:8443"), 1), 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx2.lizard.app:8443"), 1), 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app.evil:8443"), 1), 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("null"), 1), 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov(""), 1), 0);
    /* an Origin is the whole value */
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app:8443/"), 1), 0);
    /* on 443 the origin has no port; one with ":443" spelled out is not what browsers send */
    ck_assert_uint_eq(gw_address_view_request_origin(&v443, iov("https://3000-sbx1.lizard.app"), 1),
                      strlen("https://3000-sbx1.lizard.app"));
    ck_assert_uint_eq(gw_address_view_request_origin(&v443, iov("https://3000-sbx1.lizard.app:8443"), 1), 0);

    /* Referer: the origin, then the end or the path, query or fragment */
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app:8443/page?q=1"), 0), n);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app:8443?q"), 0), n);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app:8443#f"), 0), n);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov(origin), 0), n);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app:84431/"), 0), 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://3000-sbx1.lizard.app:8443.evil/"), 0), 0);
    ck_assert_uint_eq(gw_address_view_request_origin(&v, iov("https://evil.example/https://3000-sbx1.lizard.app:8443/"), 0), 0);
}
END_TEST

static void add(h2o_headers_t *h, const char *name, const char *value)
{
    const h2o_token_t *t = h2o_lookup_token(name, strlen(name));
    if (t != NULL)
        h2o_add_header(&pool, h, t, NULL, value, strlen(value));
    else
        h2o_add_header_by_str(&pool, h, name, strlen(name), 1, NULL, value, strlen(value));
}

static const char *get(const h2o_headers_t *h, const char *name)
{
    ssize_t i = h2o_find_header_by_str(h, name, strlen(name), -1);
    return i == -1 ? NULL : str(h->entries[i].value);
}

START_TEST(test_request_headers)
{
    gw_address_view_t v = view("3000-sbx1.lizard.app:8443", 3000);
    h2o_headers_t in = {NULL, 0, 0};
    const h2o_headers_t *out;

    add(&in, "accept", "*/*");
    add(&in, "origin", "https://evil.example");
    add(&in, "referer", "https://evil.example/");
    ck_assert_ptr_eq(gw_address_view_request_headers(&v, &pool, &in), &in);

    memset(&in, 0, sizeof(in));
    add(&in, "origin", "https://3000-sbx1.lizard.app:8443");
    add(&in, "referer", "https://3000-SBX1.lizard.app:8443/a/b?c=d#e");
    add(&in, "x-origin", "https://3000-sbx1.lizard.app:8443");
    out = gw_address_view_request_headers(&v, &pool, &in);
    ck_assert_ptr_ne(out, &in);
    ck_assert_str_eq(get(out, "origin"), "http://localhost:3000");
    ck_assert_str_eq(get(out, "referer"), "http://localhost:3000/a/b?c=d#e");
    ck_assert_str_eq(get(out, "x-origin"), "https://3000-sbx1.lizard.app:8443");
    /* the client's own headers are untouched (the access log, CORS preflights read them) */
    ck_assert_str_eq(get(&in, "origin"), "https://3000-sbx1.lizard.app:8443");
    ck_assert_uint_eq(out->size, 3);
}
END_TEST

START_TEST(test_response_urls)
{
    gw_address_view_t v = view("3000-sbx1.lizard.app:8443", 5000), v443 = view("3000-sbx1.lizard.app", 5000),
                      v80 = view("80-sbx1.lizard.app", 80), pres = view("3000-sbx1.lizard.app", 0);
    const h2o_token_t *url_headers[] = {H2O_TOKEN_LOCATION, H2O_TOKEN_CONTENT_LOCATION};

    for (size_t i = 0; i != 2; ++i) {
        const h2o_token_t *t = url_headers[i];
        ck_assert_str_eq(res(&v, t, "http://localhost:5000/next?x=1"), "https://3000-sbx1.lizard.app:8443/next?x=1");
        ck_assert_str_eq(res(&v443, t, "http://localhost:5000/next"), "https://3000-sbx1.lizard.app/next");
        ck_assert_str_eq(res(&v, t, "http://127.0.0.1:5000/"), "https://3000-sbx1.lizard.app:8443/");
        ck_assert_str_eq(res(&v, t, "http://[::1]:5000/v6"), "https://3000-sbx1.lizard.app:8443/v6");
        ck_assert_str_eq(res(&v, t, "HTTP://LocalHost:5000/Case"), "https://3000-sbx1.lizard.app:8443/Case");
        ck_assert_str_eq(res(&v, t, "http://localhost:5000"), "https://3000-sbx1.lizard.app:8443");
        ck_assert_str_eq(res(&v, t, "http://localhost:5000?q"), "https://3000-sbx1.lizard.app:8443?q");
        ck_assert_str_eq(res(&v, t, "http://localhost:5000#f"), "https://3000-sbx1.lizard.app:8443#f");
        /* relative URLs already resolve against the preview */
        ck_assert_str_eq(res(&v, t, "/next"), "/next");
        ck_assert_str_eq(res(&v, t, "next"), "next");
        ck_assert_str_eq(res(&v, t, "//localhost:5000/x"), "//localhost:5000/x");
        /* other addresses: not the app's own origin */
        ck_assert_str_eq(res(&v, t, "http://localhost:5001/"), "http://localhost:5001/");
        ck_assert_str_eq(res(&v, t, "http://localhost:50000/"), "http://localhost:50000/");
        ck_assert_str_eq(res(&v, t, "http://localhost:500/"), "http://localhost:500/");
        ck_assert_str_eq(res(&v, t, "http://localhost/"), "http://localhost/");
        ck_assert_str_eq(res(&v, t, "https://localhost:5000/"), "https://localhost:5000/");
        ck_assert_str_eq(res(&v, t, "http://localhost.evil.example:5000/"), "http://localhost.evil.example:5000/");
        ck_assert_str_eq(res(&v, t, "http://localhost:5000@evil.example/"), "http://localhost:5000@evil.example/");
        ck_assert_str_eq(res(&v, t, "http://[::2]:5000/"), "http://[::2]:5000/");
        ck_assert_str_eq(res(&v, t, "https://evil.example/http://localhost:5000/"), "https://evil.example/http://localhost:5000/");
        ck_assert_str_eq(res(&v, t, ""), "");
        /* port 80: the app may leave it out */
        ck_assert_str_eq(res(&v80, t, "http://localhost/a"), "https://80-sbx1.lizard.app/a");
        ck_assert_str_eq(res(&v80, t, "http://localhost:80/a"), "https://80-sbx1.lizard.app/a");
        /* preserve mode: untouched */
        ck_assert_str_eq(res(&pres, t, "http://localhost:5000/next"), "http://localhost:5000/next");
    }
    /* other headers naming a URL are not the contract's */
    ck_assert_str_eq(res(&v, H2O_TOKEN_LINK, "<http://localhost:5000/a>; rel=preload"), "<http://localhost:5000/a>; rel=preload");
}
END_TEST

START_TEST(test_response_refresh)
{
    gw_address_view_t v = view("3000-sbx1.lizard.app:8443", 5000);
    const h2o_token_t *t = H2O_TOKEN_REFRESH;

    ck_assert_str_eq(res(&v, t, "0; url=http://localhost:5000/x"), "0; url=https://3000-sbx1.lizard.app:8443/x");
    ck_assert_str_eq(res(&v, t, "5;URL='http://localhost:5000/x'"), "5;URL='https://3000-sbx1.lizard.app:8443/x'");
    ck_assert_str_eq(res(&v, t, " 3 , url = \"http://127.0.0.1:5000/\""), " 3 , url = \"https://3000-sbx1.lizard.app:8443/\"");
    ck_assert_str_eq(res(&v, t, "1.5; http://localhost:5000/y"), "1.5; https://3000-sbx1.lizard.app:8443/y");
    ck_assert_str_eq(res(&v, t, "0;url=http://LOCALHOST:5000"), "0;url=https://3000-sbx1.lizard.app:8443");
    ck_assert_str_eq(res(&v, t, "10"), "10");
    ck_assert_str_eq(res(&v, t, "0; url=/relative"), "0; url=/relative");
    ck_assert_str_eq(res(&v, t, "0; url=http://localhost:5001/"), "0; url=http://localhost:5001/");
    ck_assert_str_eq(res(&v, t, "x; url=http://localhost:5000/"), "x; url=http://localhost:5000/");
    ck_assert_str_eq(res(&v, t, "0 url=http://localhost:5000/"), "0 url=http://localhost:5000/");
    ck_assert_str_eq(res(&v, t, ""), "");
    ck_assert_str_eq(res(&v, t, "0;"), "0;");
}
END_TEST

START_TEST(test_response_allow_origin)
{
    gw_address_view_t v = view("3000-sbx1.lizard.app:8443", 5000), v443 = view("3000-sbx1.lizard.app", 5000);
    const h2o_token_t *t = H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN;

    ck_assert_str_eq(res(&v, t, "http://localhost:5000"), "https://3000-sbx1.lizard.app:8443");
    ck_assert_str_eq(res(&v443, t, "http://LOCALHOST:5000"), "https://3000-sbx1.lizard.app");
    ck_assert_str_eq(res(&v, t, "http://127.0.0.1:5000"), "https://3000-sbx1.lizard.app:8443");
    ck_assert_str_eq(res(&v, t, "*"), "*");
    ck_assert_str_eq(res(&v, t, ""), "");
    ck_assert_str_eq(res(&v, t, "null"), "null");
    ck_assert_str_eq(res(&v, t, "http://localhost:5001"), "http://localhost:5001");
    ck_assert_str_eq(res(&v, t, "http://localhost:5000/"), "http://localhost:5000/");
    ck_assert_str_eq(res(&v, t, "https://other.example"), "https://other.example");
}
END_TEST

START_TEST(test_set_cookie_domains)
{
    gw_address_view_t loc = view("3000-sbx1.lizard.app:8443", 5000), pres = view("3000-sbx1.lizard.app", 0);
    const h2o_token_t *t = H2O_TOKEN_SET_COOKIE;

    /* localhost mode: the app's loopback names */
    ck_assert_str_eq(res(&loc, t, "a=1; Domain=localhost; Path=/"), "a=1; Path=/");
    ck_assert_str_eq(res(&loc, t, "a=1; Path=/; domain=LOCALHOST"), "a=1; Path=/");
    ck_assert_str_eq(res(&loc, t, "a=1; Domain=127.0.0.1"), "a=1");
    ck_assert_str_eq(res(&loc, t, "a=1; Domain=.localhost."), "a=1");
    ck_assert_str_eq(res(&loc, t, "a=1; Domain=[::1]"), "a=1");
    /* in preserve mode the browser refuses those itself: left as they are */
    ck_assert_str_eq(res(&pres, t, "a=1; Domain=localhost; Path=/"), "a=1; Domain=localhost; Path=/");

    /* every mode: a preview domain, a parent of one, a name under one */
    for (int m = 0; m != 2; ++m) {
        const gw_address_view_t *v = m == 0 ? &loc : &pres;
        ck_assert_str_eq(res(v, t, "a=1; Domain=lizard.app"), "a=1");
        ck_assert_str_eq(res(v, t, "a=1;domain=.LIZARD.APP;path=/"), "a=1;path=/");
        ck_assert_str_eq(res(v, t, "a=1; Path=/; Domain=app; Secure"), "a=1; Path=/; Secure");
        ck_assert_str_eq(res(v, t, "a=1; Domain=example.org"), "a=1");
        ck_assert_str_eq(res(v, t, "a=1; Domain=org"), "a=1");
        ck_assert_str_eq(res(v, t, "a=1; Domain=3000-other.lizard.app"), "a=1");
        ck_assert_str_eq(res(v, t, "a=1; Domain=lizard.app."), "a=1");
        ck_assert_str_eq(res(v, t, "a=1; Domain=\"lizard.app\""), "a=1");
        ck_assert_str_eq(res(v, t, "a=1;  Domain = lizard.app  ; HttpOnly"), "a=1; HttpOnly");
        ck_assert_str_eq(res(v, t, "a=1; Domain=lizard.app; Domain=app"), "a=1");
        ck_assert_str_eq(res(v, t, "a=1; Domain=elsewhere.example; Domain=lizard.app"), "a=1; Domain=elsewhere.example");
        /* names that only look alike, on a label boundary */
        ck_assert_str_eq(res(v, t, "a=1; Domain=notlizard.app"), "a=1; Domain=notlizard.app");
        ck_assert_str_eq(res(v, t, "a=1; Domain=zard.app"), "a=1; Domain=zard.app");
        ck_assert_str_eq(res(v, t, "a=1; Domain=lizard.apps"), "a=1; Domain=lizard.apps");
        ck_assert_str_eq(res(v, t, "a=1; Domain=elsewhere.example"), "a=1; Domain=elsewhere.example");
        /* no Domain, an empty one, a Domain=... that is a value: unchanged */
        ck_assert_str_eq(res(v, t, "a=1; Path=/; Secure"), "a=1; Path=/; Secure");
        ck_assert_str_eq(res(v, t, "a=1; Domain="), "a=1; Domain=");
        ck_assert_str_eq(res(v, t, "a=Domain=lizard.app"), "a=Domain=lizard.app");
        ck_assert_str_eq(res(v, t, "a=1; X-Domain=lizard.app"), "a=1; X-Domain=lizard.app");
        ck_assert_str_eq(res(v, t, ""), "");
        ck_assert_str_eq(res(v, t, ";"), ";");
    }
}
END_TEST

START_TEST(test_set_cookie_gateway_names)
{
    gw_address_view_t v = view("3000-sbx1.lizard.app", 0);
    const h2o_token_t *t = H2O_TOKEN_SET_COOKIE;
    static char *none[] = {NULL};
    gw_cookie_rules_t custom = {none, 0, "lz"};

    ck_assert_ptr_null(res(&v, t, "__Host-lizard_access=forged; Path=/; Secure"));
    ck_assert_ptr_null(res(&v, t, "__host-LIZARD_ACCESS=forged"));
    ck_assert_ptr_null(res(&v, t, " __Host-lizard_access =x"));
    ck_assert_ptr_null(res(&v, t, "__Host-lizard_consent=1; Path=/; Secure"));
    ck_assert_ptr_null(res(&v, t, "__Host-lizard_anything=1"));
    ck_assert_ptr_null(res(&v, t, "__Secure-lizard_x=1"));
    /* the warning page's consent and nonce (auth/warning.h) */
    ck_assert_ptr_null(res(&v, t, "__Host-Http-lizard_consent=1; Path=/; Secure; HttpOnly"));
    ck_assert_ptr_null(res(&v, t, "__Host-Http-lizard_warning=n"));
    ck_assert_ptr_null(res(&v, t, "__Http-lizard_x=1"));
    /* nameless cookies are sent as their value alone */
    ck_assert_ptr_null(res(&v, t, "__Host-lizard_access"));
    ck_assert_ptr_null(res(&v, t, "=__Host-lizard_access; Path=/"));
    ck_assert_str_eq(res(&v, t, "lizard_access=1"), "lizard_access=1");
    ck_assert_str_eq(res(&v, t, "__Host-lizard=1"), "__Host-lizard=1");
    ck_assert_str_eq(res(&v, t, "x=__Host-lizard_access"), "x=__Host-lizard_access");

    /* a configured auth.cookie_name */
    v.cookies = &custom;
    ck_assert_ptr_null(res(&v, t, "lz=1"));
    ck_assert_ptr_null(res(&v, t, "LZ=1; Path=/"));
    ck_assert_ptr_null(res(&v, t, "__Host-lizard_consent=1"));
    ck_assert_str_eq(res(&v, t, "lzx=1"), "lzx=1");
    /* the reserved prefixes stay the gateway's, whatever its access cookie is called */
    ck_assert_ptr_null(res(&v, t, "__Host-lizard_access=1"));

    /* no rules: nothing changes */
    v.cookies = NULL;
    ck_assert_str_eq(res(&v, t, "__Host-lizard_consent=1; Domain=lizard.app"), "__Host-lizard_consent=1; Domain=lizard.app");
}
END_TEST

START_TEST(test_other_headers_untouched)
{
    gw_address_view_t v = view("3000-sbx1.lizard.app", 5000);
    ck_assert_str_eq(res(&v, NULL, "http://localhost:5000/"), "http://localhost:5000/");
    ck_assert_str_eq(res(&v, H2O_TOKEN_CONTENT_TYPE, "http://localhost:5000"), "http://localhost:5000");
    ck_assert_str_eq(res(&v, H2O_TOKEN_VARY, "Origin"), "Origin");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("address_view");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_origins);
    tcase_add_test(tc, test_request_origin_and_referer);
    tcase_add_test(tc, test_request_headers);
    tcase_add_test(tc, test_response_urls);
    tcase_add_test(tc, test_response_refresh);
    tcase_add_test(tc, test_response_allow_origin);
    tcase_add_test(tc, test_set_cookie_domains);
    tcase_add_test(tc, test_set_cookie_gateway_names);
    tcase_add_test(tc, test_other_headers_untouched);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
