/*
 * TLS for the listeners: one SSL_CTX per certificate behind a front SSL_CTX
 * whose SNI callback switches each handshake to the matching certificate
 * (exact name, then wildcard, else the first). A reload builds a new set and
 * swaps it in; the front context handed to the listeners never changes.
 */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <h2o/socket.h>
#include "tls/tls.h"

/* Mozilla "intermediate" for TLS 1.2; TLS 1.3 suites are OpenSSL's defaults. */
#define TLS12_CIPHERS                                                                                                              \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"         \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384"
#define SESSION_ID_CONTEXT "lizard-gateway"
#define MAX_NAMES_PER_CERT 1024

/* What the listeners offer, in order of preference. h2o's own
 * h2o_http2_alpn_protocols lacks http/1.1 and carries old h2 drafts. */
static const h2o_iovec_t alpn_protocols[] = {{H2O_STRLIT("h2")}, {H2O_STRLIT("http/1.1")}, {NULL, 0}};

typedef struct st_gw_tls_cert_t {
    SSL_CTX *ctx;
    char **names; /* lowercase DNS SANs, or the CN when there is no DNS SAN */
    size_t num_names;
} gw_tls_cert_t;

/* One generation of certificates; certs[0] is the default. */
typedef struct st_gw_tls_set_t {
    gw_tls_cert_t *certs;
    size_t num_certs;
} gw_tls_set_t;

struct st_gw_tls_t {
    SSL_CTX *front;
    /* Readers (the SNI callback, any thread) hold it while they look at `set`
     * and take their own reference on the SSL_CTX they pick; a reload swaps
     * `set` under the write lock. So once the swap is done no handshake can
     * reach the old set, and the old SSL_CTXs live on, through OpenSSL's
     * reference counts, exactly as long as connections use them. */
    pthread_rwlock_t lock;
    gw_tls_set_t *set;
    pthread_mutex_t reload_mutex; /* one reload at a time */
    gw_tls_cert_conf_t *conf;     /* owned copies of the paths */
    size_t num_conf;
};

static int fail(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(char **err, const char *fmt, ...)
{
    char msg[1024];
    va_list args;

    va_start(args, fmt);
    vsnprintf(msg, sizeof(msg), fmt, args);
    va_end(args);
    *err = strdup(msg);
    return -1;
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

static int lower_equals(const char *a, const char *b, size_t len)
{
    size_t i;

    for (i = 0; i != len; ++i) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x >= 'A' && x <= 'Z')
            x += 'a' - 'A';
        if (y >= 'A' && y <= 'Z')
            y += 'a' - 'A';
        if (x != y)
            return 0;
    }
    return 1;
}

static int is_wildcard(h2o_iovec_t pattern)
{
    return pattern.len > 2 && pattern.base[0] == '*' && pattern.base[1] == '.';
}

int gw_tls_name_matches(h2o_iovec_t pattern, h2o_iovec_t name)
{
    size_t label_len;

    if (!is_wildcard(pattern))
        return pattern.len == name.len && pattern.len != 0 && lower_equals(pattern.base, name.base, name.len);

    /* "*.example.com": one non-empty label, then ".example.com" */
    if (name.len <= pattern.len - 1)
        return 0;
    label_len = name.len - (pattern.len - 1);
    if (memchr(name.base, '.', label_len) != NULL)
        return 0;
    return lower_equals(pattern.base + 1, name.base + label_len, pattern.len - 1);
}

/* An SSL_CTX with everything but the certificate: every context gets the
 * same protocol settings, since after the SNI switch OpenSSL reads some of
 * them (ALPN, certificate) from the switched context. */
static SSL_CTX *new_ctx(void)
{
    SSL_CTX *ctx;

    if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
        return NULL;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 || SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1 ||
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)SESSION_ID_CONTEXT, sizeof(SESSION_ID_CONTEXT) - 1) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    h2o_ssl_register_alpn_protocols(ctx, alpn_protocols);
    return ctx;
}

static int check_readable(const char *path, char **err)
{
    FILE *fp;

    if ((fp = fopen(path, "r")) == NULL)
        return fail(err, "tls: %s: %s", path, strerror(errno));
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
        return fail(err, "tls: %s: cannot load the certificate chain (%s)", cert, openssl_reason(reason, sizeof(reason)));
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        e = ERR_peek_last_error();
        if (ERR_GET_LIB(e) == ERR_LIB_X509 &&
            (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH || ERR_GET_REASON(e) == X509_R_KEY_TYPE_MISMATCH)) {
            ERR_clear_error();
            return fail(err, "tls: %s: the private key does not match the certificate in %s", key, cert);
        }
        return fail(err, "tls: %s: cannot load the private key (%s)", key, openssl_reason(reason, sizeof(reason)));
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        return fail(err, "tls: %s: the private key does not match the certificate in %s", key, cert);
    }
    return 0;
}

static int add_name(gw_tls_cert_t *c, const unsigned char *s, size_t len)
{
    char *name, **names;
    size_t i;

    /* a NUL inside a name is an attack on C strings, not a name */
    if (len == 0 || memchr(s, '\0', len) != NULL || c->num_names == MAX_NAMES_PER_CERT)
        return 0;
    if ((names = realloc(c->names, (c->num_names + 1) * sizeof(c->names[0]))) == NULL)
        return -1;
    c->names = names;
    if ((name = malloc(len + 1)) == NULL)
        return -1;
    for (i = 0; i != len; ++i)
        name[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + ('a' - 'A')) : (char)s[i];
    name[len] = '\0';
    c->names[c->num_names++] = name;
    return 0;
}

/* The names a certificate serves: its DNS SANs, or its CN when it has none. */
static int collect_names(gw_tls_cert_t *c, X509 *x)
{
    GENERAL_NAMES *sans;
    X509_NAME *subject;
    int i, n, idx, rc = 0;

    if ((sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL)) != NULL) {
        n = sk_GENERAL_NAME_num(sans);
        for (i = 0; i != n && rc == 0; ++i) {
            const GENERAL_NAME *gn = sk_GENERAL_NAME_value(sans, i);
            if (gn->type == GEN_DNS)
                rc = add_name(c, ASN1_STRING_get0_data(gn->d.dNSName), (size_t)ASN1_STRING_length(gn->d.dNSName));
        }
        GENERAL_NAMES_free(sans);
        if (rc != 0 || c->num_names != 0)
            return rc;
    }
    if ((subject = X509_get_subject_name(x)) != NULL && (idx = X509_NAME_get_index_by_NID(subject, NID_commonName, -1)) >= 0) {
        unsigned char *utf8 = NULL;
        int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, idx)));
        if (len > 0)
            rc = add_name(c, utf8, (size_t)len);
        OPENSSL_free(utf8);
    }
    return rc;
}

static void free_set(gw_tls_set_t *set)
{
    size_t i, j;

    if (set == NULL)
        return;
    for (i = 0; i != set->num_certs; ++i) {
        SSL_CTX_free(set->certs[i].ctx);
        for (j = 0; j != set->certs[i].num_names; ++j)
            free(set->certs[i].names[j]);
        free(set->certs[i].names);
    }
    free(set->certs);
    free(set);
}

static gw_tls_set_t *load_set(const gw_tls_cert_conf_t *conf, size_t num, char **err)
{
    gw_tls_set_t *set;
    size_t i;

    if ((set = calloc(1, sizeof(*set))) == NULL || (set->certs = calloc(num, sizeof(set->certs[0]))) == NULL) {
        fail(err, "tls: out of memory");
        goto Error;
    }
    for (i = 0; i != num; ++i) {
        gw_tls_cert_t *c = &set->certs[i];
        set->num_certs = i + 1;
        if ((c->ctx = new_ctx()) == NULL) {
            fail(err, "tls: cannot create an SSL_CTX");
            goto Error;
        }
        if (load_pair(c->ctx, conf[i].cert, conf[i].key, err) != 0)
            goto Error;
        if (collect_names(c, SSL_CTX_get0_certificate(c->ctx)) != 0) {
            fail(err, "tls: out of memory");
            goto Error;
        }
    }
    return set;

Error:
    free_set(set);
    return NULL;
}

/* The certificate for `servername` (NULL without SNI). */
static const gw_tls_cert_t *pick(const gw_tls_set_t *set, const char *servername)
{
    h2o_iovec_t name;
    size_t i, j;

    if (servername == NULL)
        return &set->certs[0];
    name = h2o_iovec_init(servername, strlen(servername));
    for (i = 0; i != set->num_certs; ++i)
        for (j = 0; j != set->certs[i].num_names; ++j) {
            h2o_iovec_t pattern = h2o_iovec_init(set->certs[i].names[j], strlen(set->certs[i].names[j]));
            if (!is_wildcard(pattern) && gw_tls_name_matches(pattern, name))
                return &set->certs[i];
        }
    for (i = 0; i != set->num_certs; ++i)
        for (j = 0; j != set->certs[i].num_names; ++j) {
            h2o_iovec_t pattern = h2o_iovec_init(set->certs[i].names[j], strlen(set->certs[i].names[j]));
            if (is_wildcard(pattern) && gw_tls_name_matches(pattern, name))
                return &set->certs[i];
        }
    return &set->certs[0];
}

/* Runs for every ClientHello, with or without SNI, so that a handshake
 * always uses the current set, including after a reload. */
static int on_servername(SSL *ssl, int *alert, void *arg)
{
    gw_tls_t *t = arg;
    SSL_CTX *ctx;
    int rc = SSL_TLSEXT_ERR_OK;

    pthread_rwlock_rdlock(&t->lock);
    ctx = pick(t->set, SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name))->ctx;
    SSL_CTX_up_ref(ctx);
    pthread_rwlock_unlock(&t->lock);

    /* our reference keeps ctx alive even if a reload freed the set meanwhile */
    if (SSL_set_SSL_CTX(ssl, ctx) == NULL) {
        *alert = SSL_AD_INTERNAL_ERROR;
        rc = SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    SSL_CTX_free(ctx);
    return rc;
}

gw_tls_t *gw_tls_new(const gw_tls_cert_conf_t *certs, size_t num, char **err)
{
    gw_tls_t *t;
    size_t i;

    *err = NULL;
    if (num == 0) {
        fail(err, "tls: no certificate configured");
        return NULL;
    }
    if ((t = calloc(1, sizeof(*t))) == NULL) {
        fail(err, "tls: out of memory");
        return NULL;
    }
    pthread_rwlock_init(&t->lock, NULL);
    pthread_mutex_init(&t->reload_mutex, NULL);
    if ((t->conf = calloc(num, sizeof(t->conf[0]))) == NULL) {
        fail(err, "tls: out of memory");
        goto Error;
    }
    for (i = 0; i != num; ++i) {
        t->num_conf = i + 1;
        if ((t->conf[i].cert = strdup(certs[i].cert)) == NULL || (t->conf[i].key = strdup(certs[i].key)) == NULL) {
            fail(err, "tls: out of memory");
            goto Error;
        }
    }
    if ((t->set = load_set(t->conf, t->num_conf, err)) == NULL)
        goto Error;

    /* The front context carries the default certificate too: it is what
     * the listener starts every handshake with. */
    if ((t->front = new_ctx()) == NULL) {
        fail(err, "tls: cannot create an SSL_CTX");
        goto Error;
    }
    if (load_pair(t->front, t->conf[0].cert, t->conf[0].key, err) != 0)
        goto Error;
    SSL_CTX_set_tlsext_servername_callback(t->front, on_servername);
    SSL_CTX_set_tlsext_servername_arg(t->front, t);
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
    if ((fresh = load_set(t->conf, t->num_conf, err)) == NULL) {
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
    for (i = 0; i != t->num_conf; ++i) {
        free((char *)t->conf[i].cert);
        free((char *)t->conf[i].key);
    }
    free(t->conf);
    pthread_mutex_destroy(&t->reload_mutex);
    pthread_rwlock_destroy(&t->lock);
    free(t);
}
