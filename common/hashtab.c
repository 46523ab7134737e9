/*
 * The seeded, chained hash table of common/hashtab.h, and the SipHash it
 * hashes with (Aumasson and Bernstein; 1 compression and 3 finalization
 * rounds, as Rust's and Python's hash tables use for the same purpose).
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/rand.h>
#include "common/hashtab.h"

#define INITIAL_BUCKETS 16

/* SipHash */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND(v0, v1, v2, v3)                                                                                                   \
    do {                                                                                                                           \
        v0 += v1;                                                                                                                  \
        v1 = ROTL(v1, 13);                                                                                                         \
        v1 ^= v0;                                                                                                                  \
        v0 = ROTL(v0, 32);                                                                                                         \
        v2 += v3;                                                                                                                  \
        v3 = ROTL(v3, 16);                                                                                                         \
        v3 ^= v2;                                                                                                                  \
        v0 += v3;                                                                                                                  \
        v3 = ROTL(v3, 21);                                                                                                         \
        v3 ^= v0;                                                                                                                  \
        v2 += v1;                                                                                                                  \
        v1 = ROTL(v1, 17);                                                                                                         \
        v1 ^= v2;                                                                                                                  \
        v2 = ROTL(v2, 32);                                                                                                         \
    } while (0)

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
        v = v << 8 | p[i];
    return v;
}

/* SipHash-c-d of `len` bytes under the 128-bit key (k0, k1): the key's first
 * eight bytes read little-endian are k0. The rounds are parameters for the
 * unit test, which checks SipHash-2-4 against the paper's vector. */
static uint64_t siphash(int c_rounds, int d_rounds, uint64_t k0, uint64_t k1, const void *data, size_t len)
{
    const unsigned char *p = data, *end = p + (len & ~(size_t)7);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL, v2 = k0 ^ 0x6c7967656e657261ULL,
             v3 = k1 ^ 0x7465646279746573ULL, m, b = (uint64_t)len << 56;
    int i;

    for (; p != end; p += 8) {
        m = read_le64(p);
        v3 ^= m;
        for (i = 0; i != c_rounds; ++i)
            SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    for (i = (int)(len & 7) - 1; i >= 0; --i)
        b |= (uint64_t)p[i] << (8 * i);
    v3 ^= b;
    for (i = 0; i != c_rounds; ++i)
        SIPROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    for (i = 0; i != d_rounds; ++i)
        SIPROUND(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

static uint64_t hash_key(const gw_hashtab_t *t, const char *key, size_t len)
{
    return siphash(1, 3, t->seed[0], t->seed[1], key, len);
}

/* the table */

static int node_is(const gw_hashtab_node_t *n, uint64_t hash, const char *key, size_t len)
{
    return n->hash == hash && n->key.len == len && memcmp(n->key.base, key, len) == 0;
}

static gw_hashtab_node_t **bucket_of(const gw_hashtab_t *t, uint64_t hash)
{
    return &t->buckets[hash & (t->num_buckets - 1)];
}

static void resize(gw_hashtab_t *t, size_t num_buckets)
{
    gw_hashtab_node_t **old = t->buckets, *n, *next;
    size_t old_num = t->num_buckets, i;

    t->buckets = h2o_mem_alloc(num_buckets * sizeof(*t->buckets));
    memset(t->buckets, 0, num_buckets * sizeof(*t->buckets));
    t->num_buckets = num_buckets;
    for (i = 0; i != old_num; ++i) {
        for (n = old[i]; n != NULL; n = next) {
            gw_hashtab_node_t **b = bucket_of(t, n->hash);
            next = n->next;
            n->next = *b;
            *b = n;
        }
    }
    free(old);
}

void gw_hashtab_init(gw_hashtab_t *t)
{
    memset(t, 0, sizeof(*t));
    if (RAND_bytes((unsigned char *)t->seed, sizeof(t->seed)) != 1)
        h2o_fatal("no randomness for a hash table seed");
}

void gw_hashtab_dispose(gw_hashtab_t *t)
{
    free(t->buckets);
    t->buckets = NULL;
    t->num_buckets = 0;
    t->size = 0;
}

void gw_hashtab_insert(gw_hashtab_t *t, gw_hashtab_node_t *node, const char *key, size_t len)
{
    gw_hashtab_node_t **b;

    if (t->size >= t->num_buckets)
        resize(t, t->num_buckets == 0 ? INITIAL_BUCKETS : t->num_buckets * 2);
    node->hash = hash_key(t, key, len);
    node->key = h2o_iovec_init(key, len);
    b = bucket_of(t, node->hash);
    node->next = *b;
    *b = node;
    ++t->size;
}

void gw_hashtab_remove(gw_hashtab_t *t, gw_hashtab_node_t *node)
{
    gw_hashtab_node_t **p = bucket_of(t, node->hash);

    /* node is linked: the walk ends at it */
    while (*p != node)
        p = &(*p)->next;
    *p = node->next;
    node->next = NULL;
    --t->size;
}

void gw_hashtab_free_all(gw_hashtab_t *t, size_t node_offset)
{
    for (size_t i = 0; i != t->num_buckets; ++i) {
        gw_hashtab_node_t *n = t->buckets[i], *next;
        t->buckets[i] = NULL;
        for (; n != NULL; n = next) {
            next = n->next;
            free((char *)n - node_offset);
        }
    }
    t->size = 0;
}

gw_hashtab_node_t *gw_hashtab_find(const gw_hashtab_t *t, const char *key, size_t len)
{
    gw_hashtab_node_t *n;
    uint64_t hash;

    if (t->size == 0)
        return NULL;
    hash = hash_key(t, key, len);
    for (n = *bucket_of(t, hash); n != NULL; n = n->next)
        if (node_is(n, hash, key, len))
            return n;
    return NULL;
}

gw_hashtab_node_t *gw_hashtab_find_next(const gw_hashtab_t *t, const gw_hashtab_node_t *node)
{
    gw_hashtab_node_t *n;

    (void)t;
    for (n = node->next; n != NULL; n = n->next)
        if (node_is(n, node->hash, node->key.base, node->key.len))
            return n;
    return NULL;
}

static gw_hashtab_node_t *first_from(const gw_hashtab_t *t, size_t i)
{
    for (; i < t->num_buckets; ++i)
        if (t->buckets[i] != NULL)
            return t->buckets[i];
    return NULL;
}

gw_hashtab_node_t *gw_hashtab_first(const gw_hashtab_t *t)
{
    return first_from(t, 0);
}

gw_hashtab_node_t *gw_hashtab_next(const gw_hashtab_t *t, const gw_hashtab_node_t *node)
{
    if (node->next != NULL)
        return node->next;
    return first_from(t, (node->hash & (t->num_buckets - 1)) + 1);
}
