/*
 * A sandbox as the control plane writes it to Redis (hash
 * <prefix>sbx:{<id>}, ../shared/CONTRACT.md): parsed once from an HGETALL
 * reply into an immutable, refcounted record that caches and requests share.
 */
#ifndef GW_ROUTING_SANDBOX_H
#define GW_ROUTING_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include <h2o/memory.h>
#include "routing/host.h"
#include "common/netaddr.h"
#include "routing/ingress.h"

typedef enum {
    GW_SANDBOX_RUNNING = 0,
    GW_SANDBOX_STARTING,
    GW_SANDBOX_PAUSED,
    GW_SANDBOX_STOPPED,
    GW_SANDBOX_STATE_UNKNOWN, /* missing or unrecognised: never proxied */
} gw_sandbox_state_t;

typedef enum {
    GW_PORT_NOT_EXPOSED = 0,
    GW_PORT_PRIVATE,
    GW_PORT_PUBLIC,
} gw_port_access_t;

/* How a port sees its own address (field host:<n>; ../shared/CONTRACT.md,
 * Forwarding: the sandbox's view of its address). */
typedef enum {
    GW_PORT_HOST_DEFAULT = 0, /* absent (or not recognised): upstream.host_header decides */
    GW_PORT_HOST_PRESERVE,
    GW_PORT_HOST_LOCALHOST,
} gw_port_host_t;

typedef struct st_gw_sandbox_port_t {
    uint16_t port;
    gw_port_access_t access;
    gw_port_host_t host;
    int tcp; /* proto:<n> is "tcp": reached only through the TCP tunnel (/.lizard/tcp) */
    int h2c; /* proto:<n> is "h2c": HTTP/2 with prior knowledge to the app (gRPC; upstream/h2c.h, docs/grpc.md) */
    int rfb; /* proto:<n> is "rfb": a VNC server, a desktop: the gateway's viewer and a WebSocket to it (docs/desktops.md) */
    uint32_t
        timeout_ms; /* timeout:<n>, GW_SANDBOX_MIN_TIMEOUT_MS .. the parser's cap; 0: absent or ignored (the config's defaults) */
    /* cors:<n> = edge (CONTRACT.md, "CORS at the edge"): the gateway answers the port's CORS itself, for the
     * origins of cors_origins:<n> (http/cors.h); 0: CORS is the app's business */
    unsigned cors_edge : 1;
    unsigned cors_any : 1;    /* cors_origins:<n> has "*": any origin but null, without credentials */
    h2o_iovec_t cors_origins; /* the exact origins, normalized (lowercase, no default port), each followed by ','; in the
                                 record's own storage; {NULL, 0}: none */
} gw_sandbox_port_t;

/* Bounds of timeout:<n> (CONTRACT.md: 1000 to upstream.max_port_timeout_ms). */
#define GW_SANDBOX_MIN_TIMEOUT_MS 1000
#define GW_SANDBOX_MAX_TIMEOUT_MS 86400000 /* the largest upstream.max_port_timeout_ms */

/* Bytes of the addr field kept for the operator's log line. */
#define GW_SANDBOX_ADDR_TEXT_MAX 64

/* Bytes of an unrecognised host:<n> value kept for the operator's log line. */
#define GW_SANDBOX_BAD_HOST_MAX 32

typedef struct st_gw_sandbox_t {
    char id[GW_SANDBOX_ID_MAX + 1];
    gw_sandbox_state_t state;
    int has_addr;      /* 0 when addr is missing or not an IP literal */
    gw_netaddr_t addr; /* port 0; the caller sets the route's port */
    /* the addr field as the record has it, for the operator's log line when
     * it is refused: cut at GW_SANDBOX_ADDR_TEXT_MAX bytes, unprintable bytes
     * (and '"') as '?', NUL-terminated; has_addr_field 0: the field is absent */
    int has_addr_field;
    char addr_text[GW_SANDBOX_ADDR_TEXT_MAX + 1];
    h2o_iovec_t lifecycle;          /* NUL-terminated; "" when missing */
    h2o_iovec_t project;            /* NUL-terminated; "" when missing */
    int has_token;                  /* token_sha256 present and 64 hex digits */
    char token_sha256[65];          /* lowercase hex */
    unsigned char token_digest[32]; /* the same digest decoded once here, not per request */
    int resume_auto;                /* resume is "auto": a request while paused wakes it */
    int link_epoch_ok;              /* link_epoch absent (0) or a decimal; 0: malformed, every share link is refused */
    uint64_t link_epoch;            /* share links signed with another epoch are refused */
    gw_sandbox_port_t *ports;       /* sorted by port */
    size_t num_ports;
    /* the first host:<n> field of an exposed port whose value is neither
     * preserve nor localhost (that port falls back to upstream.host_header);
     * bad_host_port 0: none. The value is cut at GW_SANDBOX_BAD_HOST_MAX bytes,
     * unprintable bytes as '?', NUL-terminated. */
    uint16_t bad_host_port;
    char bad_host_value[GW_SANDBOX_BAD_HOST_MAX + 1];
    /* the first timeout:<n> of an exposed port that is not a decimal from
     * GW_SANDBOX_MIN_TIMEOUT_MS to the cap (that port keeps the defaults);
     * bad_timeout_port 0: none. The value as bad_host_value. */
    uint16_t bad_timeout_port;
    char bad_timeout_value[GW_SANDBOX_BAD_HOST_MAX + 1];
    /* the first cors_origins:<n> entry of an exposed port that is not an origin (ignored, the others hold);
     * bad_cors_port 0: none. Cut and made printable as bad_host_value. */
    uint16_t bad_cors_port;
    char bad_cors_value[GW_SANDBOX_BAD_HOST_MAX + 1];
    /* who may reach it and how much (routing/ingress.h), parsed once per fetch */
    gw_ingress_t *ingress; /* NULL: neither ingress_allow nor ingress_deny */
    uint32_t req_rate;     /* requests per second on this gateway; 0: unlimited */
    uint64_t egress_quota; /* bytes; GW_EGRESS_QUOTA_NONE: unlimited */
    uint64_t egress_total; /* <prefix>egress:{<id>} read with the record (route_store.c); 0: absent or unreadable */
    size_t refcnt;         /* only touched by the owning thread */
} gw_sandbox_t;

/* 1 when the sandbox's metered egress, as read with its record, has reached
 * its egress_quota: new requests and tunnels are refused (docs/access-control.md, "Who may
 * reach a sandbox, and how much"). One integer test without a quota. */
static inline int gw_sandbox_quota_reached(const gw_sandbox_t *s)
{
    return s->egress_total >= s->egress_quota;
}

/* Parses an HGETALL reply (flat array of field/value strings). An empty
 * array means "no such sandbox": returns 0 with *out = NULL. Malformed
 * fields are tolerated (the state becomes UNKNOWN, the port is skipped);
 * only a reply that is not an array is an error (-1, *err static). */
int gw_sandbox_parse(const char *id, const redisReply *reply, gw_sandbox_t **out, const char **err);

/* gw_sandbox_parse with the largest timeout:<n> accepted
 * (upstream.max_port_timeout_ms; gw_sandbox_parse's is
 * GW_SANDBOX_MAX_TIMEOUT_MS): a larger one is ignored like a malformed one. */
int gw_sandbox_parse_capped(const char *id, const redisReply *reply, uint64_t max_timeout_ms, gw_sandbox_t **out, const char **err);

/* The entry of `port`, or NULL when it is not exposed. */
const gw_sandbox_port_t *gw_sandbox_port(const gw_sandbox_t *s, uint16_t port);

/* Access rule of `port`. */
gw_port_access_t gw_sandbox_port_access(const gw_sandbox_t *s, uint16_t port);

/* Host mode of `port` (GW_PORT_HOST_DEFAULT when it is not exposed). */
gw_port_host_t gw_sandbox_port_host(const gw_sandbox_t *s, uint16_t port);

/* 1 when `port` is exposed with proto:<n> = tcp (a raw TCP service), else 0. */
int gw_sandbox_port_is_tcp(const gw_sandbox_t *s, uint16_t port);
/* 1 when `port` is exposed with proto:<n> = rfb (a desktop), else 0. */
int gw_sandbox_port_is_rfb(const gw_sandbox_t *s, uint16_t port);

/* "running", "starting", ... */
const char *gw_sandbox_state_name(gw_sandbox_state_t st);

void gw_sandbox_retain(gw_sandbox_t *s);
/* Drops a reference; frees at zero. NULL is a no-op. */
void gw_sandbox_release(gw_sandbox_t *s);

#endif
