/*
 * The --url of `lizard-gateway tcp-forward`: wss://HOST[:PORT]/PATH[?QUERY],
 * split into what the client needs to dial, verify and ask for. Pure
 * functions, no I/O.
 */
#ifndef GW_FORWARD_WSS_URL_H
#define GW_FORWARD_WSS_URL_H

#include <stdint.h>

#define GW_WSS_HOST_MAX 253
#define GW_WSS_PATH_MAX 2048

typedef struct st_gw_wss_url_t {
    char host[GW_WSS_HOST_MAX + 1]; /* a DNS name or an IP literal, IPv6 without its brackets */
    uint16_t port;                  /* 443 when the URL names none */
    int host_is_ip;                 /* 1: an IP literal (verified as an IP address, no SNI) */
    char path[GW_WSS_PATH_MAX + 1]; /* the request target: "/" at least, the query kept */
} gw_wss_url_t;

/* Parses s into *out. Only wss:// (the token must never cross the network
 * in clear); no user info, no fragment. Returns 0, or -1 with *err set to a
 * static sentence saying what is wrong. */
int gw_wss_url_parse(const char *s, gw_wss_url_t *out, const char **err);

/* The Host header's value for url into buf: "host", "host:port" when the
 * port is not 443, IPv6 literals in brackets. Returns the length, or -1
 * when it does not fit. */
int gw_wss_url_authority(const gw_wss_url_t *url, char *buf, size_t bufsize);

#endif
