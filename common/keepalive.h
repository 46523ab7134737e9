/*
 * TCP keepalive on the gateway's client and sandbox sockets (docs/long-calls.md, Long
 * calls): a call that says nothing for ten minutes keeps its place in the
 * L4 balancers and NATs between, and a peer that vanished is found.
 */
#ifndef GW_COMMON_KEEPALIVE_H
#define GW_COMMON_KEEPALIVE_H

/* The first probe after this much silence (below the 350 s idle timeout of
 * common cloud NATs and balancers, e.g. AWS NLB and NAT gateways), then one
 * every GW_TCP_KEEPALIVE_INTERVAL_S; a peer that answers none of
 * GW_TCP_KEEPALIVE_COUNT probes is dead: found 60 + 3 x 20 = 120 s after it
 * went silent. */
#define GW_TCP_KEEPALIVE_IDLE_S 60
#define GW_TCP_KEEPALIVE_INTERVAL_S 20
#define GW_TCP_KEEPALIVE_COUNT 3

/* Turns keepalive on for the TCP socket fd with those settings (a listening
 * socket passes them to the sockets it accepts). Returns 0, or -1 (errno)
 * when the kernel refused one of them. */
int gw_tcp_keepalive_set(int fd);

#endif
