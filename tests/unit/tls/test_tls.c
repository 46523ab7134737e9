/*
 * tls/tls.c: certificates chosen by SNI (exact, wildcard, default), ALPN,
 * the TLS 1.2 floor, load errors and reload, session resumption (never
 * across certificates) and session ticket keys (files, reload, rotation), all
 * through in-memory handshakes against certificates made with the openssl
 * CLI.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <check.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
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
    int reused;
} result_t;

/* How a client resumes: session IDs (TLS 1.2 without tickets), or tickets
 * with TLS 1.2 or TLS 1.3. */
typedef enum { MODE_NONE = 0, MODE_TLS12_SESSION_ID, MODE_TLS12_TICKET, MODE_TLS13_TICKET } mode_t_;

static const char *mode_name(mode_t_ mode)
{
    return mode == MODE_TLS12_SESSION_ID ? "TLS 1.2 session ID" : mode == MODE_TLS12_TICKET ? "TLS 1.2 ticket" : "TLS 1.3 ticket";
}

/* One in-memory handshake: a client with ALPN `alpn` (wire format) and
 * `sni` (NULL: none) against a server SSL made from `server_ctx`. With a
 * mode, the client offers `offer` (NULL: none) and returns in *out (when not
 * NULL) the session it can resume next time, tickets included. */
static result_t handshake_ex(SSL_CTX *server_ctx, const char *sni, const char *alpn, int max_version, mode_t_ mode,
                             SSL_SESSION *offer, SSL_SESSION **out)
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
    if (mode != MODE_NONE) {
        SSL_CTX_set_max_proto_version(cctx, mode == MODE_TLS13_TICKET ? TLS1_3_VERSION : TLS1_2_VERSION);
        if (mode == MODE_TLS12_SESSION_ID)
            SSL_CTX_set_options(cctx, SSL_OP_NO_TICKET);
    }
    if (alpn != NULL)
        ck_assert_int_eq(SSL_CTX_set_alpn_protos(cctx, (const unsigned char *)alpn, (unsigned)strlen(alpn)), 0);
    c = SSL_new(cctx);
    s = SSL_new(server_ctx);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(s);
    if (sni != NULL)
        SSL_set_tlsext_host_name(c, sni);
    if (offer != NULL)
        ck_assert_int_eq(SSL_set_session(c, offer), 1);
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
        r.reused = SSL_session_reused(c);
        /* both ends agree on what happened */
        ck_assert_int_eq(SSL_session_reused(s), r.reused);
        if (out != NULL) {
            char buf[16];
            /* TLS 1.3 tickets come after the handshake: read them */
            ck_assert_int_le(SSL_read(c, buf, sizeof(buf)), 0);
            *out = SSL_get1_session(c);
        }
        /* a clean end: an SSL freed mid-connection takes its session out of
         * the caches (and marks it not resumable) */
        SSL_set_shutdown(c, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
        SSL_set_shutdown(s, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    }
    SSL_free(c);
    SSL_free(s);
    SSL_CTX_free(cctx);
    return r;
}

static result_t handshake_full(SSL_CTX *server_ctx, const char *sni, const char *alpn, int max_version)
{
    return handshake_ex(server_ctx, sni, alpn, max_version, MODE_NONE, NULL, NULL);
}

/* A handshake in `mode` offering `offer`; the next session in *out (NULL:
 * not wanted). */
static result_t resume(SSL_CTX *server_ctx, const char *sni, mode_t_ mode, SSL_SESSION *offer, SSL_SESSION **out)
{
    result_t r = handshake_ex(server_ctx, sni, "\x02h2\x08http/1.1", 0, mode, offer, out);

    ck_assert_msg(r.ok, "%s handshake with %s failed", mode_name(mode), sni != NULL ? sni : "(no SNI)");
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

/* Session resumption and ticket keys. */

static const mode_t_ all_modes[] = {MODE_TLS12_SESSION_ID, MODE_TLS12_TICKET, MODE_TLS13_TICKET};
#define NUM_MODES (sizeof(all_modes) / sizeof(all_modes[0]))

/* A new session (not a resumption) for `sni` in `mode`. */
static SSL_SESSION *new_session(SSL_CTX *server_ctx, const char *sni, mode_t_ mode)
{
    SSL_SESSION *sess = NULL;
    result_t r = resume(server_ctx, sni, mode, NULL, &sess);

    ck_assert_int_eq(r.reused, 0);
    ck_assert_ptr_nonnull(sess);
    ck_assert_int_eq(SSL_SESSION_is_resumable(sess), 1);
    if (mode != MODE_TLS12_SESSION_ID)
        ck_assert_int_eq(SSL_SESSION_has_ticket(sess), 1);
    return sess;
}

static int resumed(SSL_CTX *server_ctx, const char *sni, mode_t_ mode, SSL_SESSION *offer)
{
    return resume(server_ctx, sni, mode, offer, NULL).reused;
}

START_TEST(test_resumption_within_a_certificate)
{
    gw_tls_t *t = new_default();
    SSL_CTX *front = gw_tls_listener_ctx(t);
    size_t i;

    for (i = 0; i != NUM_MODES; ++i) {
        mode_t_ mode = all_modes[i];
        SSL_SESSION *wild = new_session(front, "a.lizard.test", mode), *exact = new_session(front, "exact.other.test", mode);

        ck_assert_msg(resumed(front, "a.lizard.test", mode, wild), "%s: same name not resumed", mode_name(mode));
        /* another name of the same certificate */
        ck_assert_msg(resumed(front, "b.lizard.test", mode, wild), "%s: same certificate not resumed", mode_name(mode));
        ck_assert_msg(resumed(front, "exact.other.test", mode, exact), "%s: exact name not resumed", mode_name(mode));
        SSL_SESSION_free(wild);
        SSL_SESSION_free(exact);
    }
    gw_tls_free(t);
}
END_TEST

START_TEST(test_no_resumption_across_certificates)
{
    gw_tls_t *t = new_default();
    SSL_CTX *front = gw_tls_listener_ctx(t);
    size_t i;

    for (i = 0; i != NUM_MODES; ++i) {
        mode_t_ mode = all_modes[i];
        SSL_SESSION *wild = new_session(front, "a.lizard.test", mode), *exact = new_session(front, "exact.other.test", mode),
                    *fresh = NULL;
        result_t r;

        r = resume(front, "x.lizard.test", mode, exact, NULL);
        ck_assert_msg(!r.reused, "%s: a session of exact.other.test resumed under *.lizard.test", mode_name(mode));
        ck_assert_str_eq(r.cn, "wild-1");
        r = resume(front, NULL, mode, exact, NULL);
        ck_assert_msg(!r.reused, "%s: a session of exact.other.test resumed without SNI (default certificate)", mode_name(mode));
        r = resume(front, "exact.other.test", mode, wild, &fresh);
        ck_assert_msg(!r.reused, "%s: a session of *.lizard.test resumed under exact.other.test", mode_name(mode));
        ck_assert_str_eq(r.cn, "exact-1");
        ck_assert_msg(!resumed(front, "cnonly.test", mode, wild), "%s: resumed under cnonly.test", mode_name(mode));
        ck_assert_msg(!resumed(front, "unknown.example", mode, exact), "%s: resumed under the default", mode_name(mode));

        /* the full handshake that followed made a session of the right certificate */
        ck_assert_ptr_nonnull(fresh);
        ck_assert_msg(resumed(front, "exact.other.test", mode, fresh), "%s: the new session does not resume", mode_name(mode));
        SSL_SESSION_free(wild);
        SSL_SESSION_free(exact);
        SSL_SESSION_free(fresh);
    }
    gw_tls_free(t);
}
END_TEST

START_TEST(test_sessions_across_certificate_reload)
{
    gw_tls_cert_conf_t conf[] = {{path_of("live2.pem"), path_of("live2.key")}, {path_of("exact.pem"), path_of("exact.key")}};
    SSL_SESSION *sess[NUM_MODES];
    char *err = NULL;
    gw_tls_t *t;
    size_t i;

    copy_file("wild.pem", "live2.pem");
    copy_file("wild.key", "live2.key");
    t = gw_tls_new(conf, 2, &err);
    ck_assert_msg(t != NULL, "%s", err);
    for (i = 0; i != NUM_MODES; ++i)
        sess[i] = new_session(gw_tls_listener_ctx(t), "a.lizard.test", all_modes[i]);

    /* the same certificate reloaded: sessions still resume */
    ck_assert_msg(gw_tls_reload(t, &err) == 0, "%s", err);
    for (i = 0; i != NUM_MODES; ++i)
        ck_assert_msg(resumed(gw_tls_listener_ctx(t), "a.lizard.test", all_modes[i], sess[i]), "%s after a reload",
                      mode_name(all_modes[i]));

    /* another certificate under the same path: they do not */
    copy_file("wild2.pem", "live2.pem");
    copy_file("wild2.key", "live2.key");
    ck_assert_msg(gw_tls_reload(t, &err) == 0, "%s", err);
    for (i = 0; i != NUM_MODES; ++i) {
        result_t r = resume(gw_tls_listener_ctx(t), "a.lizard.test", all_modes[i], sess[i], NULL);
        ck_assert_msg(!r.reused, "%s: resumed under the replaced certificate", mode_name(all_modes[i]));
        ck_assert_str_eq(r.cn, "wild-2");
        SSL_SESSION_free(sess[i]);
    }
    gw_tls_free(t);
}
END_TEST

/* A random key of `len` (48 or 80) bytes: raw in `raw` and base64 in `b64`. */
static void random_key(size_t len, unsigned char *raw, char *b64)
{
    ck_assert_int_eq(RAND_bytes(raw, (int)len), 1);
    EVP_EncodeBlock((unsigned char *)b64, raw, (int)len);
}

static void write_file_mode(const char *file, const void *data, size_t len, mode_t mode)
{
    char tmp[600];
    FILE *fp;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path_of(file));
    fp = fopen(tmp, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(data, 1, len, fp), len);
    ck_assert_int_eq(fclose(fp), 0);
    ck_assert_int_eq(chmod(tmp, mode), 0);
    ck_assert_int_eq(rename(tmp, path_of(file)), 0);
}

static void write_keys(const char *file, const char *text)
{
    write_file_mode(file, text, strlen(text), 0600);
}

static gw_tls_t *new_with_keys(const char *file)
{
    gw_tls_t *t = new_default();
    char *err = NULL;

    ck_assert_msg(gw_tls_use_ticket_keys_file(t, path_of(file), &err) == 0, "%s", err);
    ck_assert_str_eq(gw_tls_ticket_keys_file(t), path_of(file));
    return t;
}

/* The key name a ticket was made with: its first 16 bytes. */
static int ticket_named(SSL_SESSION *sess, const unsigned char *name)
{
    const unsigned char *tick;
    size_t len;

    SSL_SESSION_get0_ticket(sess, &tick, &len);
    return len > 16 && memcmp(tick, name, 16) == 0;
}

START_TEST(test_tickets_shared_through_a_file)
{
    unsigned char k80[80], k48[48], other[80];
    char b80[120], b48[80], bother[120], text[400];
    gw_tls_t *a, *b, *c, *d;
    mode_t_ modes[] = {MODE_TLS12_TICKET, MODE_TLS13_TICKET};
    size_t i;

    random_key(80, k80, b80);
    random_key(48, k48, b48);
    random_key(80, other, bother);
    snprintf(text, sizeof(text), "# fleet ticket keys\n%s\n\n%s\n", b80, b48);
    write_keys("fleet.keys", text);
    snprintf(text, sizeof(text), "%s\n", bother);
    write_keys("other.keys", text);
    /* the 48-byte key first: AES-128 tickets */
    snprintf(text, sizeof(text), "  %s\r\n%s\n", b48, b80);
    write_keys("fleet48.keys", text);

    a = new_with_keys("fleet.keys");
    b = new_with_keys("fleet.keys");
    c = new_with_keys("other.keys");
    d = new_default(); /* random keys */
    ck_assert_uint_eq(gw_tls_ticket_keys_count(a), 2);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(d), 1);
    ck_assert_ptr_null(gw_tls_ticket_keys_file(d));

    for (i = 0; i != 2; ++i) {
        SSL_SESSION *sess = new_session(gw_tls_listener_ctx(a), "a.lizard.test", modes[i]);
        ck_assert(ticket_named(sess, k80));
        ck_assert_msg(resumed(gw_tls_listener_ctx(b), "a.lizard.test", modes[i], sess), "%s: not resumed on b",
                      mode_name(modes[i]));
        ck_assert_msg(!resumed(gw_tls_listener_ctx(c), "a.lizard.test", modes[i], sess), "%s: resumed with another file",
                      mode_name(modes[i]));
        ck_assert_msg(!resumed(gw_tls_listener_ctx(d), "a.lizard.test", modes[i], sess), "%s: resumed with random keys",
                      mode_name(modes[i]));
        /* a file ticket still does not cross certificates */
        ck_assert_msg(!resumed(gw_tls_listener_ctx(b), "exact.other.test", modes[i], sess), "%s: crossed certificates",
                      mode_name(modes[i]));
        SSL_SESSION_free(sess);

        /* random keys are the process's own */
        sess = new_session(gw_tls_listener_ctx(d), "a.lizard.test", modes[i]);
        ck_assert(resumed(gw_tls_listener_ctx(d), "a.lizard.test", modes[i], sess));
        ck_assert(!resumed(gw_tls_listener_ctx(a), "a.lizard.test", modes[i], sess));
        SSL_SESSION_free(sess);
    }
    gw_tls_free(a);
    gw_tls_free(b);
    gw_tls_free(c);
    gw_tls_free(d);

    a = new_with_keys("fleet48.keys");
    b = new_with_keys("fleet.keys");
    for (i = 0; i != 2; ++i) {
        SSL_SESSION *sess = new_session(gw_tls_listener_ctx(a), "a.lizard.test", modes[i]);
        ck_assert(ticket_named(sess, k48));
        ck_assert(resumed(gw_tls_listener_ctx(a), "a.lizard.test", modes[i], sess));
        /* b decrypts with its second key, and renews the ticket */
        ck_assert_msg(resumed(gw_tls_listener_ctx(b), "a.lizard.test", modes[i], sess), "%s: 48-byte key", mode_name(modes[i]));
        SSL_SESSION_free(sess);
    }
    gw_tls_free(a);
    gw_tls_free(b);
}
END_TEST

START_TEST(test_ticket_keys_reload)
{
    unsigned char k1[80], k2[80];
    char b1[120], b2[120], text[400], *err = NULL;
    SSL_SESSION *t1, *t2;
    gw_tls_t *t;
    SSL_CTX *front;

    random_key(80, k1, b1);
    random_key(80, k2, b2);
    snprintf(text, sizeof(text), "%s\n", b1);
    write_keys("rot.keys", text);
    t = new_with_keys("rot.keys");
    front = gw_tls_listener_ctx(t);
    t1 = new_session(front, "a.lizard.test", MODE_TLS12_TICKET);
    ck_assert(ticket_named(t1, k1));

    /* step 1: k2 encrypts, k1 still decrypts */
    snprintf(text, sizeof(text), "%s\n%s\n", b2, b1);
    write_keys("rot.keys", text);
    ck_assert_msg(gw_tls_reload_ticket_keys(t, &err) == 0, "%s", err);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 2);
    t2 = new_session(front, "a.lizard.test", MODE_TLS12_TICKET);
    ck_assert(ticket_named(t2, k2));
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t1));
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t2));

    /* a bad file: the keys stay */
    write_keys("rot.keys", "not a key\n");
    ck_assert_int_eq(gw_tls_reload_ticket_keys(t, &err), -1);
    ck_assert_msg(strstr(err, path_of("rot.keys")) != NULL && strstr(err, "line 1") != NULL, "%s", err);
    ck_assert_msg(strncmp(err, "tls: ticket keys: ", 18) == 0, "%s", err);
    free(err);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 2);
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t1));

    /* step 2: k1 is gone */
    snprintf(text, sizeof(text), "%s\n", b2);
    write_keys("rot.keys", text);
    ck_assert_msg(gw_tls_reload_ticket_keys(t, &err) == 0, "%s", err);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);
    ck_assert(!resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t1));
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, t2));
    ck_assert(!resumed(front, "a.lizard.test", MODE_TLS13_TICKET, t1));

    SSL_SESSION_free(t1);
    SSL_SESSION_free(t2);
    gw_tls_free(t);
}
END_TEST

/* Checks that `sess`'s ticket was made with AES key `aes` and HMAC key `hmac`
 * (name | IV | AES-CBC ciphertext | HMAC-SHA256 of what precedes), i.e. that
 * the file layout was read as HAProxy and nginx read it. */
static void assert_ticket_made_with(SSL_SESSION *sess, const unsigned char *name, const unsigned char *aes,
                                    const unsigned char *hmac, size_t key_len)
{
    const unsigned char *tick;
    unsigned char mac[32], plain[4096];
    size_t len, mac_len = 0;
    int outl = 0, finl = 0;
    EVP_CIPHER_CTX *cctx;

    SSL_SESSION_get0_ticket(sess, &tick, &len);
    ck_assert_uint_gt(len, 16 + 16 + 32);
    ck_assert_uint_lt(len, sizeof(plain));
    ck_assert(memcmp(tick, name, 16) == 0);
    ck_assert_ptr_nonnull(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, hmac, key_len, tick, len - 32, mac, sizeof(mac), &mac_len));
    ck_assert_uint_eq(mac_len, 32);
    ck_assert_msg(memcmp(mac, tick + len - 32, 32) == 0, "the ticket's HMAC is not made with the expected key");
    cctx = EVP_CIPHER_CTX_new();
    ck_assert_int_eq(EVP_DecryptInit_ex(cctx, key_len == 32 ? EVP_aes_256_cbc() : EVP_aes_128_cbc(), NULL, aes, tick + 16), 1);
    ck_assert_int_eq(EVP_DecryptUpdate(cctx, plain, &outl, tick + 32, (int)(len - 64)), 1);
    ck_assert_msg(EVP_DecryptFinal_ex(cctx, plain + outl, &finl) == 1, "the ticket is not encrypted with the expected key");
    EVP_CIPHER_CTX_free(cctx);
}

START_TEST(test_ticket_key_layouts)
{
    unsigned char k80[80], k48[48];
    char b80[120], b48[80], text[300];
    SSL_SESSION *sess;
    gw_tls_t *t;

    random_key(80, k80, b80);
    random_key(48, k48, b48);

    /* HAProxy's lines: name, AES key, HMAC key */
    snprintf(text, sizeof(text), "%s\n", b80);
    write_keys("haproxy80.keys", text);
    t = new_with_keys("haproxy80.keys");
    sess = new_session(gw_tls_listener_ctx(t), "a.lizard.test", MODE_TLS12_TICKET);
    assert_ticket_made_with(sess, k80, k80 + 16, k80 + 48, 32);
    SSL_SESSION_free(sess);
    gw_tls_free(t);

    snprintf(text, sizeof(text), "%s\n", b48);
    write_keys("haproxy48.keys", text);
    t = new_with_keys("haproxy48.keys");
    sess = new_session(gw_tls_listener_ctx(t), "a.lizard.test", MODE_TLS12_TICKET);
    assert_ticket_made_with(sess, k48, k48 + 16, k48 + 32, 16);
    SSL_SESSION_free(sess);
    gw_tls_free(t);

    /* nginx's raw files: 80 bytes are name, HMAC key, AES key; 48 bytes as HAProxy.
     * A random key is text by chance with a negligible probability: make sure. */
    k80[16] = 0;
    k48[16] = 0;
    write_file_mode("nginx80.key", k80, 80, 0600);
    t = new_with_keys("nginx80.key");
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);
    sess = new_session(gw_tls_listener_ctx(t), "a.lizard.test", MODE_TLS12_TICKET);
    assert_ticket_made_with(sess, k80, k80 + 48, k80 + 16, 32);
    SSL_SESSION_free(sess);
    gw_tls_free(t);

    write_file_mode("nginx48.key", k48, 48, 0640);
    t = new_with_keys("nginx48.key");
    sess = new_session(gw_tls_listener_ctx(t), "a.lizard.test", MODE_TLS13_TICKET);
    assert_ticket_made_with(sess, k48, k48 + 16, k48 + 32, 16);
    SSL_SESSION_free(sess);
    gw_tls_free(t);
}
END_TEST

START_TEST(test_ticket_keys_file_errors)
{
    static const struct {
        const char *file;
        const char *text; /* NULL: see below */
        mode_t mode;
        const char *why;
    } cases[] = {
        {"none.keys", NULL, 0, "No such file"},
        {"empty.keys", "", 0600, "holds no key"},
        {"comments.keys", "# nothing yet\n\n   \n", 0600, "holds no key"},
        {"short.keys", "VGhpcyBpcyBub3QgYSBrZXkgb2YgNDggYnl0ZXMsIGJ1dCA0NyBieXRlcyBsb24=\n", 0600,
         "line 1: the key is 47 bytes long, expected 48 or 80"},
        {"garbage.keys", "# first\nthis is not base64!\n", 0600, "line 2: not a base64 key"},
        {"open.keys", "x\n", 0644, "readable or writable by others (mode 0644)"},
        {"binary.keys", "\x01\x02\x03\x04\x05\xff", 0600, "not text"},
    };
    unsigned char raw[80];
    char b64[120], text[4096], *err = NULL;
    size_t i, off;

    for (i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        if (cases[i].text != NULL)
            write_file_mode(cases[i].file, cases[i].text, strlen(cases[i].text), cases[i].mode);
        ck_assert_int_eq(gw_tls_ticket_keys_check(path_of(cases[i].file), &err), -1);
        ck_assert_msg(strstr(err, path_of(cases[i].file)) != NULL && strstr(err, cases[i].why) != NULL, "%s: %s", cases[i].file,
                      err);
        free(err);
    }

    /* too many keys; the same name twice; a directory */
    for (i = 0, off = 0; i != 17; ++i) {
        random_key(80, raw, b64);
        off += (size_t)snprintf(text + off, sizeof(text) - off, "%s\n", b64);
    }
    write_keys("many.keys", text);
    ck_assert_int_eq(gw_tls_ticket_keys_check(path_of("many.keys"), &err), -1);
    ck_assert_msg(strstr(err, "line 17: more than 16 keys") != NULL, "%s", err);
    free(err);

    random_key(80, raw, b64);
    snprintf(text, sizeof(text), "%s\n# again\n%s\n", b64, b64);
    write_keys("twice.keys", text);
    ck_assert_int_eq(gw_tls_ticket_keys_check(path_of("twice.keys"), &err), -1);
    ck_assert_msg(strstr(err, "line 3: the same key name") != NULL && strstr(err, "line 1") != NULL, "%s", err);
    /* never a key byte in a message */
    ck_assert_msg(strstr(err, b64) == NULL && strstr(err, "==") == NULL, "%s", err);
    free(err);

    ck_assert_int_eq(gw_tls_ticket_keys_check(dir, &err), -1);
    ck_assert_msg(strstr(err, "not a regular file") != NULL, "%s", err);
    free(err);

    /* the good ones pass */
    snprintf(text, sizeof(text), "%s\n", b64);
    write_keys("good.keys", text);
    ck_assert_msg(gw_tls_ticket_keys_check(path_of("good.keys"), &err) == 0, "%s", err);

    /* gw_tls_use_ticket_keys_file refuses a bad file and keeps random keys */
    {
        gw_tls_t *t = new_default();
        ck_assert_int_eq(gw_tls_use_ticket_keys_file(t, path_of("open.keys"), &err), -1);
        ck_assert_msg(strstr(err, "tls: ticket keys: ") == err && strstr(err, path_of("open.keys")) != NULL, "%s", err);
        free(err);
        ck_assert_ptr_null(gw_tls_ticket_keys_file(t));
        ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);
        ck_assert_int_eq(gw_tls_reload_ticket_keys(t, &err), 0); /* no file: nothing to do */
        gw_tls_free(t);
    }
}
END_TEST

START_TEST(test_random_keys_rotate)
{
    /* 2 s between rotations: the assertions need the steps below to take
     * well under one interval each, on a shared 2-core machine (x10 margin
     * over what they take idle). */
    const unsigned interval_ms = 2000;
    gw_tls_t *t = new_default();
    SSL_CTX *front = gw_tls_listener_ctx(t);
    SSL_SESSION *s0, *s1;
    const unsigned char *tick0, *tick1;
    size_t len0, len1;

    gw_tls_set_ticket_rotation(t, interval_ms);
    s0 = new_session(front, "a.lizard.test", MODE_TLS12_TICKET);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, s0));

    /* one interval later: a new key encrypts, the previous one decrypts */
    usleep((interval_ms + 200) * 1000);
    s1 = new_session(front, "a.lizard.test", MODE_TLS12_TICKET);
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 2);
    SSL_SESSION_get0_ticket(s0, &tick0, &len0);
    SSL_SESSION_get0_ticket(s1, &tick1, &len1);
    ck_assert_msg(memcmp(tick0, tick1, 16) != 0, "no new key after the rotation interval");
    ck_assert(resumed(front, "a.lizard.test", MODE_TLS12_TICKET, s0));

    /* two more intervals: the first key is gone, also without a handshake in between */
    usleep((2 * interval_ms + 200) * 1000);
    ck_assert(!resumed(front, "a.lizard.test", MODE_TLS12_TICKET, s0));
    ck_assert_uint_eq(gw_tls_ticket_keys_count(t), 1);

    SSL_SESSION_free(s0);
    SSL_SESSION_free(s1);
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
    tcase_add_test(tc, test_resumption_within_a_certificate);
    tcase_add_test(tc, test_no_resumption_across_certificates);
    tcase_add_test(tc, test_sessions_across_certificate_reload);
    tcase_add_test(tc, test_tickets_shared_through_a_file);
    tcase_add_test(tc, test_ticket_keys_reload);
    tcase_add_test(tc, test_ticket_key_layouts);
    tcase_add_test(tc, test_ticket_keys_file_errors);
    tcase_add_test(tc, test_random_keys_rotate);
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
