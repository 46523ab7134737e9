/*
 * Fetching custom-domain certificates on a worker's loop (tls/dyncert.h
 * holds them) before a connection's handshake starts: its SNI, peeked off
 * the ClientHello (gateway/sni_peek.c), is looked up here; on a miss one EVAL
 * reads <prefix>domain:{<host>} and the <prefix>cert:{<name>} it names in
 * one round trip, the key is unsealed (tls/seal.h), and every connection
 * waiting for that host on this worker gets the answer; the peek then hands
 * the socket to h2o, whose handshake's client-hello callback takes that
 * answer. Nothing pauses a TLS library, so this works with OpenSSL and
 * picotls alike. At most one fetch per host per worker is in flight; each is
 * bounded by tls.cert_fetch_timeout_ms (the Redis command's deadline), and
 * costs its client a token of the process's budget of such reads (random
 * names from one client cannot load Redis: routing.domain_lookups_*).
 */
#ifndef GW_TLS_CERT_FETCH_H
#define GW_TLS_CERT_FETCH_H

#include <h2o.h>
#include <openssl/ssl.h>
#include "common/addr_budget.h"
#include "common/redis.h"
#include "tls/dyncert.h"

typedef struct st_gw_cert_fetch_t gw_cert_fetch_t;

/* The fetcher of a worker, on its loop, using its Redis connection (borrowed). `budget` (borrowed, the process's; NULL: none): a
 * fetch takes a token of the client's (its address at the handshake: the TCP peer, or the PROXY header's) and of everyone's first,
 * and a handshake over it is refused "rate_limited" (unrecognized_name) without a Redis call. Never NULL. */
gw_cert_fetch_t *gw_cert_fetch_new(h2o_loop_t *loop, gw_redis_t *redis, gw_dyncert_t *d, gw_addr_budget_t *budget);

/* A message on <prefix>routes (NULL: the subscription was (re)confirmed): evicts (gw_dyncert_on_publish), and
 * no fetch already in flight on this worker stores its answer. On the fetcher's thread. */
void gw_cert_fetch_on_publish(gw_cert_fetch_t *f, const char *message, size_t len);

/* A connection's wait for the certificate of its SNI (one per connection, before its handshake). */
typedef struct st_gw_cert_wait_t gw_cert_wait_t;

/* Called once, on the fetcher's loop, when a wait that was not answered at once is; `data` as given. It may
 * free the wait. */
typedef void (*gw_cert_wait_cb)(void *data);

/* Before the handshake of a connection from `sock` (its client's address at the handshake: the TCP peer, or the
 * PROXY header's) whose ClientHello names `name` (as sent): NULL when the name is not a custom domain's (a static
 * certificate or a preview host serves it, or it is no host name: the client-hello callback answers those), else
 * a wait to free with gw_cert_wait_free. It is answered already (gw_cert_wait_answered: from the cache, a
 * negative entry, a stale entry when no fetch can be sent, or a refusal) or, with a fetch sent or joined, cb(data)
 * is called once when it is. */
gw_cert_wait_t *gw_cert_fetch_wait(gw_cert_fetch_t *f, h2o_iovec_t name, h2o_socket_t *sock, gw_cert_wait_cb cb, void *data);

/* 1 when w has its answer. */
int gw_cert_wait_answered(const gw_cert_wait_t *w);

/* Makes the answered w the answer of the handshake that the caller starts next on this thread, synchronously
 * (h2o_accept of a socket holding the whole ClientHello): its client-hello callback takes it, once. */
void gw_cert_wait_handover(gw_cert_wait_t *w);

/* Frees w (NULL: nothing), taking it off its flight when still waiting; no handshake takes it after. */
void gw_cert_wait_free(gw_cert_wait_t *w);

/* The client-hello callbacks' part for a custom name (tls.c calls it, for OpenSSL and picotls alike): the
 * certificate's SSL_CTX, with a reference for the caller, of the wait handed over for this handshake, or when none
 * was (no peek ran), of the cache (a stale entry too, as Redis cannot be asked from here); NULL when the name is
 * refused (the handshake fails with unrecognized_name; counted). */
SSL_CTX *gw_cert_fetch_choose(gw_dyncert_t *d, h2o_iovec_t name);

#endif
