/*
 * The HTTP/1.1 upgrade of one tcp-forward tunnel (CONTRACT.md, Raw TCP
 * ports): GET /.lizard/tcp with Sec-WebSocket-Protocol: lizard.tcp.v1 and
 * the token, then either 101 (checked: Sec-WebSocket-Accept, the protocol)
 * or the gateway's error, explained in one line.
 */
#ifndef GW_FORWARD_WSS_HANDSHAKE_H
#define GW_FORWARD_WSS_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>
#include "forward/wss_dial.h"

#define GW_WSS_SUBPROTOCOL "lizard.tcp.v1"

/* Sends the upgrade on ssl (non-blocking socket fd) and reads the answer by
 * the deadline. On 101 returns 0 and copies what followed the response head
 * (the first WebSocket bytes) into rest (*rest_len of them, at most
 * rest_cap). Otherwise returns the HTTP status (or -1 for no valid answer)
 * with the reason, one line, in why. */
int gw_wss_handshake(SSL *ssl, int fd, const gw_forward_conf_t *conf, uint64_t deadline, char *rest, size_t rest_cap,
                     size_t *rest_len, char *why, size_t whylen);

/* The one-line reason for a refusal: status, the gateway's JSON error body
 * (body, len; NULL or not JSON when the answer was not the gateway's own)
 * and what the user of tcp-forward can do about it. */
void gw_wss_explain_refusal(const gw_forward_conf_t *conf, int status, const char *body, size_t len, char *why, size_t whylen);

#endif
