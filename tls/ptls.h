/*
 * TLS 1.3 by picotls, h2o master's own TLS stack (docs/tls.md): each
 * certificate's SSL_CTX carries a picotls context with the same certificate
 * chain, key, TLS 1.3 suites and session ticket keys. h2o hands a ClientHello
 * that offers TLS 1.3 to the listener's context, whose client-hello callback
 * picks the certificate as OpenSSL's does (tls.c) and switches to its
 * context; TLS 1.2 stays OpenSSL's.
 *
 * Lifetimes are OpenSSL's: the picotls context belongs to its SSL_CTX (freed
 * with it), and every picotls connection using it holds a reference on that
 * SSL_CTX (picotls's open count), as an OpenSSL connection does; so a reload,
 * or a custom domain's eviction, never frees a context under a connection.
 */
#ifndef GW_TLS_PTLS_H
#define GW_TLS_PTLS_H

#include <openssl/ssl.h>
#include <h2o/memory.h>
#include "tls/ticket_keys.h"

/* Picks the certificate for a TLS 1.3 ClientHello's SNI `name` (base NULL
 * when none was sent): an SSL_CTX with a picotls context and a reference for
 * the caller, or NULL to refuse the name (unrecognized_name). Any thread. */
typedef SSL_CTX *(*gw_ptls_choose_cb)(void *data, h2o_iovec_t name);

/* Gives ssl_ctx (its certificate and key loaded) a picotls context whose
 * tickets are made and read with `keys` (borrowed: they must outlive
 * ssl_ctx). With `choose`, the context is a listener's: h2o takes TLS 1.3
 * handshakes from it (h2o_socket_ssl_set_picotls_context) and `choose`
 * picks each one's certificate. 0, or -1 (out of memory, or a key picotls
 * cannot sign with). */
int gw_ptls_attach(SSL_CTX *ssl_ctx, gw_ticket_keys_t *keys, gw_ptls_choose_cb choose, void *choose_data);

/* 1 when ssl_ctx has a picotls context (gw_ptls_attach). */
int gw_ptls_attached(SSL_CTX *ssl_ctx);

/* Whether TLS 1.3 is picotls's (the default) or OpenSSL's: the environment
 * variable LIZARD_TLS13_ENGINE=openssl, read once, turns picotls off (for
 * measurements: tests/bench/tls_engines.sh; docs/tls.md). */
int gw_ptls_enabled(void);

#endif
