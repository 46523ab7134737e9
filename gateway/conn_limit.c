/*
 * Per-sandbox connection counts shared by the workers: a small chained hash
 * table under one mutex. Held for two short critical sections per proxied
 * request; an entry lives only while its count is above zero, so the table
 * is as large as the number of sandboxes with open connections.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "common/hashtab.h"
#include "gateway/conn_limit.h"
#include "routing/host.h"

typedef struct st_slot_t {
    gw_hashtab_node_t node; /* in slots, keyed by `id` */
    uint64_t count;
    char id[GW_SANDBOX_ID_MAX + 1];
} slot_t;

struct st_gw_conn_limit_t {
    pthread_mutex_t mutex;
    uint64_t max;
    gw_hashtab_t slots; /* slot_t by sandbox id; under mutex */
};

static slot_t *find(gw_conn_limit_t *l, const char *id, size_t len)
{
    gw_hashtab_node_t *n = gw_hashtab_find(&l->slots, id, len);
    return n != NULL ? H2O_STRUCT_FROM_MEMBER(slot_t, node, n) : NULL;
}

gw_conn_limit_t *gw_conn_limit_new(uint64_t max)
{
    gw_conn_limit_t *l = h2o_mem_alloc(sizeof(*l));

    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mutex, NULL);
    l->max = max;
    gw_hashtab_init(&l->slots);
    return l;
}

void gw_conn_limit_free(gw_conn_limit_t *l)
{
    gw_hashtab_node_t *n;

    if (l == NULL)
        return;
    while ((n = gw_hashtab_first(&l->slots)) != NULL) {
        gw_hashtab_remove(&l->slots, n);
        free(H2O_STRUCT_FROM_MEMBER(slot_t, node, n));
    }
    gw_hashtab_dispose(&l->slots);
    pthread_mutex_destroy(&l->mutex);
    free(l);
}

int gw_conn_limit_acquire(gw_conn_limit_t *l, const char *sandbox_id)
{
    size_t len = strlen(sandbox_id);
    slot_t *s;
    int granted = 0;

    if (len > GW_SANDBOX_ID_MAX)
        return 0; /* never a sandbox the router found */
    pthread_mutex_lock(&l->mutex);
    if ((s = find(l, sandbox_id, len)) == NULL) {
        s = h2o_mem_alloc(sizeof(*s));
        memset(s, 0, sizeof(*s));
        memcpy(s->id, sandbox_id, len + 1);
        gw_hashtab_insert(&l->slots, &s->node, s->id, len);
    }
    if (l->max == 0 || s->count < l->max) {
        ++s->count;
        granted = 1;
    }
    pthread_mutex_unlock(&l->mutex);
    return granted;
}

void gw_conn_limit_release(gw_conn_limit_t *l, const char *sandbox_id)
{
    slot_t *s;

    pthread_mutex_lock(&l->mutex);
    if ((s = find(l, sandbox_id, strlen(sandbox_id))) != NULL && s->count != 0 && --s->count == 0) {
        gw_hashtab_remove(&l->slots, &s->node);
        free(s);
    }
    pthread_mutex_unlock(&l->mutex);
}

uint64_t gw_conn_limit_count(gw_conn_limit_t *l, const char *sandbox_id)
{
    slot_t *s;
    uint64_t n;

    pthread_mutex_lock(&l->mutex);
    n = (s = find(l, sandbox_id, strlen(sandbox_id))) != NULL ? s->count : 0;
    pthread_mutex_unlock(&l->mutex);
    return n;
}
