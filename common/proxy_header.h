/*
 * The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2)
 * that an L4 load balancer writes before anything else on a connection, to
 * name the client it forwards. A pure parser, fed whatever bytes have
 * arrived so far; gateway/proxy_protocol.c reads it off an accepted socket.
 */
#ifndef GW_COMMON_PROXY_HEADER_H
#define GW_COMMON_PROXY_HEADER_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* v1: a text line; the specification's own maximum, "PROXY TCP6" with two
 * full IPv6 addresses and two ports, CRLF included. */
#define GW_PROXY_HEADER_V1_MAX 107
/* v2: 16 fixed bytes, then an address block and TLVs of the length the
 * header announces, bounded here so that the whole header is at most 4096
 * bytes, nginx's bound (NGX_PROXY_PROTOCOL_MAX_HEADER): the largest address
 * block (216 bytes, AF_UNIX) plus every TLV the specification registers at
 * its largest (ALPN, AUTHORITY, UNIQUE_ID, SSL with its sub-TLVs, NETNS:
 * about 1.5 KiB) and the cloud balancers' own (AWS VPC endpoint id, Azure
 * link id, GCP PSC id: under 40 bytes each) fit with room to spare. */
#define GW_PROXY_HEADER_V2_MAX (16 + 4080)

typedef struct st_gw_proxy_header_t {
    int version; /* 1 or 2 */
    /* 1: src is the client's address; 0: the header names none (v1
     * UNKNOWN, v2 LOCAL - the balancer's own health check - or a v2 family
     * other than TCP over IPv4/IPv6): the socket's own peer stands */
    int has_src;
    struct sockaddr_storage src; /* AF_INET or AF_INET6, with the client's port */
    socklen_t src_len;
} gw_proxy_header_t;

/* Parses the header at the start of buf[0..len), the bytes received so far.
 * Returns the header's length (> 0; the bytes after it are the client's
 * first bytes, a TLS ClientHello or an HTTP request) with *out filled; 0
 * when the bytes are a valid beginning of a header and more are needed; -1
 * when they can begin no valid header (another protocol, a malformed or
 * truncated-then-continued header, v1 over 107 bytes, v2 over
 * GW_PROXY_HEADER_V2_MAX, TLVs that overrun the header). A buffer that
 * returned 0 returns -1 or a length once GW_PROXY_HEADER_V2_MAX bytes are
 * there, so a reader that stops at that many never waits for more. v2 TLVs
 * are checked to fit and skipped. */
ssize_t gw_proxy_header_parse(const void *buf, size_t len, gw_proxy_header_t *out);

/* What became of the connections of proxy_protocol listeners (one block per
 * worker, written by its thread only: common/counter.h). */
typedef struct st_gw_proxy_header_counters_t {
    atomic_uint_fast64_t accepted; /* a valid header was read: the connection went on */
    atomic_uint_fast64_t invalid;  /* closed: the first bytes were no valid PROXY header */
    atomic_uint_fast64_t timeout;  /* closed: no complete header within limits.proxy_header_timeout_ms */
    atomic_uint_fast64_t closed;   /* the peer closed or reset before a complete header */
} gw_proxy_header_counters_t;

#endif
