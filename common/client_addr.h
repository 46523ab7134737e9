/*
 * The client's address of a connection, the one accessor for everything
 * that asks who the client is (limits, X-Forwarded-For, the access log,
 * ingress rules): the TCP peer's, or on a "proxy_protocol" listener the one
 * its PROXY header named (gateway/proxy_protocol.c makes it the socket's
 * peer before h2o sees the connection). Per request, behind a trusted
 * listener, http/pipeline.h's gw_pipeline_client_text takes the balancer's
 * X-Forwarded-For entry instead, for all of them alike.
 */
#ifndef GW_COMMON_CLIENT_ADDR_H
#define GW_COMMON_CLIENT_ADDR_H

#include <stddef.h>
#include <sys/socket.h>
#include <h2o.h>

/* The client's address into *ss: its length, 0 when unknown (a connection
 * without a socket). */
socklen_t gw_client_addr(h2o_conn_t *conn, struct sockaddr_storage *ss);

/* The same as text (gw_netaddr_peer_text: an IPv4-mapped IPv6 address as
 * IPv4) into buf of at least INET6_ADDRSTRLEN bytes, NUL-terminated: its
 * length, or -1 when unknown or not IP. */
int gw_client_addr_text(h2o_conn_t *conn, char *buf, size_t bufsize);

#endif
