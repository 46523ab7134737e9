/*
 * Custom domains (CONTRACT.md, "Custom domains"): a Host that is not under a
 * preview domain is looked up as HGETALL <prefix>domain:{<host>}, one store
 * per worker, on the route store's cache (routing/keyed_cache.h):
 * single-flight misses, negative entries, a TTL, eviction by a publish of
 * "domain:<host>" on <prefix>routes and a whole-cache drop when that
 * subscription is (re)confirmed.
 */
#ifndef GW_ROUTING_DOMAIN_STORE_H
#define GW_ROUTING_DOMAIN_STORE_H

#include <stdint.h>
#include <h2o.h>
#include "common/addr_budget.h"
#include "common/redis.h"
#include "routing/host.h"
#include "routing/route_store.h"

/* Longest host name looked up (DNS: 253 bytes without the trailing dot). */
#define GW_DOMAIN_HOST_MAX 253

/* Entries one store holds at most (positive and negative); beyond it the one
 * confirmed longest ago goes, so random Host headers cannot grow memory
 * without bound. Entries with a fetch in flight are not dropped. */
#define GW_DOMAIN_CACHE_MAX_ENTRIES 20000

typedef struct st_gw_domain_store_t gw_domain_store_t;
typedef gw_keyed_lookup_t gw_domain_lookup_t;

/* What an `active` record maps the host to. */
typedef struct st_gw_domain_t {
    char sandbox_id[GW_SANDBOX_ID_MAX + 1]; /* lowercase */
    uint16_t port;
} gw_domain_t;

typedef enum {
    GW_DOMAIN_ACTIVE = GW_KEYED_FOUND,
    GW_DOMAIN_NOT_SERVED = GW_KEYED_NOT_FOUND,    /* no record, not `active`, or a record that names no valid sandbox and port */
    GW_DOMAIN_UNAVAILABLE = GW_KEYED_UNAVAILABLE, /* Redis down or the deadline passed, and no usable cached entry */
} gw_domain_status_t;

/* `domain` is valid during the call only; non-NULL only with GW_DOMAIN_ACTIVE. */
typedef void (*gw_domain_cb)(void *data, gw_domain_status_t status, const gw_domain_t *domain);

typedef struct st_gw_domain_store_conf_t {
    const char *prefix;                  /* key prefix, e.g. "lizard:" */
    uint64_t lookup_timeout_ms;          /* deadline of one lookup */
    uint64_t cache_ttl_ms;               /* an entry answers without asking Redis this long after it was read */
    uint64_t negative_ttl_ms;            /* "not served" is remembered this long */
    uint64_t stale_ttl_ms;               /* while Redis cannot answer, active entries read less than this long ago still serve */
    gw_route_store_counters_t *counters; /* NULL: not counted; borrowed (the route store's meaning, for domains) */
    const gw_route_store_t *routes;      /* whose subscription carries the publishes: entries are trusted only while it listens */
    gw_addr_budget_t *budget;            /* NULL: none; else a lookup that would read Redis takes a token of its client
                                          * first (borrowed, the process's: shared with tls/cert_fetch.c) */
} gw_domain_store_conf_t;

/* Normalizes a Host/:authority for the lookup: strips a ":port" suffix and
 * one trailing dot, lowercases into `out` (GW_DOMAIN_HOST_MAX + 1 bytes,
 * NUL-terminated). Returns the length, or 0 when it cannot be a DNS name
 * (bytes other than letters, digits, '-' and '.', an empty or over-long
 * label, an IP literal, a bad port suffix): such a host is never looked up. */
size_t gw_domain_host_normalize(h2o_iovec_t authority, char *out);

/* The store borrows `redis` and conf->routes (both the worker's); conf is
 * copied. Never NULL. */
gw_domain_store_t *gw_domain_store_new(h2o_loop_t *loop, gw_redis_t *redis, const gw_domain_store_conf_t *conf);

/* Drops open lookups without calling them back. NULL is a no-op. */
void gw_domain_store_free(gw_domain_store_t *s);

/* Starts the lookup of `host` (normalized by gw_domain_host_normalize) for
 * the client at `client` (an IP address; NULL: unknown). cb is always called later from the
 * loop (never from inside this call; a cache hit answers on the next loop
 * turn), exactly once, no later than lookup_timeout_ms after its fetch was
 * sent (a publish of the host that detaches that fetch makes it join one sent
 * after the publish, at most 4 times, then it is answered
 * GW_DOMAIN_UNAVAILABLE), unless gw_domain_lookup_cancel comes first. An
 * answer never predates a publish of the host that the store saw before
 * answering. A lookup that would read Redis for a host the store holds no
 * record of while the client (or everyone) is over conf.budget is answered
 * GW_DOMAIN_NOT_SERVED without a Redis call (the budget counts it); reading
 * again an active record it holds costs no token. Never NULL. */
gw_domain_lookup_t *gw_domain_store_lookup(gw_domain_store_t *s, const char *host, const struct sockaddr_storage *client,
                                           gw_domain_cb cb, void *data);

/* After this, the lookup's callback is never called. Not from inside it. */
void gw_domain_lookup_cancel(gw_domain_lookup_t *l);

/* A message on <prefix>routes that is not a sandbox id: "domain:<host>"
 * evicts that host (case-insensitive, a trailing dot ignored); anything else
 * is ignored. */
void gw_domain_store_on_message(gw_domain_store_t *s, const char *payload, size_t len);

/* The subscription was (re)confirmed: messages may have been lost, nothing
 * cached is trusted before it is read again. */
void gw_domain_store_flush(gw_domain_store_t *s);

/* Entries currently held (tests, metrics). */
size_t gw_domain_store_num_entries(const gw_domain_store_t *s);

#endif
