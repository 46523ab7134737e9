/*
 * The TCP tunnel of a proto:<n> = tcp port (../shared/CONTRACT.md, Raw TCP
 * ports): one WebSocket (subprotocol lizard.tcp.v1) per TCP connection to
 * the sandbox, binary messages carrying its bytes both ways.
 */
#ifndef GW_UPSTREAM_TCP_TUNNEL_H
#define GW_UPSTREAM_TCP_TUNNEL_H

#include <h2o.h>

/* The tunnel's path and subprotocol. */
#define GW_TCP_TUNNEL_PATH "/.lizard/tcp"
#define GW_TCP_TUNNEL_PROTOCOL "lizard.tcp.v1"

/* 1 when req (whose target, credentials removed, is `path`) opens a TCP
 * tunnel: an HTTP/1.1 GET of GW_TCP_TUNNEL_PATH (any query) upgrading to
 * websocket, version 13, with a key and GW_TCP_TUNNEL_PROTOCOL among its
 * subprotocols; else 0 (the gateway answers 400 not_http_port). */
int gw_tcp_tunnel_is_handshake(h2o_req_t *req, h2o_iovec_t path);

/* 1 when req opens a desktop's tunnel (a proto:<n> = rfb port, CONTRACT.md
 * Desktops): an HTTP/1.1 GET of any path upgrading to websocket, version 13,
 * with a key, and either no Sec-WebSocket-Protocol or "binary" among its
 * subprotocols (the 101 then names it); else 0. The tunnel is a TCP
 * tunnel's, whose client's bytes a view-only grant walks (rfb_walk.h). */
int gw_rfb_tunnel_is_handshake(h2o_req_t *req);

#endif
