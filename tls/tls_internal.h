/* What tls.c lends the other files of tls/ (not for other modules). */
#ifndef GW_TLS_TLS_INTERNAL_H
#define GW_TLS_TLS_INTERNAL_H

#include <openssl/ssl.h>
#include "tls/tls.h"

/* An SSL_CTX with every protocol setting of the listeners' (ALPN, ticket callback) and no certificate. */
SSL_CTX *gw_tls_new_cert_ctx(gw_tls_t *t);

/* Gives ctx the session-id context of its certificate, so that sessions never resume across certificates. */
int gw_tls_set_cert_session_id_context(SSL_CTX *ctx);

/* Gives ctx (made by gw_tls_new_cert_ctx, its certificate loaded) its picotls context for TLS 1.3 (tls/ptls.h), with
 * the ticket keys of its gw_tls_t; 0 and nothing done when TLS 1.3 is OpenSSL's (gw_ptls_enabled). 0 or -1. */
int gw_tls_attach_picotls(SSL_CTX *ctx);

/* 1 when the SNI `name` (as sent) goes to the custom-domain certificates: they are on, no static certificate
 * serves it, and it is not a preview host (the client-hello callback's own choice). Any thread. */
int gw_tls_is_custom_name(gw_tls_t *t, h2o_iovec_t name);

#endif
