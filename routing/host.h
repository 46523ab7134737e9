/*
 * Preview hostnames: "<port>-<sandboxId>.<domain>" (../shared/CONTRACT.md,
 * Hostnames). Pure parsing, no allocation; case-insensitive; a ":port"
 * suffix is ignored.
 */
#ifndef GW_ROUTING_HOST_H
#define GW_ROUTING_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/memory.h>
#include "common/sandbox_id.h"

typedef enum {
    GW_HOST_OK = 0,
    GW_HOST_UNKNOWN, /* not under any preview domain: 404 unknown_host */
    GW_HOST_BAD,     /* under a preview domain but malformed: 400 bad_host */
} gw_host_result_t;

typedef struct st_gw_host_t {
    uint16_t port;
    char sandbox_id[GW_SANDBOX_ID_MAX + 1]; /* lowercase, NUL-terminated */
    size_t domain_index;                    /* index into the domains array */
} gw_host_t;

/* Parses `host` (a Host header or :authority, possibly with ":port", possibly
 * with one trailing dot) against the preview domains (lowercase, without
 * leading dot). The longest matching domain wins. Fills *out on GW_HOST_OK. */
gw_host_result_t gw_host_parse(h2o_iovec_t host, char *const *domains, size_t num_domains, gw_host_t *out);

/* Strips a ":port" suffix (and IPv6 brackets are kept): returns the host part. */
h2o_iovec_t gw_host_strip_port(h2o_iovec_t host);

#endif
