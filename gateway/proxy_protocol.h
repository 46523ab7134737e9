/*
 * The accept step of a listener with "proxy_protocol": true: reads the
 * PROXY protocol header (common/proxy_header.h) that the load balancer
 * writes first, before the TLS ClientHello or the HTTP request, and makes
 * the client it names the socket's peer, the one address every later
 * reader (limits, X-Forwarded-For, the access log, ingress rules) asks for.
 */
#ifndef GW_GATEWAY_PROXY_PROTOCOL_H
#define GW_GATEWAY_PROXY_PROTOCOL_H

#include <h2o.h>
#include "common/engine.h"
#include "common/proxy_header.h"

/* Called once the header is read: `sock` is the caller's again. */
typedef void (*gw_proxy_protocol_cb)(h2o_socket_t *sock, void *data);

/* Reads the header of `sock` (just accepted, nothing read, sock->data
 * unused) within `timeout` (limits.proxy_header_timeout_ms; a timeout of the
 * socket's loop). On a valid header the socket's peer becomes the address it
 * carries (h2o_socket_setpeername; a header naming none - v1 UNKNOWN, v2
 * LOCAL - leaves the TCP peer), the bytes after the header stay in
 * sock->input, reading is stopped, sock->data is NULL and
 * on_header(sock, data) is called. Otherwise - other bytes, a header over its
 * bound, the timeout, the peer closing first - the socket is closed without
 * a byte written and on_header is never called. Every outcome is counted in
 * `counters` (the calling worker's). */
void gw_proxy_protocol_read(h2o_socket_t *sock, gw_timeout_t *timeout, gw_proxy_header_counters_t *counters,
                            gw_proxy_protocol_cb on_header, void *data);

#endif
