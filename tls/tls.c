/*
 * TLS for the listeners: one SSL_CTX per certificate behind a front SSL_CTX
 * whose ClientHello callback switches each handshake to the matching
 * certificate (exact name, then wildcard, else the first) before OpenSSL
 * looks for a session to resume, so that a session never crosses
 * certificates. Session tickets come from one key list shared by every
 * context: a file (fleet-wide) or random keys rotated on time. A reload builds
 * a new set and swaps it in; the front context handed to the listeners never
 * changes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <h2o/socket.h>
#include <h2o/string_.h>
#include "common/secret_file.h"
#include "tls/ticket_keys.h"
#include "tls/tls.h"
#include "tls/cert_fetch.h"
#include "tls/tls_internal.h"
#include "common/errfmt.h"
#include "tls/ptls.h"

/* Mozilla "intermediate" for TLS 1.2. TLS 1.3: OpenSSL's suites in Mozilla's
 * order, AES-128-GCM first: OpenSSL's own puts AES-256-GCM-SHA384 first, and
 * with the server's preference that is 14 AES rounds per block and an
 * HKDF over SHA-384 (no SHA extensions) in every handshake; ChaCha20 is
 * still chosen for a client that prefers it (SSL_OP_PRIORITIZE_CHACHA). */
#define TLS12_CIPHERS                                                                                                              \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"         \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384"
#define TLS13_CIPHERSUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define FRONT_SESSION_ID_CONTEXT "lizard-gateway" /* replaced by the certificate's at the switch */

/* What the listeners offer, in order of preference. h2o's own
 * h2o_http2_alpn_protocols lacks http/1.1 and carries old h2 drafts. */
static const h2o_iovec_t alpn_protocols[] = {{H2O_STRLIT("h2")}, {H2O_STRLIT("http/1.1")}, {NULL, 0}};

typedef struct st_gw_tls_cert_t {
    SSL_CTX *ctx; /* its certificate's names are matched with X509_check_host */
} gw_tls_cert_t;

/* One generation of certificates; certs[0] is the default. */
typedef struct st_gw_tls_set_t {
    gw_tls_cert_t *certs;
    size_t num_certs;
} gw_tls_set_t;

struct st_gw_tls_t {
    SSL_CTX *front;
    /* Readers (the ClientHello callback, any thread) hold it while they look at `set`
     * and take their own reference on the SSL_CTX they pick; a reload swaps
     * `set` under the write lock. So once the swap is done no handshake can
     * reach the old set, and the old SSL_CTXs live on, through OpenSSL's
     * reference counts, exactly as long as connections use them. */
    pthread_rwlock_t lock;
    gw_tls_set_t *set;
    pthread_mutex_t reload_mutex; /* one reload at a time */
    gw_tls_cert_conf_t *conf;     /* owned copies of the paths */
    size_t num_conf;

    gw_ticket_keys_t *tickets; /* the session ticket keys, shared by every SSL_CTX of t (ticket_keys.h) */

    gw_dyncert_t *dynamic; /* custom-domain certificates (tls/dyncert.h); NULL: off; set once before any handshake */
};

static pthread_once_t ex_index_once = PTHREAD_ONCE_INIT;
static int ex_index = -1; /* SSL_CTX ex_data slot holding the gw_tls_t; set once */

static void init_ex_index(void)
{
    ex_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* The reason of OpenSSL's last error, and an empty queue afterwards. */
static const char *openssl_reason(char *buf, size_t size)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;

    snprintf(buf, size, "%s", reason != NULL ? reason : "unknown error");
    ERR_clear_error();
    return buf;
}

static int on_ticket_key(SSL *ssl, unsigned char key_name[GW_TICKET_KEY_NAME_LEN], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                         EVP_MAC_CTX *hctx, int enc);

/* Acknowledges the server name: the context was already chosen from the
 * ClientHello. Without an OK here OpenSSL would not echo SNI in TLS 1.2 nor
 * keep the name in the session. */
static int on_servername(SSL *ssl, int *alert, void *arg)
{
    (void)ssl;
    (void)alert;
    (void)arg;
    return SSL_TLSEXT_ERR_OK;
}

/* An SSL_CTX with everything but the certificate: every context gets the
 * same protocol settings, since after the switch OpenSSL reads some of them
 * (ALPN, certificate, session-id context) from the switched context, and the
 * ticket callback, which OpenSSL takes from the front one. */
SSL_CTX *gw_tls_new_cert_ctx(gw_tls_t *t)
{
    SSL_CTX *ctx;

    if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
        return NULL;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 || SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1 ||
        SSL_CTX_set_ciphersuites(ctx, TLS13_CIPHERSUITES) != 1 ||
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)FRONT_SESSION_ID_CONTEXT,
                                       sizeof(FRONT_SESSION_ID_CONTEXT) - 1) != 1 ||
        SSL_CTX_set_ex_data(ctx, ex_index, t) != 1 || SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, on_ticket_key) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA |
                                 SSL_OP_NO_RENEGOTIATION);
    /* an idle connection (a wss:// tunnel) holds no 16 KiB record buffers; HAProxy does the same */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_set_tlsext_servername_callback(ctx, on_servername);
    h2o_ssl_register_alpn_protocols(ctx, alpn_protocols);
    return ctx;
}

/* The session-id context of a certificate: SHA-256 of its DER (nginx does
 * the same), so that a session made under one certificate is a cache miss
 * under any other, for session IDs and tickets alike, and a renewed
 * certificate starts fresh. */
int gw_tls_set_cert_session_id_context(SSL_CTX *ctx)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    X509 *x = SSL_CTX_get0_certificate(ctx);

    if (x == NULL || X509_digest(x, EVP_sha256(), md, &md_len) != 1 || md_len > SSL_MAX_SID_CTX_LENGTH)
        return -1;
    return SSL_CTX_set_session_id_context(ctx, md, md_len) == 1 ? 0 : -1;
}

int gw_tls_attach_picotls(SSL_CTX *ctx)
{
    gw_tls_t *t = SSL_CTX_get_ex_data(ctx, ex_index);

    if (!gw_ptls_enabled())
        return 0;
    return t != NULL ? gw_ptls_attach(ctx, t->tickets, NULL, NULL) : -1;
}

static int check_readable(const char *path, char **err)
{
    FILE *fp;

    if ((fp = fopen(path, "r")) == NULL)
        return gw_errorf(err, "tls: %s: %s", path, strerror(errno));
    fclose(fp);
    return 0;
}

/* Loads the chain and the key into ctx and checks that they belong together. */
static int load_pair(SSL_CTX *ctx, const char *cert, const char *key, char **err)
{
    char reason[256];
    unsigned long e;

    if (check_readable(cert, err) != 0 || check_readable(key, err) != 0)
        return -1;
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        return gw_errorf(err, "tls: %s: cannot load the certificate chain (%s)", cert, openssl_reason(reason, sizeof(reason)));
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        e = ERR_peek_last_error();
        if (ERR_GET_LIB(e) == ERR_LIB_X509 &&
            (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH || ERR_GET_REASON(e) == X509_R_KEY_TYPE_MISMATCH)) {
            ERR_clear_error();
            return gw_errorf(err, "tls: %s: the private key does not match the certificate in %s", key, cert);
        }
        return gw_errorf(err, "tls: %s: cannot load the private key (%s)", key, openssl_reason(reason, sizeof(reason)));
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        return gw_errorf(err, "tls: %s: the private key does not match the certificate in %s", key, cert);
    }
    return 0;
}

static void free_set(gw_tls_set_t *set)
{
    size_t i;

    if (set == NULL)
        return;
    for (i = 0; i != set->num_certs; ++i)
        SSL_CTX_free(set->certs[i].ctx);
    free(set->certs);
    free(set);
}

static gw_tls_set_t *load_set(gw_tls_t *t, char **err)
{
    const gw_tls_cert_conf_t *conf = t->conf;
    size_t num = t->num_conf;
    gw_tls_set_t *set;
    size_t i;

    if ((set = calloc(1, sizeof(*set))) == NULL || (set->certs = calloc(num, sizeof(set->certs[0]))) == NULL) {
        gw_errorf(err, "tls: out of memory");
        goto Error;
    }
    for (i = 0; i != num; ++i) {
        gw_tls_cert_t *c = &set->certs[i];
        set->num_certs = i + 1;
        if ((c->ctx = gw_tls_new_cert_ctx(t)) == NULL) {
            gw_errorf(err, "tls: cannot create an SSL_CTX");
            goto Error;
        }
        if (load_pair(c->ctx, conf[i].cert, conf[i].key, err) != 0)
            goto Error;
        if (gw_tls_set_cert_session_id_context(c->ctx) != 0) {
            ERR_clear_error();
            gw_errorf(err, "tls: %s: cannot derive a session-id context from the certificate", conf[i].cert);
            goto Error;
        }
        if (gw_tls_attach_picotls(c->ctx) != 0) {
            gw_errorf(err, "tls: %s: picotls cannot use this certificate and key (TLS 1.3)", conf[i].cert);
            goto Error;
        }
    }
    return set;

Error:
    free_set(set);
    return NULL;
}

int gw_tls_cert_serves(X509 *x, h2o_iovec_t name, int wildcards)
{
    unsigned flags = X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | (wildcards ? 0 : X509_CHECK_FLAG_NO_WILDCARDS);

    /* X509_check_host reads a leading dot as "any subdomain of": not a host name, and neither is a
     * name with a trailing dot (RFC 6066 3) */
    if (x == NULL || name.len == 0 || name.base[0] == '.' || name.base[name.len - 1] == '.')
        return 0;
    return X509_check_host(x, name.base, name.len, flags, NULL) == 1;
}

/* The certificate for `name`: an exact name in any certificate beats a
 * wildcard in an earlier one; NULL when none serves it (the first is then
 * the default, unless the name is a custom domain's). */
static const gw_tls_cert_t *pick(const gw_tls_set_t *set, h2o_iovec_t name)
{
    size_t i;
    int wildcards;

    for (wildcards = 0; wildcards <= 1; ++wildcards)
        for (i = 0; i != set->num_certs; ++i)
            if (gw_tls_cert_serves(SSL_CTX_get0_certificate(set->certs[i].ctx), name, wildcards))
                return &set->certs[i];
    return NULL;
}

/* 1 when `name` goes to the custom-domain certificates: no static one serves it and it is not a preview host. */
static int is_dynamic(gw_tls_t *t, h2o_iovec_t name)
{
    char lower[GW_DYNCERT_MAX_NAME + 1];

    if (t->dynamic == NULL || name.base == NULL)
        return 0;
    if (name.len > GW_DYNCERT_MAX_NAME)
        return 1; /* not a host name: refused there */
    memcpy(lower, name.base, name.len);
    h2o_strtolower(lower, name.len);
    return gw_dyncert_is_custom(t->dynamic, lower, name.len);
}

int gw_tls_is_custom_name(gw_tls_t *t, h2o_iovec_t name)
{
    int custom;

    if (!is_dynamic(t, name))
        return 0;
    pthread_rwlock_rdlock(&t->lock);
    custom = pick(t->set, name) == NULL;
    pthread_rwlock_unlock(&t->lock);
    return custom;
}

/* The host_name of the ClientHello's server_name extension; base NULL when
 * there is none or it is malformed (OpenSSL refuses a malformed one later;
 * until then the default certificate is as good as any). */
static h2o_iovec_t client_hello_sni(SSL *ssl)
{
    const unsigned char *p, *end;
    size_t len, name_len;

    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) != 1 || len < 2 ||
        (((size_t)p[0] << 8) | p[1]) != len - 2)
        return h2o_iovec_init(NULL, 0);
    end = p + len;
    p += 2;
    while (end - p >= 3) {
        unsigned type = p[0];
        name_len = ((size_t)p[1] << 8) | p[2];
        p += 3;
        if (name_len > (size_t)(end - p))
            break;
        if (type == TLSEXT_NAMETYPE_host_name) {
            if (name_len == 0 || name_len > TLSEXT_MAXLEN_host_name || memchr(p, '\0', name_len) != NULL)
                break;
            return h2o_iovec_init(p, name_len);
        }
        p += name_len;
    }
    return h2o_iovec_init(NULL, 0);
}

/* The certificate's SSL_CTX for the SNI `name` (base NULL: none sent), with a
 * reference for the caller, from the current set (after a reload too), or a
 * custom domain's; NULL when a custom name has none (refused). OpenSSL's and
 * picotls's client-hello callbacks alike. */
static SSL_CTX *choose(void *data, h2o_iovec_t name)
{
    gw_tls_t *t = data;
    const gw_tls_cert_t *c;
    SSL_CTX *ctx;

    pthread_rwlock_rdlock(&t->lock);
    /* one static certificate serves every name but a custom domain's, matching or not: no
     * X509_check_host for it (half the callback's cost per handshake) */
    c = name.base != NULL && (t->set->num_certs != 1 || is_dynamic(t, name)) ? pick(t->set, name) : NULL;
    if (c == NULL && is_dynamic(t, name)) {
        pthread_rwlock_unlock(&t->lock);
        return gw_cert_fetch_choose(t->dynamic, name);
    }
    ctx = (c != NULL ? c : &t->set->certs[0])->ctx;
    SSL_CTX_up_ref(ctx);
    pthread_rwlock_unlock(&t->lock);
    return ctx;
}

/* Runs for every ClientHello OpenSSL handles (TLS 1.2; TLS 1.3 too without
 * picotls), with or without SNI, before OpenSSL looks for a session to
 * resume: the switch brings the certificate's session-id context, so a
 * session of another certificate is a miss (the servername callback would
 * run after the lookup). */
static int on_client_hello(SSL *ssl, int *alert, void *arg)
{
    SSL_CTX *ctx = choose(arg, client_hello_sni(ssl));
    int rc = SSL_CLIENT_HELLO_SUCCESS;

    if (ctx == NULL) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_CLIENT_HELLO_ERROR;
    }
    /* our reference keeps ctx alive even if a reload freed the set meanwhile */
    if (SSL_set_SSL_CTX(ssl, ctx) == NULL) {
        *alert = SSL_AD_INTERNAL_ERROR;
        rc = SSL_CLIENT_HELLO_ERROR;
    }
    SSL_CTX_free(ctx);
    return rc;
}

/* OpenSSL's ticket callback; it takes the front context's, on every handshake. */
static int on_ticket_key(SSL *ssl, unsigned char key_name[GW_TICKET_KEY_NAME_LEN], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                         EVP_MAC_CTX *hctx, int enc)
{
    gw_tls_t *t = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ex_index);

    if (t == NULL)
        return enc ? -1 : 0;
    int rc = gw_ticket_keys_cb(t->tickets, key_name, iv, cctx, hctx, enc);
    /* A TLS 1.3 client uses a ticket once (RFC 8446, appendix C.4; OpenSSL's
     * client does not offer a used one again): a resumption that issued none
     * left it without a ticket, and its next connection was a full handshake
     * (every other reconnect). 2 asks OpenSSL for a fresh ticket, one per
     * resumption, as its built-in keys give. TLS 1.2 tickets stay reusable. */
    if (!enc && rc == 1 && SSL_version(ssl) == TLS1_3_VERSION)
        rc = 2;
    return rc;
}

int gw_tls_ticket_keys_check(const char *path, char **err)
{
    return gw_ticket_keys_check(path, err);
}

int gw_tls_use_ticket_keys_file(gw_tls_t *t, const char *path, char **err)
{
    return gw_ticket_keys_use_file(t->tickets, path, err);
}

int gw_tls_reload_ticket_keys(gw_tls_t *t, char **err)
{
    return gw_ticket_keys_reload(t->tickets, err);
}

const char *gw_tls_ticket_keys_file(gw_tls_t *t)
{
    return gw_ticket_keys_file(t->tickets);
}

size_t gw_tls_ticket_keys_count(gw_tls_t *t)
{
    return gw_ticket_keys_count(t->tickets);
}

void gw_tls_set_ticket_rotation(gw_tls_t *t, uint64_t interval_ms)
{
    gw_ticket_keys_set_rotation(t->tickets, interval_ms);
}

gw_tls_t *gw_tls_new(const gw_tls_cert_conf_t *certs, size_t num, char **err)
{
    gw_tls_t *t;
    size_t i;

    *err = NULL;
    if (num == 0) {
        gw_errorf(err, "tls: no certificate configured");
        return NULL;
    }
    if ((t = calloc(1, sizeof(*t))) == NULL) {
        gw_errorf(err, "tls: out of memory");
        return NULL;
    }
    pthread_rwlock_init(&t->lock, NULL);
    pthread_mutex_init(&t->reload_mutex, NULL);
    pthread_once(&ex_index_once, init_ex_index);
    if (ex_index < 0) {
        gw_errorf(err, "tls: cannot get an SSL_CTX ex_data index");
        goto Error;
    }
    if ((t->tickets = gw_ticket_keys_new(GW_TLS_TICKET_ROTATION_MS, err)) == NULL)
        goto Error;
    if ((t->conf = calloc(num, sizeof(t->conf[0]))) == NULL) {
        gw_errorf(err, "tls: out of memory");
        goto Error;
    }
    for (i = 0; i != num; ++i) {
        t->num_conf = i + 1;
        if ((t->conf[i].cert = strdup(certs[i].cert)) == NULL || (t->conf[i].key = strdup(certs[i].key)) == NULL) {
            gw_errorf(err, "tls: out of memory");
            goto Error;
        }
    }
    if ((t->set = load_set(t, err)) == NULL)
        goto Error;

    /* The front context carries the default certificate too: it is what
     * the listener starts every handshake with. It also holds the session
     * cache (OpenSSL keeps using the first context's), which is why the
     * session-id context of the certificate, not the cache, keeps sessions
     * apart. */
    if ((t->front = gw_tls_new_cert_ctx(t)) == NULL) {
        gw_errorf(err, "tls: cannot create an SSL_CTX");
        goto Error;
    }
    if (load_pair(t->front, t->conf[0].cert, t->conf[0].key, err) != 0)
        goto Error;
    SSL_CTX_set_client_hello_cb(t->front, on_client_hello, t);
    /* TLS 1.3 by picotls: the front's context takes every such handshake and switches to the certificate's (ptls.h) */
    if (gw_ptls_enabled() && gw_ptls_attach(t->front, t->tickets, choose, t) != 0) {
        gw_errorf(err, "tls: %s: picotls cannot use this certificate and key (TLS 1.3)", t->conf[0].cert);
        goto Error;
    }
    return t;

Error:
    gw_tls_free(t);
    return NULL;
}

SSL_CTX *gw_tls_listener_ctx(gw_tls_t *t)
{
    return t->front;
}

int gw_tls_reload(gw_tls_t *t, char **err)
{
    gw_tls_set_t *fresh, *old;

    *err = NULL;
    pthread_mutex_lock(&t->reload_mutex);
    if ((fresh = load_set(t, err)) == NULL) {
        pthread_mutex_unlock(&t->reload_mutex);
        return -1;
    }
    pthread_rwlock_wrlock(&t->lock);
    old = t->set;
    t->set = fresh;
    pthread_rwlock_unlock(&t->lock);
    pthread_mutex_unlock(&t->reload_mutex);

    /* no callback can reach `old` now; connections keep their own SSL_CTX refs */
    free_set(old);
    return 0;
}

void gw_tls_free(gw_tls_t *t)
{
    size_t i;

    if (t == NULL)
        return;
    SSL_CTX_free(t->front);
    free_set(t->set);
    gw_dyncert_free(t->dynamic);
    for (i = 0; i != t->num_conf; ++i) {
        free((char *)t->conf[i].cert);
        free((char *)t->conf[i].key);
    }
    free(t->conf);
    gw_ticket_keys_free(t->tickets);
    pthread_mutex_destroy(&t->reload_mutex);
    pthread_rwlock_destroy(&t->lock);
    free(t);
}

void gw_tls_enable_dynamic(gw_tls_t *t, const gw_dyncert_conf_t *conf)
{
    t->dynamic = gw_dyncert_new(t, conf);
}

gw_dyncert_t *gw_tls_dynamic(gw_tls_t *t)
{
    return t != NULL ? t->dynamic : NULL;
}
