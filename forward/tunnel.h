/*
 * One tunnel of tcp-forward: the bytes of a local TCP connection carried
 * as binary WebSocket messages over an upgraded TLS connection to the
 * gateway (CONTRACT.md, Raw TCP ports), both ways, in order, with bounded
 * buffers and back-pressure.
 */
#ifndef GW_FORWARD_TUNNEL_H
#define GW_FORWARD_TUNNEL_H

#include <stddef.h>
#include <openssl/ssl.h>

/* What ended a tunnel, for the one line tcp-forward prints. */
typedef struct st_gw_tunnel_end_t {
    unsigned close_code; /* the gateway's close code; 0 when it sent none */
    int local_closed;    /* 1: the local application ended the connection first */
    char why[256];       /* the reason, one line */
} gw_tunnel_end_t;

/* Room for the WebSocket bytes that followed the 101 (gw_wss_handshake's rest). */
#define GW_TUNNEL_FIRST_BYTES_MAX 65536

/* Relays between local_fd and the upgraded ssl (on gw_fd) until either side
 * ends, then fills *end. first/first_len: bytes already read after the
 * response head. Both descriptors are left open (the caller closes them);
 * both are made non-blocking. */
void gw_tunnel_run(int local_fd, SSL *ssl, int gw_fd, const void *first, size_t first_len, gw_tunnel_end_t *end);

#endif
