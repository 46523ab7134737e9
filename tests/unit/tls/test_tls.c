/*
 * tls/tls.c: certificates chosen by SNI (exact, wildcard, default), ALPN,
 * the TLS 1.2 floor, load errors and reload, all through in-memory
 * handshakes against certificates made with the openssl CLI.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <check.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include "tls/tls.h"

static char dir[] = "/tmp/gw-tls-test-XXXXXX";

static const char *path_of(const char *file)
{
    static char bufs[64][512];
    static unsigned next;
    char *buf = bufs[next++ % 64];

    snprintf(buf, sizeof(bufs[0]), "%s/%s", dir, file);
    return buf;
}

static int run(const char *cmd)
{
    char full[2048];

    snprintf(full, sizeof(full), "cd %s && { %s; } >/dev/null 2>&1", dir, cmd);
    return system(full);
}

static void write_text(const char *file, const char *text)
{
    FILE *fp = fopen(path_of(file), "w");

    if (fp == NULL || fputs(text, fp) < 0 || fclose(fp) != 0) {
        perror(file);
        exit(2);
    }
}

static void copy_file(const char *from, const char *to)
{
    char cmd[512];

    snprintf(cmd, sizeof(cmd), "cp %s %s", from, to);
    if (run(cmd) != 0) {
        fprintf(stderr, "cannot copy %s\n", from);
        exit(2);
    }
}

/* A leaf signed by the test CA: NAME.pem, NAME.key, subject CN=cn, and
 * `ext` (an openssl extension line) as its extensions. */
static void make_leaf(const char *name, const char *cn, const char *ext)
{
    char cmd[1024], ext_file[64];

    snprintf(ext_file, sizeof(ext_file), "%s.ext", name);
    write_text(ext_file, ext);
    snprintf(cmd, sizeof(cmd),
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout %s.key -out %s.csr -subj /CN=%s && "
             "openssl x509 -req -in %s.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -out %s.pem -extfile %s",
             name, name, cn, name, name, ext_file);
    if (run(cmd) != 0) {
        fprintf(stderr, "openssl failed for %s\n", name);
        exit(2);
    }
}

static void make_certificates(void)
{
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
    if (run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem "
            "-subj /CN=lizard-test-ca -days 2") != 0) {
        fprintf(stderr, "openssl CA failed\n");
        exit(2);
    }
    make_leaf("wild", "wild-1", "subjectAltName=DNS:*.lizard.test\n");
    make_leaf("exact", "exact-1", "subjectAltName=DNS:exact.other.test\n");
    make_leaf("wild2", "wild-2", "subjectAltName=DNS:*.lizard.test\n");
    make_leaf("cnonly", "cnonly.test", "basicConstraints=CA:FALSE\n");
}

typedef struct {
    int ok;
    char cn[128];
    char alpn[32];
    int version;
} result_t;

/* One in-memory handshake: a client with ALPN `alpn` (wire format) and
 * `sni` (NULL: none) against a server SSL made from `server_ctx`. */
static result_t handshake_full(SSL_CTX *server_ctx, const char *sni, const char *alpn, int max_version)
{
    result_t r;
    SSL_CTX *cctx;
    SSL *c, *s;
    BIO *cbio, *sbio;
    int i, cdone = 0, sdone = 0, rc;

    memset(&r, 0, sizeof(r));
    cctx = SSL_CTX_new(TLS_client_method());
    ck_assert_ptr_nonnull(cctx);
    ck_assert_int_eq(SSL_CTX_load_verify_locations(cctx, path_of("ca.pem"), NULL), 1);
    SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
    if (max_version != 0) {
        /* let the client offer old versions, so that only the server can refuse */
        SSL_CTX_set_security_level(cctx, 0);
        SSL_CTX_set_cipher_list(cctx, "DEFAULT@SECLEVEL=0");
        SSL_CTX_set_min_proto_version(cctx, TLS1_VERSION);
        SSL_CTX_set_max_proto_version(cctx, max_version);
    }
    if (alpn != NULL)
        ck_assert_int_eq(SSL_CTX_set_alpn_protos(cctx, (const unsigned char *)alpn, (unsigned)strlen(alpn)), 0);
    c = SSL_new(cctx);
    s = SSL_new(server_ctx);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(s);
    if (sni != NULL)
        SSL_set_tlsext_host_name(c, sni);
    ck_assert_int_eq(BIO_new_bio_pair(&cbio, 0, &sbio, 0), 1);
    SSL_set_bio(c, cbio, cbio);
    SSL_set_bio(s, sbio, sbio);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);

    for (i = 0; i != 100 && !(cdone && sdone); ++i) {
        if (!cdone) {
            if ((rc = SSL_do_handshake(c)) == 1)
                cdone = 1;
            else if (SSL_get_error(c, rc) != SSL_ERROR_WANT_READ && SSL_get_error(c, rc) != SSL_ERROR_WANT_WRITE)
                break;
        }
        if (!sdone) {
            if ((rc = SSL_do_handshake(s)) == 1)
                sdone = 1;
            else if (SSL_get_error(s, rc) != SSL_ERROR_WANT_READ && SSL_get_error(s, rc) != SSL_ERROR_WANT_WRITE)
                break;
        }
    }
    ERR_clear_error();
    if (cdone && sdone) {
        X509 *peer = SSL_get1_peer_certificate(c);
        const unsigned char *proto;
        unsigned proto_len;

        r.ok = SSL_get_verify_result(c) == X509_V_OK;
        if (peer != NULL) {
            X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, r.cn, sizeof(r.cn));
            X509_free(peer);
        }
        SSL_get0_alpn_selected(c, &proto, &proto_len);
        if (proto != NULL && proto_len < sizeof(r.alpn))
            memcpy(r.alpn, proto, proto_len);
        r.version = SSL_version(c);
    }
    SSL_free(c);
    SSL_free(s);
    SSL_CTX_free(cctx);
    return r;
}

static result_t handshake(SSL_CTX *server_ctx, const char *sni)
{
    return handshake_full(server_ctx, sni, "\x02h2\x08http/1.1", 0);
}

static gw_tls_t *new_default(void)
{
    gw_tls_cert_conf_t conf[] = {
        {path_of("wild.pem"), path_of("wild.key")},
        {path_of("exact.pem"), path_of("exact.key")},
        {path_of("cnonly.pem"), path_of("cnonly.key")},
    };
    char *err = NULL;
    gw_tls_t *t = gw_tls_new(conf, 3, &err);

    ck_assert_msg(t != NULL, "gw_tls_new: %s", err != NULL ? err : "(null)");
    return t;
}

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

static int matches(const char *pattern, const char *name)
{
    return gw_tls_name_matches(h2o_iovec_init(pattern, strlen(pattern)), h2o_iovec_init(name, strlen(name)));
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
    ck_assert_int_eq(matches("exact.example.com", "EXACT.example.com"), 1);
    ck_assert_int_eq(matches("exact.example.com", "exact.example.co"), 0);
    ck_assert_int_eq(matches("exact.example.com", "x.exact.example.com"), 0);
    ck_assert_int_eq(matches("*.tld", "a.tld"), 1);
    ck_assert_int_eq(matches("*", "a"), 0);
    ck_assert_int_eq(matches("", ""), 0);
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
    SRunner *sr;
    int failed;
    char cmd[128];

    make_certificates();
    sr = srunner_create(tls_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return failed == 0 ? 0 : 1;
}
