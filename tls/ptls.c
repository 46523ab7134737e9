/*
 * TLS 1.3 by picotls (ptls.h): the picotls context of an SSL_CTX, its
 * client-hello callback (the listener's), its session tickets (the format
 * OpenSSL's callback writes: key name, IV, AES-CBC, HMAC-SHA256, with the
 * same key list) and its lifetime, tied to the SSL_CTX's references.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <h2o/socket.h>
#include "picotls.h"
#include "picotls/openssl.h"
#include "tls/ptls.h"

/* OpenSSL's session lifetime (its default timeout), which operations.md's key rotation counts on */
#define TICKET_LIFETIME_S 7200
#define TICKET_IV_LEN 16

typedef struct st_gw_ptls_t {
    ptls_context_t ctx;
    ptls_openssl_sign_certificate_t sign;
    ptls_encrypt_ticket_t encrypt_ticket;
    ptls_update_open_count_t open_count;
    ptls_on_client_hello_t on_client_hello; /* a listener's */
    SSL_CTX *owner;                         /* not a reference: the context dies with it */
    gw_ticket_keys_t *keys;
    EVP_MAC *hmac;
    gw_ptls_choose_cb choose;
    void *choose_data;
} gw_ptls_t;

/* x25519 first, as OpenSSL's default groups; no 0-RTT (max_early_data_size 0), as OpenSSL's default */
static ptls_key_exchange_algorithm_t *key_exchanges[] = {&ptls_openssl_x25519, &ptls_openssl_secp256r1, &ptls_openssl_secp384r1,
                                                         &ptls_openssl_secp521r1, NULL};
/* tls.c's TLS13_CIPHERSUITES, in its order; ChaCha20 for a client that lists it first (server_cipher_chacha_priority) */
static ptls_cipher_suite_t *cipher_suites[] = {&ptls_openssl_aes128gcmsha256, &ptls_openssl_aes256gcmsha384,
                                               &ptls_openssl_chacha20poly1305sha256, NULL};
/* tls.c's ALPN, in the server's order of preference */
static const h2o_iovec_t alpn[] = {{H2O_STRLIT("h2")}, {H2O_STRLIT("http/1.1")}};

static pthread_once_t ex_index_once = PTHREAD_ONCE_INIT;
static int ex_index = -1; /* set once */

static void free_ptls(gw_ptls_t *p)
{
    size_t i;

    for (i = 0; i != p->ctx.certificates.count; ++i)
        free(p->ctx.certificates.list[i].base);
    free(p->ctx.certificates.list);
    if (p->sign.key != NULL)
        ptls_openssl_dispose_sign_certificate(&p->sign);
    EVP_MAC_free(p->hmac);
    free(p);
}

/* OpenSSL frees the picotls context with its SSL_CTX: no connection uses it any more (they hold references) */
static void on_ssl_ctx_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    if (ptr != NULL)
        free_ptls(ptr);
}

static void init_ex_index(void)
{
    ex_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, on_ssl_ctx_free);
}

static gw_ptls_t *get_ptls(SSL_CTX *ssl_ctx)
{
    return ex_index < 0 ? NULL : SSL_CTX_get_ex_data(ssl_ctx, ex_index);
}

int gw_ptls_attached(SSL_CTX *ssl_ctx)
{
    return get_ptls(ssl_ctx) != NULL;
}

int gw_ptls_enabled(void)
{
    const char *engine = getenv("LIZARD_TLS13_ENGINE");

    return engine == NULL || strcmp(engine, "openssl") != 0;
}

/* picotls counts the connections of a context (ptls_new, ptls_set_context, ptls_free): each holds its SSL_CTX */
static void on_open_count(ptls_update_open_count_t *self, ssize_t delta)
{
    gw_ptls_t *p = H2O_STRUCT_FROM_MEMBER(gw_ptls_t, open_count, self);

    if (delta > 0)
        SSL_CTX_up_ref(p->owner);
    else
        SSL_CTX_free(p->owner); /* may free p: picotls reads nothing of the context after this call */
}

static int on_client_hello(ptls_on_client_hello_t *self, ptls_t *tls, ptls_on_client_hello_parameters_t *params)
{
    gw_ptls_t *front = H2O_STRUCT_FROM_MEMBER(gw_ptls_t, on_client_hello, self);
    h2o_iovec_t name = h2o_iovec_init(params->server_name.base, params->server_name.len);
    SSL_CTX *chosen;
    gw_ptls_t *p;
    size_t i, j;
    int ret;

    if (params->incompatible_version)
        return 0; /* TLS 1.2: OpenSSL's, with its own client-hello callback */
    if ((chosen = front->choose(front->choose_data, name)) == NULL)
        return PTLS_ALERT_UNRECOGNIZED_NAME;
    p = get_ptls(chosen);
    if (p != NULL)
        ptls_set_context(tls, &p->ctx); /* takes its own reference on `chosen` */
    SSL_CTX_free(chosen);
    if (p == NULL)
        return PTLS_ALERT_INTERNAL_ERROR;
    if (name.base != NULL && (ret = ptls_set_server_name(tls, name.base, name.len)) != 0)
        return ret;
    for (i = 0; i != sizeof(alpn) / sizeof(alpn[0]); ++i)
        for (j = 0; j != params->negotiated_protocols.count; ++j)
            if (h2o_memis(alpn[i].base, alpn[i].len, params->negotiated_protocols.list[j].base,
                          params->negotiated_protocols.list[j].len))
                return ptls_set_negotiated_protocol(tls, alpn[i].base, alpn[i].len);
    return 0; /* no protocol in common: no ALPN in the answer, as OpenSSL's callback (h2o_ssl_register_alpn_protocols) */
}

static int encrypt_ticket(gw_ptls_t *p, ptls_buffer_t *dst, ptls_iovec_t src, EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx)
{
    uint8_t *start, *end;
    size_t mac_len;
    int len;

    if (ptls_buffer_reserve(dst, GW_TICKET_KEY_NAME_LEN + TICKET_IV_LEN + src.len + EVP_MAX_BLOCK_LENGTH + EVP_MAX_MD_SIZE) != 0)
        return PTLS_ERROR_NO_MEMORY;
    start = dst->base + dst->off;
    if (gw_ticket_keys_cb(p->keys, start, start + GW_TICKET_KEY_NAME_LEN, cctx, hctx, 1) != 1)
        return PTLS_ERROR_LIBRARY;
    end = start + GW_TICKET_KEY_NAME_LEN + TICKET_IV_LEN;
    if (EVP_EncryptUpdate(cctx, end, &len, src.base, (int)src.len) != 1)
        return PTLS_ERROR_LIBRARY;
    end += len;
    if (EVP_EncryptFinal_ex(cctx, end, &len) != 1)
        return PTLS_ERROR_LIBRARY;
    end += len;
    if (EVP_MAC_update(hctx, start, end - start) != 1 || EVP_MAC_final(hctx, end, &mac_len, EVP_MAX_MD_SIZE) != 1)
        return PTLS_ERROR_LIBRARY;
    dst->off += end + mac_len - start;
    return 0;
}

/* An unknown key, a bad MAC or padding: an error, so that picotls makes a full handshake */
static int decrypt_ticket(gw_ptls_t *p, ptls_buffer_t *dst, ptls_iovec_t src, EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx)
{
    uint8_t mac[EVP_MAX_MD_SIZE];
    size_t mac_len, body;
    int len;

    if (src.len < GW_TICKET_KEY_NAME_LEN + TICKET_IV_LEN)
        return PTLS_ALERT_DECODE_ERROR;
    if (gw_ticket_keys_cb(p->keys, src.base, src.base + GW_TICKET_KEY_NAME_LEN, cctx, hctx, 0) < 1)
        return PTLS_ERROR_LIBRARY;
    mac_len = EVP_MAC_CTX_get_mac_size(hctx);
    if (src.len < GW_TICKET_KEY_NAME_LEN + TICKET_IV_LEN + mac_len)
        return PTLS_ALERT_DECODE_ERROR;
    body = src.len - mac_len;
    if (EVP_MAC_update(hctx, src.base, body) != 1 || EVP_MAC_final(hctx, mac, &mac_len, sizeof(mac)) != 1)
        return PTLS_ERROR_LIBRARY;
    if (!ptls_mem_equal(src.base + body, mac, mac_len))
        return PTLS_ALERT_HANDSHAKE_FAILURE;
    body -= GW_TICKET_KEY_NAME_LEN + TICKET_IV_LEN;
    if (ptls_buffer_reserve(dst, body + EVP_MAX_BLOCK_LENGTH) != 0)
        return PTLS_ERROR_NO_MEMORY;
    if (EVP_DecryptUpdate(cctx, dst->base + dst->off, &len, src.base + GW_TICKET_KEY_NAME_LEN + TICKET_IV_LEN, (int)body) != 1)
        return PTLS_ERROR_LIBRARY;
    dst->off += len;
    if (EVP_DecryptFinal_ex(cctx, dst->base + dst->off, &len) != 1)
        return PTLS_ERROR_LIBRARY;
    dst->off += len;
    return 0;
}

/* picotls sends a fresh ticket after every handshake, a resumption too: a TLS 1.3 client uses each once (tls.c) */
static int on_ticket(ptls_encrypt_ticket_t *self, ptls_t *tls, int is_encrypt, ptls_buffer_t *dst, ptls_iovec_t src)
{
    gw_ptls_t *p = H2O_STRUCT_FROM_MEMBER(gw_ptls_t, encrypt_ticket, self);
    EVP_CIPHER_CTX *cctx = EVP_CIPHER_CTX_new();
    EVP_MAC_CTX *hctx = EVP_MAC_CTX_new(p->hmac);
    size_t off = dst->off;
    int ret = PTLS_ERROR_NO_MEMORY;

    (void)tls;
    if (cctx != NULL && hctx != NULL)
        ret = is_encrypt ? encrypt_ticket(p, dst, src, cctx, hctx) : decrypt_ticket(p, dst, src, cctx, hctx);
    if (ret != 0) {
        ptls_clear_memory(dst->base + off, dst->off - off);
        dst->off = off;
    }
    EVP_MAC_CTX_free(hctx);
    EVP_CIPHER_CTX_free(cctx);
    return ret;
}

/* The certificate, its chain and the signer of ssl_ctx's key into p; the ticket context binds a session to that
 * certificate (tls.c's session-id context: a session never resumes under another certificate). */
static int load_identity(gw_ptls_t *p, SSL_CTX *ssl_ctx)
{
    X509 *cert = SSL_CTX_get0_certificate(ssl_ctx);
    EVP_PKEY *key = SSL_CTX_get0_privatekey(ssl_ctx);
    STACK_OF(X509) *chain = NULL;

    if (cert == NULL || key == NULL || SSL_CTX_get0_chain_certs(ssl_ctx, &chain) != 1)
        return -1;
    if (ptls_openssl_init_sign_certificate(&p->sign, key) != 0) {
        p->sign.key = NULL;
        return -1;
    }
    if (ptls_openssl_load_certificates(&p->ctx, cert, chain) != 0 || p->ctx.certificates.count == 0)
        return -1;
    ptls_calc_hash(&ptls_openssl_sha256, p->ctx.ticket_context.bytes, p->ctx.certificates.list[0].base,
                   p->ctx.certificates.list[0].len);
    p->ctx.ticket_context.is_set = 1;
    return 0;
}

int gw_ptls_attach(SSL_CTX *ssl_ctx, gw_ticket_keys_t *keys, gw_ptls_choose_cb choose, void *choose_data)
{
    gw_ptls_t *p;

    pthread_once(&ex_index_once, init_ex_index);
    if (ex_index < 0 || (p = calloc(1, sizeof(*p))) == NULL)
        return -1;
    p->owner = ssl_ctx;
    p->keys = keys;
    p->encrypt_ticket.cb = on_ticket;
    p->open_count.cb = on_open_count;
    p->ctx.random_bytes = ptls_openssl_random_bytes;
    p->ctx.get_time = &ptls_get_time;
    p->ctx.key_exchanges = key_exchanges;
    p->ctx.cipher_suites = cipher_suites;
    p->ctx.sign_certificate = &p->sign.super;
    p->ctx.encrypt_ticket = &p->encrypt_ticket;
    p->ctx.ticket_lifetime = TICKET_LIFETIME_S;
    p->ctx.require_dhe_on_psk = 1;
    p->ctx.server_cipher_preference = 1;
    p->ctx.server_cipher_chacha_priority = 1;
    p->ctx.update_open_count = &p->open_count;
    if (choose != NULL) {
        p->on_client_hello.cb = on_client_hello;
        p->ctx.on_client_hello = &p->on_client_hello;
        p->choose = choose;
        p->choose_data = choose_data;
    }
    if ((p->hmac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL || load_identity(p, ssl_ctx) != 0 ||
        SSL_CTX_set_ex_data(ssl_ctx, ex_index, p) != 1) {
        free_ptls(p);
        return -1;
    }
    if (choose != NULL)
        h2o_socket_ssl_set_picotls_context(ssl_ctx, &p->ctx);
    return 0;
}
