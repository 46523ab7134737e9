/*
 * TLS for the listeners: one SSL_CTX per certificate, a front SSL_CTX whose
 * SNI callback switches to the certificate matching the server name (exact,
 * then wildcard), ALPN h2 and http/1.1 on each, TLS 1.2 minimum. Reloadable
 * (SIGHUP) without dropping connections: the front context stays, the set
 * behind it is swapped.
 */
#ifndef GW_TLS_TLS_H
#define GW_TLS_TLS_H

#include <stddef.h>
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

/* Frees; NULL is a no-op. Only after every listener is closed. */
void gw_tls_free(gw_tls_t *t);

/* 1 when `pattern` (a certificate name: "a.example" or "*.example")
 * matches `name`, case-insensitively; a wildcard covers exactly one label. */
int gw_tls_name_matches(h2o_iovec_t pattern, h2o_iovec_t name);

#endif
