/*
 * The accept step of a TLS listener while custom-domain certificates are on
 * (tls.sealed_key_env): reads the ClientHello (tls/client_hello.h) before h2o
 * sees the socket, as gateway/proxy_protocol.c reads the PROXY header, and
 * when its SNI names a custom domain whose certificate is not cached, fetches
 * it (tls/cert_fetch.h) without blocking the worker; then hands the socket
 * over with the ClientHello still to be read in sock->input, where h2o's
 * handshake starts from. No TLS library is paused (libh2o 2.2.5's patch 0240
 * did that for OpenSSL; picotls cannot), so both engines share this path.
 */
#ifndef GW_GATEWAY_SNI_PEEK_H
#define GW_GATEWAY_SNI_PEEK_H

#include <h2o.h>
#include "common/engine.h"
#include "tls/cert_fetch.h"
#include "tls/client_hello.h"

/* Called once the socket may go to h2o: `sock` is the caller's again and must be handed to h2o_accept before
 * the callback returns (the handshake takes the fetched certificate then, synchronously). */
typedef void (*gw_sni_peek_cb)(h2o_socket_t *sock, void *data);

/* Reads the ClientHello of `sock` (accepted, or past its PROXY header: bytes may already be in sock->input;
 * sock->data unused) within `timeout` (h2o's handshake timeout; a timeout of the socket's loop), looks its
 * certificate up through `fetch` and calls on_ready(sock, data) with reading stopped, sock->data NULL and every
 * byte read still in sock->input: at once for bytes that are no ClientHello (h2o's handshake refuses them as
 * before), else once the certificate's answer is there. A ClientHello over GW_CLIENT_HELLO_MAX, no whole one
 * (or no answer) within the timeout, or the peer leaving first closes the socket without a byte written, and
 * on_ready is never called. Every outcome is counted in `counters` (the calling worker's). */
void gw_sni_peek_read(h2o_socket_t *sock, gw_timeout_t *timeout, gw_cert_fetch_t *fetch, gw_client_hello_counters_t *counters,
                      gw_sni_peek_cb on_ready, void *data);

#endif
