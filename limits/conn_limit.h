/*
 * Connections held at once per key, counted across every worker against one
 * limit: per sandbox (limits.max_connections_per_sandbox: proxied requests in
 * flight and WebSocket tunnels; over it 429 too_many_connections) and per
 * client address (limits.max_connections_per_client). Each worker counts in
 * its own table without a lock; a limit check sums the workers' counts.
 */
#ifndef GW_LIMITS_CONN_LIMIT_H
#define GW_LIMITS_CONN_LIMIT_H

#include <stddef.h>
#include <stdint.h>

/* Longest key: a sandbox id (GW_SANDBOX_ID_MAX) or an address as text
 * (INET6_ADDRSTRLEN - 1); a longer key is never granted. */
#define GW_CONN_LIMIT_KEY_MAX 56

typedef struct st_gw_conn_limit_t gw_conn_limit_t;

/*
 * Threads: gw_conn_limit_acquire and gw_conn_limit_release for a given
 * worker index are called only on that worker's thread, and a slot is given
 * back with the index that took it. Every caller does so: the pipeline takes
 * the sandbox's and the client address's slot on the request's worker, and
 * the exchange (upstream/proxy.c, response.c), the WebSocket tunnel that
 * takes the slots over (upstream/websocket.c) and the accepted client socket
 * (gateway/worker.c) give them back from callbacks of the same worker's
 * event loop, where all three live until they close. gw_conn_limit_count
 * may be called from any thread.
 *
 * Exactness: a worker sees its own count exactly and the others' as they
 * last published them (relaxed atomics). While a key is far from its limit
 * (the sum plus one admission from every worker still fits) an acquire locks
 * nothing; within `workers` slots of the limit the check and the count are
 * made under the shared mutex, so that workers racing for the last slots
 * see each other's. The limit can still be passed, by at most (workers - 1)
 * and only when workers that read the sum far from the limit are held up
 * (preempted) between that read and their count while others fill the last
 * slots: it is a limit against one sandbox or client taking every socket,
 * not an accounting, and that bound is accepted. With one worker, or a
 * limit below the number of workers, it is exact.
 *
 * Cost: a key is present only while some worker holds a slot of it. Per live
 * key there is one shared entry (64 bytes per worker, one cache line each so
 * that workers never write the same line, plus about 128 bytes) and, on each
 * worker holding a slot, a local entry of about 64 bytes. The shared table's
 * mutex is taken when a worker's count of a key goes 0 -> 1 or 1 -> 0, and
 * for an acquire near the limit; a key that stays held on a worker (a busy
 * sandbox below its limit) costs that worker no lock and no write to a line
 * another worker writes.
 */

/* A limit for `num_workers` worker indices (0 .. num_workers - 1; at least
 * 1). max == 0: no limit, counts only. Never NULL (out of memory aborts). */
gw_conn_limit_t *gw_conn_limit_new(uint64_t max, size_t num_workers);
/* Frees, with whatever slots are still held. NULL is a no-op. No thread may
 * use `l` during or after the call. */
void gw_conn_limit_free(gw_conn_limit_t *l);

/* Takes a slot of `key` for `worker` (on that worker's thread): 1 when
 * granted, 0 when the key is at the limit (or longer than
 * GW_CONN_LIMIT_KEY_MAX). Each grant is given back exactly once with
 * gw_conn_limit_release and the same worker index. */
int gw_conn_limit_acquire(gw_conn_limit_t *l, size_t worker, const char *key);

/* Gives back a slot of `key` taken by `worker` (on that worker's thread). A
 * release of a key the worker holds no slot of does nothing. */
void gw_conn_limit_release(gw_conn_limit_t *l, size_t worker, const char *key);

/* Slots held for `key` now, summed over the workers (tests and metrics);
 * any thread. */
uint64_t gw_conn_limit_count(gw_conn_limit_t *l, const char *key);

#endif
