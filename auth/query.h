/*
 * The ?lizard_token= query parameter: finding it and removing it from a
 * request target while keeping every other parameter, in order, byte for byte.
 */
#ifndef GW_AUTH_QUERY_H
#define GW_AUTH_QUERY_H

#include <h2o/memory.h>

/* Looks for the parameter `name` (matched after percent-decoding the
 * parameter's name) in the query of `path` (the request target, "/a?b=c").
 * When found: *value is its first value, percent-decoded (from pool; empty
 * for "name" or "name="), *stripped is the target with every occurrence of
 * the parameter removed (the '?' dropped too when nothing remains), and the
 * return value is the number of occurrences. Returns 0 when absent (then
 * *stripped == path). */
size_t gw_query_take(h2o_mem_pool_t *pool, h2o_iovec_t path, h2o_iovec_t name, h2o_iovec_t *value, h2o_iovec_t *stripped);

#endif
