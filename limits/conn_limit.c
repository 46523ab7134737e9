/*
 * Per-key connection counts without a lock on the hot path: each worker
 * counts in its own table (key -> local entry); the workers holding a key
 * share one entry with a cache line per worker, where each publishes its
 * count for the others to sum. The shared table's mutex is taken only when a
 * worker starts or stops holding a key.
 */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "common/hashtab.h"
#include "limits/conn_limit.h"

#define CACHE_LINE 64

/* One worker's published count of a key: written only by that worker. */
typedef struct st_worker_count_t {
    alignas(CACHE_LINE) atomic_uint_fast64_t n;
} worker_count_t;

/* A key some worker holds a slot of. */
typedef struct st_shared_t {
    gw_hashtab_node_t node; /* in l->shared; under l->mutex */
    size_t refs;            /* workers with a local entry pointing here; under l->mutex */
    char key[GW_CONN_LIMIT_KEY_MAX + 1];
    worker_count_t counts[]; /* [num_workers] */
} shared_t;

/* A key this worker holds a slot of: touched only by its worker. */
typedef struct st_local_t {
    gw_hashtab_node_t node; /* in the worker's table, keyed by shared->key */
    uint64_t count;         /* > 0 while linked */
    shared_t *shared;       /* a reference: alive while this entry is */
} local_t;

/* A worker's table, on its own cache lines. */
typedef struct st_worker_t {
    alignas(CACHE_LINE) gw_hashtab_t locals;
} worker_t;

struct st_gw_conn_limit_t {
    uint64_t max;
    size_t num_workers;
    pthread_mutex_t mutex;
    gw_hashtab_t shared; /* shared_t by key; under mutex */
    worker_t workers[];  /* [num_workers] */
};

/* Cache-line aligned and zeroed; aborts on out of memory (h2o's policy). */
static void *alloc_aligned(size_t size)
{
    void *p;

    size = (size + CACHE_LINE - 1) & ~(size_t)(CACHE_LINE - 1);
    if ((p = aligned_alloc(CACHE_LINE, size)) == NULL)
        h2o_fatal("no memory");
    return memset(p, 0, size);
}

static local_t *find_local(worker_t *w, const char *key, size_t len)
{
    gw_hashtab_node_t *n = gw_hashtab_find(&w->locals, key, len);
    return n != NULL ? H2O_STRUCT_FROM_MEMBER(local_t, node, n) : NULL;
}

static shared_t *find_shared(gw_conn_limit_t *l, const char *key, size_t len)
{
    gw_hashtab_node_t *n = gw_hashtab_find(&l->shared, key, len);
    return n != NULL ? H2O_STRUCT_FROM_MEMBER(shared_t, node, n) : NULL;
}

static uint64_t sum(gw_conn_limit_t *l, shared_t *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i != l->num_workers; ++i)
        n += atomic_load_explicit(&s->counts[i].n, memory_order_relaxed);
    return n;
}

/* The worker starts holding `key`: a local entry with a count of 0, and a
 * reference to the key's shared entry (made when no worker holds it). */
static local_t *join(gw_conn_limit_t *l, worker_t *w, const char *key, size_t len)
{
    local_t *local = h2o_mem_alloc(sizeof(*local));
    shared_t *s;

    pthread_mutex_lock(&l->mutex);
    if ((s = find_shared(l, key, len)) == NULL) {
        s = alloc_aligned(sizeof(*s) + l->num_workers * sizeof(s->counts[0]));
        memcpy(s->key, key, len + 1);
        gw_hashtab_insert(&l->shared, &s->node, s->key, len);
    }
    ++s->refs;
    pthread_mutex_unlock(&l->mutex);

    *local = (local_t){.shared = s};
    gw_hashtab_insert(&w->locals, &local->node, s->key, len);
    return local;
}

/* The worker holds no slot of the key any more (its published count is 0):
 * the local entry goes, and the shared one with the last reference. */
static void leave(gw_conn_limit_t *l, worker_t *w, local_t *local)
{
    shared_t *s = local->shared;

    gw_hashtab_remove(&w->locals, &local->node);
    free(local);
    pthread_mutex_lock(&l->mutex);
    if (--s->refs == 0)
        gw_hashtab_remove(&l->shared, &s->node);
    else
        s = NULL;
    pthread_mutex_unlock(&l->mutex);
    free(s);
}

/* The limit check of an acquire, summed on read: this worker's own count is
 * exact, the others' are what they last published. Far from the limit (all
 * of the other workers admitting at this instant would still fit) nothing is
 * locked; near it, the check and the store are made under the mutex, so that
 * workers racing for the last slots see each other's and the limit stays
 * exact (the bound of conn_limit.h is then reached only by an admission that
 * read the sum far from the limit and was preempted before its store). On
 * grant the worker's count is published as `next`. */
static int admit(gw_conn_limit_t *l, size_t worker, shared_t *s, uint64_t next)
{
    atomic_uint_fast64_t *mine = &s->counts[worker].n;
    int granted;

    if (l->max == 0 || sum(l, s) + l->num_workers <= l->max) {
        atomic_store_explicit(mine, next, memory_order_relaxed);
        return 1;
    }
    pthread_mutex_lock(&l->mutex);
    if ((granted = sum(l, s) < l->max))
        atomic_store_explicit(mine, next, memory_order_relaxed);
    pthread_mutex_unlock(&l->mutex);
    return granted;
}

gw_conn_limit_t *gw_conn_limit_new(uint64_t max, size_t num_workers)
{
    gw_conn_limit_t *l;

    if (num_workers == 0)
        h2o_fatal("gw_conn_limit_new: no worker");
    l = alloc_aligned(sizeof(*l) + num_workers * sizeof(l->workers[0]));
    l->max = max;
    l->num_workers = num_workers;
    pthread_mutex_init(&l->mutex, NULL);
    gw_hashtab_init(&l->shared);
    for (size_t i = 0; i != num_workers; ++i)
        gw_hashtab_init(&l->workers[i].locals);
    return l;
}

void gw_conn_limit_free(gw_conn_limit_t *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i != l->num_workers; ++i) {
        gw_hashtab_free_all(&l->workers[i].locals, offsetof(local_t, node));
        gw_hashtab_dispose(&l->workers[i].locals);
    }
    gw_hashtab_free_all(&l->shared, offsetof(shared_t, node));
    gw_hashtab_dispose(&l->shared);
    pthread_mutex_destroy(&l->mutex);
    free(l);
}

int gw_conn_limit_acquire(gw_conn_limit_t *l, size_t worker, const char *key)
{
    worker_t *w = &l->workers[worker];
    size_t len = strlen(key);
    local_t *local;

    if (len > GW_CONN_LIMIT_KEY_MAX)
        return 0; /* never a sandbox the router found nor an address */
    if ((local = find_local(w, key, len)) == NULL)
        local = join(l, w, key, len);
    if (!admit(l, worker, local->shared, local->count + 1)) {
        if (local->count == 0)
            leave(l, w, local);
        return 0;
    }
    ++local->count;
    return 1;
}

void gw_conn_limit_release(gw_conn_limit_t *l, size_t worker, const char *key)
{
    worker_t *w = &l->workers[worker];
    local_t *local;

    if ((local = find_local(w, key, strlen(key))) == NULL)
        return;
    atomic_store_explicit(&local->shared->counts[worker].n, --local->count, memory_order_relaxed);
    if (local->count == 0)
        leave(l, w, local);
}

uint64_t gw_conn_limit_count(gw_conn_limit_t *l, const char *key)
{
    shared_t *s;
    uint64_t n = 0;

    pthread_mutex_lock(&l->mutex);
    if ((s = find_shared(l, key, strlen(key))) != NULL)
        n = sum(l, s);
    pthread_mutex_unlock(&l->mutex);
    return n;
}
