/*
 * tls/tls.c: certificates chosen by SNI (exact, wildcard, default) and the
 * name matching behind it, ALPN, the TLS 1.2 floor, load errors and reload,
 * through in-memory handshakes (tls_test.h).
 */
#include <pthread.h>
#include <openssl/x509v3.h>
#include "tls_test.h"

START_TEST(test_sni_exact_wildcard_default)
{
    gw_tls_t *t = new_default();
    SSL_CTX *ctx = gw_tls_listener_ctx(t);
    result_t r;

    r = handshake(ctx, "exact.other.test");
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.cn, "exact-1");

    r = handshake(ctx, "EXACT.Other.Test");
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.cn, "exact-1");

    r = handshake(ctx, "3000-sbx1.lizard.test");
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.cn, "wild-1");

    /* a wildcard covers one label only: falls back to the default (first) */
    r = handshake(ctx, "a.b.other.test");
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.cn, "wild-1");

    r = handshake(ctx, "unknown.example");
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.cn, "wild-1");

    r = handshake(ctx, NULL);
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.cn, "wild-1");

    /* a certificate without SAN is found by its CN */
    r = handshake(ctx, "cnonly.test");
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.cn, "cnonly.test");

    gw_tls_free(t);
}
END_TEST

START_TEST(test_exact_wins_over_wildcard_in_later_cert)
{
    /* the wildcard comes first, yet an exact name in a later certificate wins */
    char *err = NULL;
    gw_tls_t *t;
    result_t r;

    make_leaf("exactlz", "exact-lizard", "subjectAltName=DNS:api.lizard.test\n");
    gw_tls_cert_conf_t conf[] = {{path_of("wild.pem"), path_of("wild.key")}, {path_of("exactlz.pem"), path_of("exactlz.key")}};
    t = gw_tls_new(conf, 2, &err);
    ck_assert_msg(t != NULL, "%s", err);
    r = handshake(gw_tls_listener_ctx(t), "api.lizard.test");
    ck_assert_str_eq(r.cn, "exact-lizard");
    r = handshake(gw_tls_listener_ctx(t), "web.lizard.test");
    ck_assert_str_eq(r.cn, "wild-1");
    gw_tls_free(t);
}
END_TEST

START_TEST(test_alpn)
{
    gw_tls_t *t = new_default();
    result_t r;

    r = handshake(gw_tls_listener_ctx(t), "x.lizard.test");
    ck_assert_str_eq(r.alpn, "h2");
    /* after the switch to a non-default certificate too */
    r = handshake(gw_tls_listener_ctx(t), "exact.other.test");
    ck_assert_str_eq(r.cn, "exact-1");
    ck_assert_str_eq(r.alpn, "h2");
    r = handshake_full(gw_tls_listener_ctx(t), "exact.other.test", "\x08http/1.1", 0);
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.alpn, "http/1.1");
    r = handshake(gw_tls_listener_ctx(t), NULL);
    ck_assert_str_eq(r.alpn, "h2");
    gw_tls_free(t);
}
END_TEST

START_TEST(test_old_protocols_refused)
{
    gw_tls_t *t = new_default();
    result_t r;

    ck_assert_int_eq(SSL_CTX_get_min_proto_version(gw_tls_listener_ctx(t)), TLS1_2_VERSION);
    r = handshake_full(gw_tls_listener_ctx(t), "x.lizard.test", NULL, TLS1_1_VERSION);
    ck_assert_int_eq(r.ok, 0);
    ck_assert_int_eq(r.version, 0);
    r = handshake_full(gw_tls_listener_ctx(t), "x.lizard.test", NULL, TLS1_2_VERSION);
    ck_assert_int_eq(r.ok, 1);
    ck_assert_int_eq(r.version, TLS1_2_VERSION);
    ck_assert_str_eq(r.cn, "wild-1");
    r = handshake(gw_tls_listener_ctx(t), "x.lizard.test");
    ck_assert_int_eq(r.version, TLS1_3_VERSION);
    gw_tls_free(t);
}
END_TEST

START_TEST(test_mismatched_key)
{
    gw_tls_cert_conf_t conf[] = {{path_of("wild.pem"), path_of("wild.key")}, {path_of("exact.pem"), path_of("wild2.key")}};
    char *err = NULL;

    ck_assert_ptr_null(gw_tls_new(conf, 2, &err));
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(err, path_of("wild2.key")) != NULL, "%s", err);
    ck_assert_msg(strstr(err, "does not match") != NULL, "%s", err);
    free(err);
}
END_TEST

START_TEST(test_missing_and_bad_files)
{
    gw_tls_cert_conf_t missing[] = {{path_of("nope.pem"), path_of("wild.key")}};
    gw_tls_cert_conf_t not_pem[] = {{path_of("wild.ext"), path_of("wild.key")}};
    gw_tls_cert_conf_t bad_key[] = {{path_of("wild.pem"), path_of("wild.pem")}};
    char *err = NULL;

    ck_assert_ptr_null(gw_tls_new(missing, 1, &err));
    ck_assert_msg(strstr(err, path_of("nope.pem")) != NULL && strstr(err, "No such file") != NULL, "%s", err);
    free(err);

    ck_assert_ptr_null(gw_tls_new(not_pem, 1, &err));
    ck_assert_msg(strstr(err, path_of("wild.ext")) != NULL && strstr(err, "certificate") != NULL, "%s", err);
    free(err);

    ck_assert_ptr_null(gw_tls_new(bad_key, 1, &err));
    ck_assert_msg(strstr(err, "private key") != NULL, "%s", err);
    free(err);

    ck_assert_ptr_null(gw_tls_new(missing, 0, &err));
    ck_assert_ptr_nonnull(err);
    free(err);
}
END_TEST

START_TEST(test_reload)
{
    gw_tls_cert_conf_t conf[] = {{path_of("live.pem"), path_of("live.key")}, {path_of("exact.pem"), path_of("exact.key")}};
    char *err = NULL;
    gw_tls_t *t;
    SSL_CTX *front;
    result_t r;

    copy_file("wild.pem", "live.pem");
    copy_file("wild.key", "live.key");
    t = gw_tls_new(conf, 2, &err);
    ck_assert_msg(t != NULL, "%s", err);
    front = gw_tls_listener_ctx(t);
    ck_assert_str_eq(handshake(front, "a.lizard.test").cn, "wild-1");

    copy_file("wild2.pem", "live.pem");
    copy_file("wild2.key", "live.key");
    ck_assert_msg(gw_tls_reload(t, &err) == 0, "%s", err);
    ck_assert_ptr_eq(gw_tls_listener_ctx(t), front);
    r = handshake(front, "a.lizard.test");
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.cn, "wild-2");
    /* the default (no SNI) follows the reload as well */
    ck_assert_str_eq(handshake(front, NULL).cn, "wild-2");
    ck_assert_str_eq(handshake(front, "exact.other.test").cn, "exact-1");

    /* a broken pair: the reload fails, names the file, the set stays */
    copy_file("wild.key", "live.key");
    ck_assert_int_eq(gw_tls_reload(t, &err), -1);
    ck_assert_msg(strstr(err, path_of("live.key")) != NULL, "%s", err);
    free(err);
    r = handshake(front, "a.lizard.test");
    ck_assert_int_eq(r.ok, 1);
    ck_assert_str_eq(r.cn, "wild-2");
    ck_assert_str_eq(handshake(front, "exact.other.test").cn, "exact-1");

    gw_tls_free(t);
}
END_TEST

static void *reload_loop(void *arg)
{
    gw_tls_t *t = arg;
    char *err = NULL;
    int i;

    for (i = 0; i != 30; ++i) {
        if (gw_tls_reload(t, &err) != 0) {
            free(err);
            return (void *)1;
        }
    }
    return NULL;
}

START_TEST(test_reload_during_handshakes)
{
    gw_tls_t *t = new_default();
    pthread_t th;
    void *ret;
    int i;

    ck_assert_int_eq(pthread_create(&th, NULL, reload_loop, t), 0);
    for (i = 0; i != 30; ++i) {
        result_t r = handshake(gw_tls_listener_ctx(t), i % 2 ? "exact.other.test" : "z.lizard.test");
        ck_assert_int_eq(r.ok, 1);
        ck_assert_str_eq(r.cn, i % 2 ? "exact-1" : "wild-1");
    }
    pthread_join(th, &ret);
    ck_assert_ptr_null(ret);
    gw_tls_free(t);
}
END_TEST

/* 1 when a certificate with the subjectAltName `san` (NULL: none) and the
 * CN `cn` serves `name` in pick()'s exact pass (0) or wildcard pass (1). */
static int serves_name(const char *san, const char *cn, const char *name, int wildcards)
{
    X509 *x = X509_new();
    int ret;

    ck_assert_ptr_nonnull(x);
    ck_assert_int_eq(
        X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0), 1);
    if (san != NULL) {
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, san);
        ck_assert_ptr_nonnull(ext);
        ck_assert_int_eq(X509_add_ext(x, ext, -1), 1);
        X509_EXTENSION_free(ext);
    }
    ret = gw_tls_cert_serves(x, h2o_iovec_init(name, strlen(name)), wildcards);
    X509_free(x);
    return ret;
}

static int matches(const char *pattern, const char *name)
{
    char san[256];

    snprintf(san, sizeof(san), "DNS:%s", pattern);
    return serves_name(san, "ignored when there is a DNS SAN", name, 1);
}

START_TEST(test_name_matches)
{
    ck_assert_int_eq(matches("*.example.com", "a.example.com"), 1);
    ck_assert_int_eq(matches("*.example.com", "A.EXAMPLE.com"), 1);
    ck_assert_int_eq(matches("*.Example.COM", "3000-sbx.example.com"), 1);
    ck_assert_int_eq(matches("*.example.com", "a.b.example.com"), 0);
    ck_assert_int_eq(matches("*.example.com", "example.com"), 0);
    ck_assert_int_eq(matches("*.example.com", ".example.com"), 0);
    ck_assert_int_eq(matches("*.example.com", "aexample.com"), 0);
    ck_assert_int_eq(matches("*.example.com", "a.example.org"), 0);
    ck_assert_int_eq(matches("a.example.com", ".example.com"), 0);
    ck_assert_int_eq(matches("a.example.com", "a.example.com."), 0);
    ck_assert_int_eq(matches("exact.example.com", "EXACT.example.com"), 1);
    ck_assert_int_eq(matches("exact.example.com", "exact.example.co"), 0);
    ck_assert_int_eq(matches("exact.example.com", "x.exact.example.com"), 0);
    /* as browsers: no wildcard right below a top-level label, no partial-label wildcard */
    ck_assert_int_eq(matches("*.tld", "a.tld"), 0);
    ck_assert_int_eq(matches("a*.example.com", "ab.example.com"), 0);
    ck_assert_int_eq(matches("*", "a"), 0);
    ck_assert_int_eq(serves_name("DNS:a.example.com", "a.example.com", "", 1), 0);
    /* the exact pass ignores wildcards */
    ck_assert_int_eq(serves_name("DNS:*.example.com", "x", "a.example.com", 0), 0);
    ck_assert_int_eq(serves_name("DNS:*.example.com,DNS:a.example.com", "x", "a.example.com", 0), 1);
    /* the CN counts only without a DNS SAN */
    ck_assert_int_eq(serves_name(NULL, "cn.example.com", "cn.example.com", 0), 1);
    ck_assert_int_eq(serves_name(NULL, "*.example.com", "cn.example.com", 1), 1);
    ck_assert_int_eq(serves_name("DNS:other.example.com", "cn.example.com", "cn.example.com", 1), 0);
}
END_TEST

static Suite *tls_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sni_exact_wildcard_default);
    tcase_add_test(tc, test_exact_wins_over_wildcard_in_later_cert);
    tcase_add_test(tc, test_alpn);
    tcase_add_test(tc, test_old_protocols_refused);
    tcase_add_test(tc, test_mismatched_key);
    tcase_add_test(tc, test_missing_and_bad_files);
    tcase_add_test(tc, test_reload);
    tcase_add_test(tc, test_reload_during_handshakes);
    tcase_add_test(tc, test_name_matches);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(tls_suite());
}
