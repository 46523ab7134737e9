/*
 * The one hash table for string keys (sandbox ids and the like). Keys come
 * from clients, so the hash is seeded (SipHash-1-3, a random key per table):
 * nobody outside can choose ids that share a chain. Intrusive, like
 * h2o_linklist_t: the caller embeds a gw_hashtab_node_t in its entry and
 * keeps the key there; the table owns only its bucket array.
 */
#ifndef GW_COMMON_HASHTAB_H
#define GW_COMMON_HASHTAB_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/memory.h>

typedef struct st_gw_hashtab_node_t {
    struct st_gw_hashtab_node_t *next; /* in the chain */
    uint64_t hash;
    h2o_iovec_t key; /* the caller's bytes; unchanged while linked */
} gw_hashtab_node_t;

typedef struct st_gw_hashtab_t {
    gw_hashtab_node_t **buckets; /* NULL until the first insert */
    size_t num_buckets;          /* 0 or a power of two; doubles while nodes outnumber buckets */
    size_t size;                 /* nodes linked */
    uint64_t seed[2];
} gw_hashtab_t;

/* An empty table with a fresh random seed (OpenSSL RAND_bytes; aborts with a
 * message when there is no randomness). Allocates nothing yet. */
void gw_hashtab_init(gw_hashtab_t *t);
/* Frees the buckets. Nodes still linked are the caller's to free before or
 * after; the table never touches them again. */
void gw_hashtab_dispose(gw_hashtab_t *t);

/* Links `node` under `key` (len bytes, kept by reference: it must stay in
 * place and unchanged until gw_hashtab_remove, typically inside the entry
 * that holds `node`). Never fails (out of memory aborts, h2o's policy). A key
 * may be linked several times; gw_hashtab_find then returns the newest. */
void gw_hashtab_insert(gw_hashtab_t *t, gw_hashtab_node_t *node, const char *key, size_t len);
/* Unlinks a linked node. */
void gw_hashtab_remove(gw_hashtab_t *t, gw_hashtab_node_t *node);
/* Unlinks every node and free()s the entry each is embedded in, the node
 * `node_offset` bytes into it (offsetof(entry_t, node)): for entries
 * malloc'd whole that hold nothing else to free. The table stays usable. */
void gw_hashtab_free_all(gw_hashtab_t *t, size_t node_offset);

/* The node linked under `key`, or NULL. */
gw_hashtab_node_t *gw_hashtab_find(const gw_hashtab_t *t, const char *key, size_t len);
/* The next node linked under the same key as `node`, or NULL. */
gw_hashtab_node_t *gw_hashtab_find_next(const gw_hashtab_t *t, const gw_hashtab_node_t *node);

/* Every node once, in no particular order: for (n = first(t); n != NULL; n = next(t, n)).
 * To remove the current node, read its successor first; nothing may be
 * inserted during a walk (a growth rehashes). */
gw_hashtab_node_t *gw_hashtab_first(const gw_hashtab_t *t);
gw_hashtab_node_t *gw_hashtab_next(const gw_hashtab_t *t, const gw_hashtab_node_t *node);

static inline size_t gw_hashtab_size(const gw_hashtab_t *t)
{
    return t->size;
}

#endif
