/*
 * The way to the gateway for one tunnel of tcp-forward: resolve (or
 * --connect), connect, TLS with certificate and host name verification.
 * Blocking with deadlines: each tunnel has a thread of its own.
 */
#ifndef GW_FORWARD_WSS_DIAL_H
#define GW_FORWARD_WSS_DIAL_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>
#include "common/netaddr.h"
#include "forward/wss_url.h"

/* What every tunnel of one tcp-forward shares, read-only once built. */
typedef struct st_gw_forward_conf_t {
    gw_wss_url_t url;
    int has_connect;       /* 1: dial `connect` instead of resolving url.host */
    gw_netaddr_t connect;  /* --connect */
    const char *token;     /* the access token (from the environment), NULL for none */
    const char *token_env; /* the variable's name, for messages; NULL for none */
    SSL_CTX *ssl_ctx;      /* client context: system trust store or --ca */
} gw_forward_conf_t;

/* A client SSL_CTX: TLS 1.2 at least, peer verification on, trusting the
 * system store, or only the PEM certificates of ca_file when not NULL.
 * Returns NULL with *err (malloc'd) on failure. */
SSL_CTX *gw_wss_ssl_ctx_new(const char *ca_file, char **err);

/* Connects to the gateway and completes a verified TLS handshake by
 * `deadline` (gw_wss_now_ms() clock). Returns the SSL on a non-blocking
 * socket (*fd), or NULL with a one-line reason in why. */
SSL *gw_wss_dial(const gw_forward_conf_t *conf, uint64_t deadline, int *fd, char *why, size_t whylen);

/* Waits until the SSL call that returned `ret` can be retried, or the
 * deadline passes. Returns 0 to retry, -1 when it failed for good (*why
 * says why when why is not NULL) or timed out. */
int gw_wss_ssl_wait(SSL *ssl, int fd, int ret, uint64_t deadline, char *why, size_t whylen);

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t gw_wss_now_ms(void);

#endif
