/*
 * Exact, allocation-free number formatting for the request path: unsigned
 * decimal and hexadecimal, and IPv4 dotted quads, as snprintf("%llu"),
 * snprintf("%llx") and inet_ntop(AF_INET) write them, without the printf
 * machinery (vfprintf showed in the per-request profile, issue 11).
 */
#ifndef GW_COMMON_NUMFMT_H
#define GW_COMMON_NUMFMT_H

#include <stddef.h>
#include <stdint.h>

/* Buffer sizes, the terminating NUL included. */
#define GW_NUMFMT_DEC_SIZE sizeof("18446744073709551615")
#define GW_NUMFMT_HEX_SIZE sizeof("ffffffffffffffff")
#define GW_NUMFMT_IPV4_SIZE sizeof("255.255.255.255") /* INET_ADDRSTRLEN */

/* Writes v in decimal into buf (at least GW_NUMFMT_DEC_SIZE bytes),
 * NUL-terminated; returns the length, 1 to 20. */
size_t gw_numfmt_dec(char *buf, uint64_t v);

/* Writes v in lowercase hexadecimal, no leading zeros ("0" for 0), into buf
 * (at least GW_NUMFMT_HEX_SIZE bytes), NUL-terminated; returns the length. */
size_t gw_numfmt_hex(char *buf, uint64_t v);

/* Writes the IPv4 address at addr (4 bytes, network order, as in
 * struct in_addr) as a dotted quad into buf (at least GW_NUMFMT_IPV4_SIZE
 * bytes), NUL-terminated; returns the length, 7 to 15. */
size_t gw_numfmt_ipv4(char *buf, const void *addr);

#endif
