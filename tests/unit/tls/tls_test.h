/*
 * What the tls/ tests share: a test CA and leaf certificates made with the
 * openssl CLI in a temporary directory, in-memory handshakes (SNI, ALPN,
 * protocol versions, resumption modes) and the suite runner.
 */
#ifndef GW_TESTS_UNIT_TLS_TLS_TEST_H
#define GW_TESTS_UNIT_TLS_TLS_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <check.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include "tls/tls.h"

static char dir[] = "/tmp/gw-tls-test-XXXXXX";

static inline const char *path_of(const char *file)
{
    static char bufs[64][512];
    static unsigned next;
    char *buf = bufs[next++ % 64];

    snprintf(buf, sizeof(bufs[0]), "%s/%s", dir, file);
    return buf;
}

static inline int run(const char *cmd)
{
    char full[2048];

    snprintf(full, sizeof(full), "cd %s && { %s; } >/dev/null 2>&1", dir, cmd);
    return system(full);
}

static inline void write_text(const char *file, const char *text)
{
    FILE *fp = fopen(path_of(file), "w");

    if (fp == NULL || fputs(text, fp) < 0 || fclose(fp) != 0) {
        perror(file);
        exit(2);
    }
}

static inline void copy_file(const char *from, const char *to)
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
static inline void make_leaf(const char *name, const char *cn, const char *ext)
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

static inline void make_certificates(void)
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

static inline const char *mode_name(mode_t_ mode)
{
    return mode == MODE_TLS12_SESSION_ID ? "TLS 1.2 session ID" : mode == MODE_TLS12_TICKET ? "TLS 1.2 ticket" : "TLS 1.3 ticket";
}

/* One in-memory handshake: a client with ALPN `alpn` (wire format) and
 * `sni` (NULL: none) against a server SSL made from `server_ctx`. With a
 * mode, the client offers `offer` (NULL: none) and returns in *out (when not
 * NULL) the session it can resume next time, tickets included. */
static inline result_t handshake_ex(SSL_CTX *server_ctx, const char *sni, const char *alpn, int max_version, mode_t_ mode,
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

static inline result_t handshake_full(SSL_CTX *server_ctx, const char *sni, const char *alpn, int max_version)
{
    return handshake_ex(server_ctx, sni, alpn, max_version, MODE_NONE, NULL, NULL);
}

/* A handshake in `mode` offering `offer`; the next session in *out (NULL:
 * not wanted). */
static inline result_t resume(SSL_CTX *server_ctx, const char *sni, mode_t_ mode, SSL_SESSION *offer, SSL_SESSION **out)
{
    result_t r = handshake_ex(server_ctx, sni, "\x02h2\x08http/1.1", 0, mode, offer, out);

    ck_assert_msg(r.ok, "%s handshake with %s failed", mode_name(mode), sni != NULL ? sni : "(no SNI)");
    return r;
}

static inline result_t handshake(SSL_CTX *server_ctx, const char *sni)
{
    return handshake_full(server_ctx, sni, "\x02h2\x08http/1.1", 0);
}

static inline gw_tls_t *new_default(void)
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

/* A new session (not a resumption) for `sni` in `mode`. */
static inline SSL_SESSION *new_session(SSL_CTX *server_ctx, const char *sni, mode_t_ mode)
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

static inline int resumed(SSL_CTX *server_ctx, const char *sni, mode_t_ mode, SSL_SESSION *offer)
{
    return resume(server_ctx, sni, mode, offer, NULL).reused;
}

/* Makes the certificates, runs `s`, removes the directory; the exit status. */
static inline int run_suite(Suite *s)
{
    SRunner *sr;
    int failed;
    char cmd[128];

    make_certificates();
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return failed == 0 ? 0 : 1;
}

#endif
