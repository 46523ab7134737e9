/*
 * TLS for the listeners: one SSL_CTX per certificate, a front SSL_CTX whose
 * ClientHello callback switches to the certificate matching the server name
 * (exact, then wildcard) before any session is looked up, ALPN h2 and
 * http/1.1 on each, TLS 1.2 minimum, session tickets from one key list.
 * Reloadable (SIGHUP) without dropping connections: the front context stays,
 * the set behind it and the ticket keys are swapped.
 */
#ifndef GW_TLS_TLS_H
#define GW_TLS_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>
#include <h2o/memory.h>

typedef struct st_gw_tls_t gw_tls_t;

typedef struct st_gw_tls_cert_conf_t {
    const char *cert; /* PEM chain */
    const char *key;  /* PEM private key */
} gw_tls_cert_conf_t;

/* Loads every pair (the key must match its certificate; names come from the
 * certificate's DNS SANs, or CN when it has none). Returns NULL with *err
 * (malloc'd) naming the file and the problem. Paths are copied for reload. */
gw_tls_t *gw_tls_new(const gw_tls_cert_conf_t *certs, size_t num, char **err);

/* The SSL_CTX to give every TLS listener; stable for the life of t. */
SSL_CTX *gw_tls_listener_ctx(gw_tls_t *t);

/* Re-reads every pair; on any error keeps the current set and returns -1
 * with *err. Safe to call from one thread while others handshake. */
int gw_tls_reload(gw_tls_t *t, char **err);

/* Session tickets. Every SSL_CTX of t encrypts tickets with the first key
 * of one list and decrypts tickets made with any key of it; a session is
 * resumed only under the certificate it was made with (each certificate has
 * its own session-id context), for session IDs and tickets alike.
 * Until gw_tls_use_ticket_keys_file, the list is random and private to the
 * process: a new key every rotation interval (GW_TLS_TICKET_ROTATION_MS), the
 * previous one kept for decryption. */
#define GW_TLS_TICKET_ROTATION_MS (3600 * 1000)

/* Reads `path` (see gw_tls_ticket_keys_check) and makes its keys the list,
 * for good: no more rotation; gw_tls_reload_ticket_keys re-reads it. Call
 * it once, before the listeners start. Returns
 * -1 with *err (malloc'd; names the file and the problem, never key bytes)
 * and keeps the current list when the file is bad. The path is copied. */
int gw_tls_use_ticket_keys_file(gw_tls_t *t, const char *path, char **err);

/* Re-reads the ticket keys file; 0 and nothing done without one. On error
 * keeps the current keys and returns -1 with *err. Safe while others
 * handshake. */
int gw_tls_reload_ticket_keys(gw_tls_t *t, char **err);

/* The ticket keys file, NULL for random keys; owned by t. */
const char *gw_tls_ticket_keys_file(gw_tls_t *t);

/* How many ticket keys decrypt right now (the first of them encrypts). */
size_t gw_tls_ticket_keys_count(gw_tls_t *t);

/* The rotation interval of random keys (default GW_TLS_TICKET_ROTATION_MS);
 * tests use a short one. No effect with a ticket keys file. */
void gw_tls_set_ticket_rotation(gw_tls_t *t, uint64_t interval_ms);

/* Checks a ticket keys file without keeping it: 0, or -1 with *err
 * (malloc'd, "<path>: <problem>"). The format: one key per line, base64 of 48
 * bytes (16 name, 16 AES-128 key, 16 HMAC-SHA256 key) or 80 bytes (16 name,
 * 32 AES-256 key, 32 HMAC-SHA256 key), HAProxy's tls-ticket-keys layout;
 * blank lines and # comments are skipped; the first key encrypts, all
 * decrypt; at most 16 keys. A file of exactly 48 or 80 raw (non-text) bytes
 * is one key in nginx's ssl_session_ticket_key layout (an 80-byte one puts
 * the HMAC key before the AES key). Others must not be able to read or write
 * it. */
int gw_tls_ticket_keys_check(const char *path, char **err);

/* Custom-domain certificates (tls/dyncert.h): an SNI name that no static
 * certificate serves and that is not under a preview domain is answered with
 * its domain's certificate from Redis (tls/cert_fetch.h), or refused with
 * unrecognized_name. Call once, before the listeners start. */
typedef struct st_gw_dyncert_conf_t gw_dyncert_conf_t;
typedef struct st_gw_dyncert_t gw_dyncert_t;
void gw_tls_enable_dynamic(gw_tls_t *t, const gw_dyncert_conf_t *conf);

/* The custom-domain certificate cache, NULL when off (or t NULL). */
gw_dyncert_t *gw_tls_dynamic(gw_tls_t *t);

/* Frees; NULL is a no-op. Only after every listener is closed. */
void gw_tls_free(gw_tls_t *t);

/* 1 when certificate `x` serves `name`, as a browser decides (RFC 6125, by
 * X509_check_host): its DNS SANs, or its CN when it has none, compared
 * case-insensitively; a wildcard ("*.example.com": a whole label, not right
 * below a top-level one) covers exactly one label, and counts only when
 * `wildcards` (the listener tries every certificate without, then with, so
 * that an exact name beats a wildcard in an earlier certificate). */
int gw_tls_cert_serves(X509 *x, h2o_iovec_t name, int wildcards);

#endif
