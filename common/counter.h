/*
 * Counters that one thread writes and any thread reads (/metrics): each
 * worker counts into its own cache lines, and readers sum over workers.
 */
#ifndef GW_COMMON_COUNTER_H
#define GW_COMMON_COUNTER_H

#include <stdatomic.h>

/* The cache line size the per-worker blocks are aligned to, so that two
 * workers never write the same line. */
#define GW_CACHE_LINE 64

/* Adds n to *c, an atomic integer only the calling thread ever writes. A
 * relaxed load and a relaxed store, not a read-modify-write: with a single
 * writer no increment can be lost, and the store is a plain mov (x86) where
 * atomic_fetch_add would be a locked instruction. Readers on other threads
 * load it relaxed: they never see a torn value, only one a little old. */
#define GW_COUNTER_ADD(c, n) atomic_store_explicit((c), atomic_load_explicit((c), memory_order_relaxed) + (n), memory_order_relaxed)

#endif
