/*
 * Fetching custom-domain certificates on a worker's loop (tls/dyncert.h
 * holds them): a handshake whose SNI misses the cache is paused (OpenSSL's
 * client-hello callback returns retry; libh2o patch 0240 resumes it), one
 * EVAL reads <prefix>domain:{<host>} and the <prefix>cert:{<name>} it names
 * in one round trip, the key is unsealed (tls/seal.h), and every handshake
 * waiting for that host on this worker is resumed with the answer. At most
 * one fetch per host per worker is in flight; each is bounded by
 * tls.cert_fetch_timeout_ms (the Redis command's deadline), and costs its
 * client a token of the process's budget of such reads (random names from
 * one client cannot load Redis: routing.domain_lookups_*).
 */
#ifndef GW_TLS_CERT_FETCH_H
#define GW_TLS_CERT_FETCH_H

#include <h2o.h>
#include <openssl/ssl.h>
#include "common/addr_budget.h"
#include "common/redis.h"
#include "tls/dyncert.h"

typedef struct st_gw_cert_fetch_t gw_cert_fetch_t;

/* The fetcher of the calling thread (a worker), using its Redis connection (borrowed). Handshakes on threads
 * without one are refused "unavailable" on a miss. `budget` (borrowed, the process's; NULL: none): a fetch takes a
 * token of the client's (its address at the handshake: the TCP peer, or the PROXY header's) and of everyone's first,
 * and a handshake over it is refused "rate_limited" (unrecognized_name) without a Redis call. Never NULL. */
gw_cert_fetch_t *gw_cert_fetch_new(h2o_loop_t *loop, gw_redis_t *redis, gw_dyncert_t *d, gw_addr_budget_t *budget);

/* A message on <prefix>routes (NULL: the subscription was (re)confirmed): evicts (gw_dyncert_on_publish), and
 * no fetch already in flight on this worker stores its answer. On the fetcher's thread. */
void gw_cert_fetch_on_publish(gw_cert_fetch_t *f, const char *message, size_t len);

/* The client-hello callback's part for a custom name (tls.c calls it): switches ssl to the host's certificate
 * and returns SSL_CLIENT_HELLO_SUCCESS, pauses (SSL_CLIENT_HELLO_RETRY), or refuses (SSL_CLIENT_HELLO_ERROR with
 * *alert = unrecognized_name). */
int gw_cert_fetch_client_hello(gw_dyncert_t *d, SSL *ssl, h2o_iovec_t name, int *alert);

#endif
