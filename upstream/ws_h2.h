/*
 * WebSocket over HTTP/2 (RFC 8441): an extended CONNECT with :protocol
 * websocket is made the HTTP/1.1 upgrade it stands for, which the pipeline
 * and the exchange handle as any (the sandbox gets an HTTP/1.1 upgrade); the
 * app's 101 is checked against the gateway's key, then the stream becomes
 * the tunnel's client (a stream end, tunnel_end.h).
 */
#ifndef GW_UPSTREAM_WS_H2_H
#define GW_UPSTREAM_WS_H2_H

#include <h2o.h>
#include "upstream/http1_head.h"

/* 1 when req is an HTTP/2 extended CONNECT (h2o checked that it has
 * :scheme, :path and :authority: RFC 8441 4). */
int gw_ws_h2_is_extended_connect(h2o_req_t *req);

/* 1 when req is a WebSocket upgrade: an HTTP/1.1 one, or an HTTP/2 extended
 * CONNECT made one (gw_ws_h2_as_upgrade, from http/phase_host.c). */
int gw_ws_h2_is_websocket(h2o_req_t *req);

/* The request's body as the upgrade's GET carries it: none for an extended
 * CONNECT, whose DATA is the tunnel's (tunnel_end.h); req->entity otherwise. */
h2o_iovec_t gw_ws_h2_request_body(h2o_req_t *req);

/* Makes the extended CONNECT req the upgrade's GET: method GET,
 * Upgrade websocket (req->upgrade, the :protocol), and a Sec-WebSocket-Key
 * of the gateway's (random; a client's own is dropped). req->input.method
 * stays CONNECT: the access log shows what the client sent. Returns 0, or
 * -1 when :protocol is not websocket (nothing changed). */
int gw_ws_h2_as_upgrade(h2o_req_t *req);

/* 1 when the app's 101 to such a request carries the Sec-WebSocket-Accept
 * of the gateway's key (the client, which never saw the key, cannot check
 * it: RFC 8441 5), 0 when not. */
int gw_ws_h2_accept_matches(h2o_req_t *req, const gw_http1_response_t *head);

#endif
