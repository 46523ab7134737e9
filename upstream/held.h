/*
 * The response bytes a worker holds (read from sandboxes, not yet taken by
 * their clients), summed over the worker and per client connection: the
 * ledger the memory budgets (limits.max_worker_buffer_bytes,
 * limits.max_connection_buffer_bytes) are checked against, and the rule of
 * which response goes first when one is exceeded. One per worker, on its
 * thread only.
 */
#ifndef GW_UPSTREAM_HELD_H
#define GW_UPSTREAM_HELD_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_gw_held_t gw_held_t;

gw_held_t *gw_held_new(void);
/* NULL is a no-op. */
void gw_held_free(gw_held_t *h);

/* One response of connection `conn` held `before` bytes and holds `now`:
 * both sums move by the difference. A connection whose sum comes back to 0
 * is forgotten (a worker sees millions of connections). */
void gw_held_move(gw_held_t *h, uint64_t conn, size_t before, size_t now);

/* The worker's sum, and connection `conn`'s (0 for one not held). */
size_t gw_held_total(const gw_held_t *h);
size_t gw_held_of(const gw_held_t *h, uint64_t conn);
/* How many connections hold something (metrics, tests). */
size_t gw_held_connections(const gw_held_t *h);

/* 1 while the worker holds more than worker_max, or `conn` more than conn_max. */
int gw_held_over(const gw_held_t *h, uint64_t conn, size_t conn_max, size_t worker_max);

/* While gw_held_over(conn): 1 when a response of `victim_conn` holding
 * `victim_held` bytes is to be reset for it. Over the worker's budget any
 * response that holds something goes; over only conn's, only conn's own. */
int gw_held_is_victim(const gw_held_t *h, uint64_t conn, size_t worker_max, uint64_t victim_conn, size_t victim_held);

#endif
