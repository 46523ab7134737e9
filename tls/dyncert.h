/*
 * Certificates of custom domains (CONTRACT.md "Custom domains"), served to
 * SNI names that are neither under a preview domain nor named by a static
 * certificate. One cache per process, shared by the workers: positive
 * entries (an SSL_CTX per host, LRU, at most tls.max_dynamic_certs) and
 * negative ones (a definitive refusal, for routing.negative_ttl_ms, at most
 * GW_DYNCERT_MAX_NEGATIVE). A miss is fetched by the worker that met it
 * (tls/cert_fetch.h) while its handshake is paused.
 *
 * Lifetimes: the cache holds one reference on each SSL_CTX; a handshake
 * takes its own under the cache's mutex (SSL_set_SSL_CTX then keeps one for
 * the connection), so an eviction, a replacement or a publish never drops an
 * open connection: the old SSL_CTX lives as long as connections use it.
 */
#ifndef GW_TLS_DYNCERT_H
#define GW_TLS_DYNCERT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>
#include <h2o/memory.h>
#include "tls/seal.h"

#define GW_DYNCERT_MAX_NEGATIVE 10000
#define GW_DYNCERT_MAX_NAME 253 /* a DNS name */
/* upper bounds (ms) of the pause histogram; one more bucket for anything above */
#define GW_DYNCERT_PAUSE_BUCKETS 8
#define GW_DYNCERT_PAUSE_BOUNDS                                                                                                    \
    {                                                                                                                              \
        1, 5, 10, 25, 50, 100, 250, 500                                                                                            \
    }
/* upper bounds (days, exclusive) of the expiry gauge; one more bucket for anything later */
#define GW_DYNCERT_EXPIRY_BUCKETS 4
#define GW_DYNCERT_EXPIRY_BOUNDS                                                                                                   \
    {                                                                                                                              \
        7, 14, 30, 60                                                                                                              \
    }

typedef struct st_gw_dyncert_t gw_dyncert_t;
typedef struct st_gw_tls_t gw_tls_t;

/* Why a custom name got no certificate; the metrics label is gw_dyncert_reason_name(). The first ones are
 * definitive (remembered as a negative entry), TIMEOUT, UNAVAILABLE and RATE_LIMITED are not. */
typedef enum {
    GW_DYNCERT_OK = 0,
    GW_DYNCERT_NO_DOMAIN,     /* no <prefix>domain:{<host>} */
    GW_DYNCERT_NOT_ACTIVE,    /* its state is not "active" */
    GW_DYNCERT_NO_CERT,       /* no `cert`, or no complete <prefix>cert:{<name>} */
    GW_DYNCERT_BAD_SEAL,      /* the key does not unseal (tampered, other key, other name) */
    GW_DYNCERT_BAD_CERT,      /* chain or key unreadable, or not a pair */
    GW_DYNCERT_NAME_MISMATCH, /* the certificate does not serve the host */
    GW_DYNCERT_EXPIRED,       /* not_after has passed */
    GW_DYNCERT_BAD_NAME,      /* the SNI is not a host name: never looked up */
    GW_DYNCERT_TIMEOUT,       /* no answer within tls.cert_fetch_timeout_ms */
    GW_DYNCERT_UNAVAILABLE,   /* Redis down, an error reply, or no fetcher on this thread */
    GW_DYNCERT_RATE_LIMITED,  /* its client (or everyone) is over the budget of Redis reads: never looked up */
    GW_DYNCERT_NUM_REASONS
} gw_dyncert_reason_t;

#define GW_DYNCERT_DEFINITIVE(r) ((r) > GW_DYNCERT_OK && (r) < GW_DYNCERT_BAD_NAME)

/* Any thread adds (relaxed atomics); read by the metrics. */
typedef struct st_gw_dyncert_counters_t {
    atomic_uint_fast64_t hits;          /* handshakes served from the cache */
    atomic_uint_fast64_t misses;        /* handshakes paused for a fetch (sent or joined) */
    atomic_uint_fast64_t fetches;       /* EVALs sent */
    atomic_uint_fast64_t coalesced;     /* misses that joined a fetch in flight */
    atomic_uint_fast64_t negative_hits; /* refused from a negative entry, no Redis call */
    atomic_uint_fast64_t stale_served;  /* an unconfirmed cached certificate served because Redis could not answer */
    atomic_uint_fast64_t evictions;     /* positive entries dropped for tls.max_dynamic_certs */
    atomic_uint_fast64_t invalidations; /* entries dropped by a publish */
    atomic_uint_fast64_t fetch_errors[GW_DYNCERT_NUM_REASONS]; /* fetches (or refusals before one) that ended so */
    atomic_uint_fast64_t refused[GW_DYNCERT_NUM_REASONS];      /* handshakes refused with unrecognized_name */
    atomic_uint_fast64_t paused;                               /* handshakes resumed after a pause */
    atomic_uint_fast64_t pause_us_sum;
    atomic_uint_fast64_t pause_buckets[GW_DYNCERT_PAUSE_BUCKETS + 1];
    atomic_uint_fast64_t logs_suppressed; /* refusals not logged (already logged for that name, or over budget) */
} gw_dyncert_counters_t;

typedef struct st_gw_dyncert_conf_t {
    size_t max_certs;          /* tls.max_dynamic_certs */
    uint64_t negative_ttl_ms;  /* routing.negative_ttl_ms */
    uint64_t fetch_timeout_ms; /* tls.cert_fetch_timeout_ms */
    const char *prefix;        /* redis.prefix */
    char *const *domains;      /* the preview domains: names under them are never custom */
    size_t num_domains;
    unsigned char key[GW_SEAL_KEY_LEN]; /* from tls.sealed_key_env */
} gw_dyncert_conf_t;

/* A cache entry as a handshake sees it. */
typedef struct st_gw_dyncert_found_t {
    SSL_CTX *ctx;               /* a reference of the caller's own, or NULL */
    int stale;                  /* ctx must be confirmed: fetch, and serve it only if Redis cannot answer */
    gw_dyncert_reason_t reason; /* a negative entry: the refusal */
} gw_dyncert_found_t;

/* Copies conf; `tls` builds the SSL_CTXs (borrowed, outlives d). Never NULL. */
gw_dyncert_t *gw_dyncert_new(gw_tls_t *tls, const gw_dyncert_conf_t *conf);
void gw_dyncert_free(gw_dyncert_t *d);
const gw_dyncert_conf_t *gw_dyncert_conf(gw_dyncert_t *d);
gw_dyncert_counters_t *gw_dyncert_counters(gw_dyncert_t *d);
gw_tls_t *gw_dyncert_tls(gw_dyncert_t *d);
const char *gw_dyncert_reason_name(gw_dyncert_reason_t r);

/* 1 when `name` (lowercase) is not a preview domain nor under one. */
int gw_dyncert_is_custom(gw_dyncert_t *d, const char *name, size_t len);

/* Looks `host` (lowercase) up. Returns 1 with *found (a positive entry's ctx with a reference taken, or a
 * negative entry's reason), or 0 (nothing usable: fetch). Marks it most recently used. */
int gw_dyncert_lookup(gw_dyncert_t *d, const char *host, gw_dyncert_found_t *found);

/* Stores the certificate `cert_name` for `host` (takes a reference of its own on ctx), replacing what was
 * there, evicting the least recently used beyond tls.max_dynamic_certs. */
void gw_dyncert_store(gw_dyncert_t *d, const char *host, const char *cert_name, SSL_CTX *ctx, int64_t not_after);

/* Remembers a definitive refusal of `host` for routing.negative_ttl_ms (0: not at all). */
void gw_dyncert_store_negative(gw_dyncert_t *d, const char *host, gw_dyncert_reason_t reason);

/* A message on <prefix>routes: "domain:<host>" drops that host, "cert:<name>" every host of that certificate
 * (new handshakes fetch again; open connections keep theirs); anything else is ignored. NULL: the subscription
 * was (re)confirmed: negative entries go, positive ones must be confirmed before they serve again, except
 * while Redis cannot answer. Any thread. */
void gw_dyncert_on_publish(gw_dyncert_t *d, const char *message);

/* Positive entries now. */
size_t gw_dyncert_count(gw_dyncert_t *d);

/* Positive entries by days left until not_after (GW_DYNCERT_EXPIRY_BOUNDS; out[BUCKETS]: later ones);
 * an expired one counts in out[0]. */
void gw_dyncert_expiry(gw_dyncert_t *d, uint64_t out[GW_DYNCERT_EXPIRY_BUCKETS + 1]);

/* Logs a refusal of `host` once (a bounded table of names already logged, and at most a few lines a second
 * across the process); counted in logs_suppressed otherwise. */
void gw_dyncert_log_refusal(gw_dyncert_t *d, const char *host, gw_dyncert_reason_t reason);

#endif
