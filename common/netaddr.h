/*
 * Socket addresses and networks as the configuration spells them:
 * "127.0.0.1:6379", "[::1]:443", "unix:/run/redis.sock", "10.0.0.0/8".
 * Pure functions, no I/O; used for listeners, Redis and allowed_networks.
 */
#ifndef GW_ROUTING_NETADDR_H
#define GW_ROUTING_NETADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct st_gw_netaddr_t {
    struct sockaddr_storage ss; /* AF_INET, AF_INET6 or AF_UNIX */
    socklen_t len;
} gw_netaddr_t;

typedef struct st_gw_cidr_t {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    unsigned prefix; /* 0..32 or 0..128 */
} gw_cidr_t;

/* Parses a decimal port 1..65535: digits only, no sign, no leading zero (the
 * rule for hostnames, "port:<n>" fields and addresses alike). 0 or -1. */
int gw_port_parse(const char *s, size_t len, uint16_t *out);

/* Parses "ipv4:port", "[ipv6]:port" or (when allow_unix) "unix:/path".
 * IP literals only: a hostname is an error. Returns 0, or -1 with *err set
 * to a static string saying what was expected. */
int gw_netaddr_parse(const char *s, int allow_unix, gw_netaddr_t *out, const char **err);

/* Parses an IP literal without a port ("10.1.2.3", "fd00::1") into *out,
 * with port set to `port`. Returns 0 or -1. */
int gw_netaddr_parse_ip(const char *s, size_t len, uint16_t port, gw_netaddr_t *out);

/* Writes "ip:port" / "[ip]:port" / "unix:/path" into buf (NUL-terminated).
 * Returns the length written, or -1 if it does not fit. */
int gw_netaddr_format(const gw_netaddr_t *a, char *buf, size_t bufsize);

/* The IP address of a socket's peer as text, into buf of at least
 * INET6_ADDRSTRLEN bytes (NUL-terminated): IPv4 as a dotted quad (without
 * printf: every request writes one), an IPv4-mapped IPv6 address as the
 * IPv4 address it carries, other IPv6 as inet_ntop writes it. Returns the
 * length, or -1 (no address, not IP, buf too small). */
int gw_netaddr_peer_text(const struct sockaddr *sa, socklen_t len, char *buf, size_t bufsize);

/* Port of an AF_INET/AF_INET6 address (0 for AF_UNIX). */
uint16_t gw_netaddr_port(const gw_netaddr_t *a);

/* Parses "a.b.c.d/n" or "v6/n"; a bare address means a host prefix (/32,
 * /128). Bits beyond the prefix must be zero. Returns 0, or -1 with *err. */
int gw_cidr_parse(const char *s, gw_cidr_t *out, const char **err);

/* 1 when the IP of `sa` lies inside `c`. An IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d) is matched as the IPv4 address it carries. */
int gw_cidr_contains(const gw_cidr_t *c, const struct sockaddr *sa);

/* 1 when `sa` lies in any of the n networks. */
int gw_cidr_list_contains(const gw_cidr_t *list, size_t n, const struct sockaddr *sa);

/* 1 when `sa` is a loopback address: 127.0.0.0/8, ::1, or 127.0.0.0/8
 * mapped into IPv6. */
int gw_netaddr_is_loopback(const struct sockaddr *sa);

#endif
