/*
 * Per-sandbox connection counts shared by the workers: a small chained hash
 * table under one mutex. Held for two short critical sections per proxied
 * request; an entry lives only while its count is above zero, so the table
 * is as large as the number of sandboxes with open connections.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "gateway/conn_limit.h"
#include "routing/host.h"

#define INITIAL_BUCKETS 256

typedef struct st_slot_t {
    struct st_slot_t *next;
    uint64_t count;
    char id[GW_SANDBOX_ID_MAX + 1];
} slot_t;

struct st_gw_conn_limit_t {
    pthread_mutex_t mutex;
    uint64_t max;
    slot_t **buckets;
    size_t num_buckets; /* a power of two */
    size_t num_slots;
};

static size_t hash_of(const char *s)
{
    size_t h = 5381;
    for (; *s != '\0'; ++s)
        h = h * 33 + (unsigned char)*s;
    return h;
}

static slot_t **find(gw_conn_limit_t *l, const char *id)
{
    slot_t **p = &l->buckets[hash_of(id) & (l->num_buckets - 1)];
    for (; *p != NULL; p = &(*p)->next)
        if (strcmp((*p)->id, id) == 0)
            break;
    return p;
}

static void grow(gw_conn_limit_t *l)
{
    size_t n = l->num_buckets * 2, i;
    slot_t **buckets = calloc(n, sizeof(*buckets));

    if (buckets == NULL)
        return; /* longer chains, still correct */
    for (i = 0; i != l->num_buckets; ++i) {
        slot_t *s, *next;
        for (s = l->buckets[i]; s != NULL; s = next) {
            next = s->next;
            s->next = buckets[hash_of(s->id) & (n - 1)];
            buckets[hash_of(s->id) & (n - 1)] = s;
        }
    }
    free(l->buckets);
    l->buckets = buckets;
    l->num_buckets = n;
}

gw_conn_limit_t *gw_conn_limit_new(uint64_t max)
{
    gw_conn_limit_t *l = calloc(1, sizeof(*l));

    if (l == NULL)
        return NULL;
    if ((l->buckets = calloc(INITIAL_BUCKETS, sizeof(*l->buckets))) == NULL) {
        free(l);
        return NULL;
    }
    pthread_mutex_init(&l->mutex, NULL);
    l->max = max;
    l->num_buckets = INITIAL_BUCKETS;
    return l;
}

void gw_conn_limit_free(gw_conn_limit_t *l)
{
    size_t i;

    if (l == NULL)
        return;
    for (i = 0; i != l->num_buckets; ++i) {
        slot_t *s, *next;
        for (s = l->buckets[i]; s != NULL; s = next) {
            next = s->next;
            free(s);
        }
    }
    free(l->buckets);
    pthread_mutex_destroy(&l->mutex);
    free(l);
}

int gw_conn_limit_acquire(gw_conn_limit_t *l, const char *sandbox_id)
{
    slot_t **p, *s;
    int granted = 0;

    if (strlen(sandbox_id) > GW_SANDBOX_ID_MAX)
        return 0; /* never a sandbox the router found */
    pthread_mutex_lock(&l->mutex);
    if ((s = *(p = find(l, sandbox_id))) == NULL) {
        if ((s = calloc(1, sizeof(*s))) == NULL)
            goto Exit;
        memcpy(s->id, sandbox_id, strlen(sandbox_id) + 1);
        *p = s;
        if (++l->num_slots > l->num_buckets)
            grow(l);
    }
    if (l->max == 0 || s->count < l->max) {
        ++s->count;
        granted = 1;
    }
Exit:
    pthread_mutex_unlock(&l->mutex);
    return granted;
}

void gw_conn_limit_release(gw_conn_limit_t *l, const char *sandbox_id)
{
    slot_t **p, *s;

    pthread_mutex_lock(&l->mutex);
    if ((s = *(p = find(l, sandbox_id))) != NULL && s->count != 0 && --s->count == 0) {
        *p = s->next;
        free(s);
        --l->num_slots;
    }
    pthread_mutex_unlock(&l->mutex);
}

uint64_t gw_conn_limit_count(gw_conn_limit_t *l, const char *sandbox_id)
{
    slot_t *s;
    uint64_t n;

    pthread_mutex_lock(&l->mutex);
    n = (s = *find(l, sandbox_id)) != NULL ? s->count : 0;
    pthread_mutex_unlock(&l->mutex);
    return n;
}
