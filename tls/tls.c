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
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <h2o/socket.h>
#include <h2o/string_.h>
#include "common/secret_file.h"
#include "tls/tls.h"
#include "tls/cert_fetch.h"
#include "tls/tls_internal.h"
#include "common/errfmt.h"

/* Mozilla "intermediate" for TLS 1.2; TLS 1.3 suites are OpenSSL's defaults. */
#define TLS12_CIPHERS                                                                                                              \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"         \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384"
#define FRONT_SESSION_ID_CONTEXT "lizard-gateway" /* replaced by the certificate's at the switch */
#define TICKET_KEY_NAME_LEN 16
#define MAX_TICKET_KEYS 16
#define MAX_TICKET_KEYS_FILE_SIZE (64 * 1024)
#define TICKET_KEY_SMALL 48    /* name, AES-128 key, HMAC key of 16 bytes */
#define TICKET_KEY_LARGE 80    /* name, AES-256 key, HMAC key of 32 bytes */
#define RETRY_ROTATION_MS 1000 /* after a failed RAND_bytes */

/* What the listeners offer, in order of preference. h2o's own
 * h2o_http2_alpn_protocols lacks http/1.1 and carries old h2 drafts. */
static const h2o_iovec_t alpn_protocols[] = {{H2O_STRLIT("h2")}, {H2O_STRLIT("http/1.1")}, {NULL, 0}};

typedef struct st_gw_tls_ticket_key_t {
    unsigned char name[TICKET_KEY_NAME_LEN];
    unsigned char aes_key[32];
    unsigned char hmac_key[32];
    size_t key_len; /* 16 (from a 48-byte key) or 32 (from an 80-byte key), for both keys */
} gw_tls_ticket_key_t;

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

    /* The ticket callback (any thread) holds ticket_lock for reading while it
     * hands a key to OpenSSL, which copies it; a reload or a rotation replaces
     * the list under the write lock. */
    pthread_rwlock_t ticket_lock;
    gw_tls_ticket_key_t ticket_keys[MAX_TICKET_KEYS]; /* [0] encrypts, all decrypt */
    size_t num_ticket_keys;
    char *ticket_keys_file;              /* NULL: random keys, rotated; set once before any handshake */
    uint64_t rotation_ms;                /* random keys only */
    uint64_t rotate_at_ms;               /* CLOCK_MONOTONIC; random keys only */
    pthread_mutex_t ticket_reload_mutex; /* one file reload at a time */

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

static int on_ticket_key(SSL *ssl, unsigned char key_name[TICKET_KEY_NAME_LEN], unsigned char *iv, EVP_CIPHER_CTX *cctx,
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
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)FRONT_SESSION_ID_CONTEXT,
                                       sizeof(FRONT_SESSION_ID_CONTEXT) - 1) != 1 ||
        SSL_CTX_set_ex_data(ctx, ex_index, t) != 1 || SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, on_ticket_key) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
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

/* Runs for every ClientHello, with or without SNI, before OpenSSL looks for
 * a session to resume: the switch brings the certificate's session-id
 * context, so a session of another certificate is a miss (the servername
 * callback would run after the lookup). Always the current set, including
 * after a reload. */
static int on_client_hello(SSL *ssl, int *alert, void *arg)
{
    gw_tls_t *t = arg;
    h2o_iovec_t name = client_hello_sni(ssl);
    const gw_tls_cert_t *c;
    SSL_CTX *ctx;
    int rc = SSL_CLIENT_HELLO_SUCCESS;

    pthread_rwlock_rdlock(&t->lock);
    c = name.base != NULL ? pick(t->set, name) : NULL;
    if (c == NULL && is_dynamic(t, name)) {
        pthread_rwlock_unlock(&t->lock);
        return gw_cert_fetch_client_hello(t->dynamic, ssl, name, alert);
    }
    ctx = (c != NULL ? c : &t->set->certs[0])->ctx;
    SSL_CTX_up_ref(ctx);
    pthread_rwlock_unlock(&t->lock);

    /* our reference keeps ctx alive even if a reload freed the set meanwhile */
    if (SSL_set_SSL_CTX(ssl, ctx) == NULL) {
        *alert = SSL_AD_INTERNAL_ERROR;
        rc = SSL_CLIENT_HELLO_ERROR;
    }
    SSL_CTX_free(ctx);
    return rc;
}

/* Session ticket keys. */

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One key from its 48 or 80 bytes. `hmac_first`: nginx's 80-byte layout
 * (name, HMAC key, AES key); otherwise HAProxy's (name, AES key, HMAC key),
 * which is also nginx's 48-byte one. */
static void key_from_bytes(gw_tls_ticket_key_t *key, const unsigned char *b, size_t len, int hmac_first)
{
    size_t k = len == TICKET_KEY_LARGE ? 32 : 16;

    memset(key, 0, sizeof(*key));
    key->key_len = k;
    memcpy(key->name, b, TICKET_KEY_NAME_LEN);
    if (hmac_first && len == TICKET_KEY_LARGE) {
        memcpy(key->hmac_key, b + TICKET_KEY_NAME_LEN, k);
        memcpy(key->aes_key, b + TICKET_KEY_NAME_LEN + k, k);
    } else {
        memcpy(key->aes_key, b + TICKET_KEY_NAME_LEN, k);
        memcpy(key->hmac_key, b + TICKET_KEY_NAME_LEN + k, k);
    }
}

static int base64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Standard base64, "=" padding optional. Returns the decoded length, or -1
 * when `s` is not base64 or decodes to more than `max` bytes. */
static ssize_t base64_decode(const char *s, size_t len, unsigned char *out, size_t max)
{
    size_t i, n = 0;
    unsigned acc = 0, bits = 0;

    while (len != 0 && s[len - 1] == '=')
        --len;
    if (len % 4 == 1)
        return -1;
    for (i = 0; i != len; ++i) {
        int v = base64_value((unsigned char)s[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == max)
                return -1;
            out[n++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return (ssize_t)n;
}

/* 1 when `b` looks like text (printable ASCII and line breaks), the test that
 * tells a base64 file from nginx's raw 48 or 80 bytes. */
static int is_text(const unsigned char *b, size_t len)
{
    size_t i;

    for (i = 0; i != len; ++i)
        if (!((b[i] >= 0x20 && b[i] < 0x7f) || b[i] == '\n' || b[i] == '\r' || b[i] == '\t'))
            return 0;
    return 1;
}

/* Parses the text format: one base64 key per line. Messages name the line,
 * never its bytes. */
static int parse_key_lines(const char *path, const char *buf, size_t len, gw_tls_ticket_key_t *keys, size_t *num, char **err)
{
    size_t line = 0, line_of[MAX_TICKET_KEYS], i, pos = 0, slen;
    const char *s;
    unsigned char bytes[TICKET_KEY_LARGE + 3];
    ssize_t n;
    int rc = -1;

    *num = 0;
    while (gw_secret_file_next_line(buf, len, &pos, &line, &s, &slen)) {
        if (*num == MAX_TICKET_KEYS) {
            gw_errorf(err, "%s: line %zu: more than %d keys", path, line, MAX_TICKET_KEYS);
            goto Exit;
        }
        if ((n = base64_decode(s, slen, bytes, sizeof(bytes))) < 0) {
            gw_errorf(err, "%s: line %zu: not a base64 key of 48 or 80 bytes (make one with: openssl rand 80 | base64 -w0)", path,
                      line);
            goto Exit;
        }
        if (n != TICKET_KEY_SMALL && n != TICKET_KEY_LARGE) {
            gw_errorf(err, "%s: line %zu: the key is %zd bytes long, expected 48 or 80", path, line, n);
            goto Exit;
        }
        key_from_bytes(&keys[*num], bytes, (size_t)n, 0);
        for (i = 0; i != *num; ++i) {
            if (memcmp(keys[i].name, keys[*num].name, TICKET_KEY_NAME_LEN) == 0) {
                gw_errorf(err, "%s: line %zu: the same key name (first 16 bytes) as the key on line %zu", path, line, line_of[i]);
                goto Exit;
            }
        }
        line_of[*num] = line;
        ++*num;
    }
    if (*num == 0) {
        gw_errorf(err, "%s: holds no key (only blank lines and comments)", path);
        goto Exit;
    }
    rc = 0;

Exit:
    OPENSSL_cleanse(bytes, sizeof(bytes));
    return rc;
}

/* Reads a ticket keys file into `keys` (MAX_TICKET_KEYS of them). Returns 0,
 * or -1 with *err ("<path>: <problem>"). */
static int read_ticket_keys(const char *path, gw_tls_ticket_key_t *keys, size_t *num, char **err)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = -1;

    *num = 0;
    if (gw_secret_file_read(path, MAX_TICKET_KEYS_FILE_SIZE, (char **)&buf, &len, err) != 0)
        return -1;
    if ((len == TICKET_KEY_SMALL || len == TICKET_KEY_LARGE) && !is_text(buf, len)) {
        /* nginx's ssl_session_ticket_key file: one key, raw */
        key_from_bytes(&keys[0], buf, len, 1);
        *num = 1;
        rc = 0;
        goto Exit;
    }
    if (memchr(buf, '\0', len) != NULL || !is_text(buf, len)) {
        gw_errorf(
            err, "%s: not text, and not a raw key of exactly 48 or 80 bytes either (%zu bytes); expected base64 keys, one per line",
            path, len);
        goto Exit;
    }
    rc = parse_key_lines(path, (const char *)buf, len, keys, num, err);

Exit:
    OPENSSL_cleanse(buf, len);
    free(buf);
    return rc;
}

int gw_tls_ticket_keys_check(const char *path, char **err)
{
    gw_tls_ticket_key_t keys[MAX_TICKET_KEYS];
    size_t num;
    int rc = read_ticket_keys(path, keys, &num, err);

    OPENSSL_cleanse(keys, sizeof(keys));
    return rc;
}

static int random_key(gw_tls_ticket_key_t *key)
{
    unsigned char bytes[TICKET_KEY_LARGE];
    int rc = -1;

    if (RAND_bytes(bytes, sizeof(bytes)) == 1) {
        key_from_bytes(key, bytes, sizeof(bytes), 0);
        rc = 0;
    }
    OPENSSL_cleanse(bytes, sizeof(bytes));
    return rc;
}

/* Under the write lock, random keys only: a new first key; the previous one
 * stays for decryption unless a second interval has passed as well (the
 * rotation runs when a handshake needs a key, so it may come late: it acts as
 * if it had run on time). */
static void rotate_locked(gw_tls_t *t, uint64_t now)
{
    gw_tls_ticket_key_t fresh;

    if (random_key(&fresh) != 0) {
        ERR_clear_error();
        t->rotate_at_ms = now + RETRY_ROTATION_MS;
        return;
    }
    if (t->num_ticket_keys != 0 && now < t->rotate_at_ms + t->rotation_ms) {
        t->ticket_keys[1] = t->ticket_keys[0];
        t->num_ticket_keys = 2;
    } else {
        t->num_ticket_keys = 1;
    }
    t->ticket_keys[0] = fresh;
    OPENSSL_cleanse(&fresh, sizeof(fresh));
    t->rotate_at_ms = now + t->rotation_ms;
}

static void maybe_rotate(gw_tls_t *t)
{
    uint64_t now;
    int due;

    if (t->ticket_keys_file != NULL)
        return;
    now = now_ms();
    pthread_rwlock_rdlock(&t->ticket_lock);
    due = now >= t->rotate_at_ms;
    pthread_rwlock_unlock(&t->ticket_lock);
    if (!due)
        return;
    pthread_rwlock_wrlock(&t->ticket_lock);
    if (now >= t->rotate_at_ms) /* not done by another thread meanwhile */
        rotate_locked(t, now);
    pthread_rwlock_unlock(&t->ticket_lock);
}

static int init_hmac(EVP_MAC_CTX *hctx, const gw_tls_ticket_key_t *key)
{
    OSSL_PARAM params[3];

    params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)key->hmac_key, key->key_len);
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[2] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(hctx, params) == 1 ? 0 : -1;
}

static const EVP_CIPHER *key_cipher(const gw_tls_ticket_key_t *key)
{
    return key->key_len == 32 ? EVP_aes_256_cbc() : EVP_aes_128_cbc();
}

/* OpenSSL's ticket callback (it takes the front context's, on every
 * handshake). enc: 1 with the first key. Decryption: 0 for an unknown key
 * name (a full handshake follows), 1 for the first key, 2 for an older one
 * (the client gets a fresh ticket), -1 on error. */
static int on_ticket_key(SSL *ssl, unsigned char key_name[TICKET_KEY_NAME_LEN], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                         EVP_MAC_CTX *hctx, int enc)
{
    gw_tls_t *t = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ex_index);
    const gw_tls_ticket_key_t *key = NULL;
    size_t i;
    int rc = -1;

    if (t == NULL)
        return enc ? -1 : 0;
    maybe_rotate(t);
    pthread_rwlock_rdlock(&t->ticket_lock);
    if (enc) {
        key = &t->ticket_keys[0];
        if (t->num_ticket_keys != 0 && RAND_bytes(iv, EVP_CIPHER_get_iv_length(key_cipher(key))) == 1 &&
            EVP_EncryptInit_ex(cctx, key_cipher(key), NULL, key->aes_key, iv) == 1 && init_hmac(hctx, key) == 0) {
            memcpy(key_name, key->name, TICKET_KEY_NAME_LEN);
            rc = 1;
        }
    } else {
        rc = 0;
        for (i = 0; i != t->num_ticket_keys; ++i) {
            if (memcmp(key_name, t->ticket_keys[i].name, TICKET_KEY_NAME_LEN) == 0) {
                key = &t->ticket_keys[i];
                rc = init_hmac(hctx, key) == 0 && EVP_DecryptInit_ex(cctx, key_cipher(key), NULL, key->aes_key, iv) == 1
                         ? (i == 0 ? 1 : 2)
                         : -1;
                break;
            }
        }
    }
    pthread_rwlock_unlock(&t->ticket_lock);
    return rc;
}

int gw_tls_use_ticket_keys_file(gw_tls_t *t, const char *path, char **err)
{
    char *copy;

    *err = NULL;
    if ((copy = strdup(path)) == NULL)
        return gw_errorf(err, "tls: out of memory");
    free(t->ticket_keys_file);
    t->ticket_keys_file = copy;
    if (gw_tls_reload_ticket_keys(t, err) != 0) {
        free(t->ticket_keys_file);
        t->ticket_keys_file = NULL;
        return -1;
    }
    return 0;
}

int gw_tls_reload_ticket_keys(gw_tls_t *t, char **err)
{
    gw_tls_ticket_key_t fresh[MAX_TICKET_KEYS];
    size_t num;
    char *why = NULL;
    int rc = 0;

    *err = NULL;
    if (t->ticket_keys_file == NULL)
        return 0;
    pthread_mutex_lock(&t->ticket_reload_mutex);
    /* read and checked before the lock: a bad file never replaces good keys */
    if (read_ticket_keys(t->ticket_keys_file, fresh, &num, &why) != 0) {
        rc = gw_errorf(err, "tls: ticket keys: %s", why != NULL ? why : "out of memory");
        free(why);
    } else {
        pthread_rwlock_wrlock(&t->ticket_lock);
        memcpy(t->ticket_keys, fresh, num * sizeof(fresh[0]));
        OPENSSL_cleanse(t->ticket_keys + num, (MAX_TICKET_KEYS - num) * sizeof(fresh[0]));
        t->num_ticket_keys = num;
        pthread_rwlock_unlock(&t->ticket_lock);
    }
    pthread_mutex_unlock(&t->ticket_reload_mutex);
    OPENSSL_cleanse(fresh, sizeof(fresh));
    return rc;
}

const char *gw_tls_ticket_keys_file(gw_tls_t *t)
{
    return t->ticket_keys_file;
}

size_t gw_tls_ticket_keys_count(gw_tls_t *t)
{
    size_t n;

    maybe_rotate(t);
    pthread_rwlock_rdlock(&t->ticket_lock);
    n = t->num_ticket_keys;
    pthread_rwlock_unlock(&t->ticket_lock);
    return n;
}

void gw_tls_set_ticket_rotation(gw_tls_t *t, uint64_t interval_ms)
{
    pthread_rwlock_wrlock(&t->ticket_lock);
    t->rotation_ms = interval_ms;
    t->rotate_at_ms = now_ms() + interval_ms;
    pthread_rwlock_unlock(&t->ticket_lock);
}

gw_tls_t *gw_tls_new(const gw_tls_cert_conf_t *certs, size_t num, char **err)
{
    pthread_rwlockattr_t attr;
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
    /* every handshake reads the keys: a reload or a rotation must not starve */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&t->ticket_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&t->ticket_reload_mutex, NULL);
    pthread_once(&ex_index_once, init_ex_index);
    if (ex_index < 0) {
        gw_errorf(err, "tls: cannot get an SSL_CTX ex_data index");
        goto Error;
    }
    t->rotation_ms = GW_TLS_TICKET_ROTATION_MS;
    if (random_key(&t->ticket_keys[0]) != 0) {
        ERR_clear_error();
        gw_errorf(err, "tls: cannot make a session ticket key (RAND_bytes failed)");
        goto Error;
    }
    t->num_ticket_keys = 1;
    t->rotate_at_ms = now_ms() + t->rotation_ms;
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
    free(t->ticket_keys_file);
    OPENSSL_cleanse(t->ticket_keys, sizeof(t->ticket_keys));
    pthread_mutex_destroy(&t->ticket_reload_mutex);
    pthread_rwlock_destroy(&t->ticket_lock);
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
