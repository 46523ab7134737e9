/*
 * Token buckets per client address and for everyone (common/addr_budget.h),
 * as GCRA: a bucket is the time at which it would be full again (its
 * theoretical arrival time, TAT), so that a take is a comparison and an
 * addition and no timer refills anything.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <h2o/linklist.h>
#include <h2o/memory.h>
#include "common/addr_budget.h"
#include "common/hashtab.h"

/* a client's key: a family byte, then 4 bytes of IPv4 or the 8 of an IPv6 /64; "unknown" is the family byte alone */
#define KEY_MAX 9

typedef struct st_client_t {
    gw_hashtab_node_t node;
    h2o_linklist_t lru; /* used longest ago first */
    uint64_t tat_us;
    size_t key_len;
    char key[KEY_MAX];
} client_t;

/* one bucket's rule: a token every interval, at most burst of them in advance */
typedef struct st_rule_t {
    uint64_t interval_us; /* 0: no bound */
    uint64_t tolerance_us;
} rule_t;

struct st_gw_addr_budget_t {
    pthread_mutex_t mutex;
    rule_t per_client, total;
    uint64_t total_tat_us;
    gw_hashtab_t clients;
    h2o_linklist_t lru;
    gw_addr_budget_counters_t counters;
};

static rule_t rule(uint64_t rate, uint64_t burst)
{
    rule_t r = {0, 0};

    if (rate != 0) {
        r.interval_us = rate >= 1000000 ? 1 : 1000000 / rate;
        r.tolerance_us = (burst != 0 ? burst : 1) * r.interval_us;
    }
    return r;
}

gw_addr_budget_t *gw_addr_budget_new(const gw_addr_budget_conf_t *conf)
{
    gw_addr_budget_t *b = h2o_mem_alloc(sizeof(*b));

    memset(b, 0, sizeof(*b));
    pthread_mutex_init(&b->mutex, NULL);
    b->per_client = rule(conf->per_client_rate, conf->per_client_burst);
    b->total = rule(conf->total_rate, conf->total_burst);
    gw_hashtab_init(&b->clients);
    h2o_linklist_init_anchor(&b->lru);
    return b;
}

void gw_addr_budget_free(gw_addr_budget_t *b)
{
    if (b == NULL)
        return;
    while (!h2o_linklist_is_empty(&b->lru)) {
        client_t *c = H2O_STRUCT_FROM_MEMBER(client_t, lru, b->lru.next);
        h2o_linklist_unlink(&c->lru);
        gw_hashtab_remove(&b->clients, &c->node);
        free(c);
    }
    gw_hashtab_dispose(&b->clients);
    pthread_mutex_destroy(&b->mutex);
    free(b);
}

gw_addr_budget_counters_t *gw_addr_budget_counters(gw_addr_budget_t *b)
{
    return &b->counters;
}

size_t gw_addr_budget_num_clients(gw_addr_budget_t *b)
{
    size_t n;

    pthread_mutex_lock(&b->mutex);
    n = gw_hashtab_size(&b->clients);
    pthread_mutex_unlock(&b->mutex);
    return n;
}

/* The key of the client at sa into key; its length. */
static size_t client_key(const struct sockaddr *sa, socklen_t len, char key[KEY_MAX])
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    if (sa != NULL && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 5;
    }
    if (sa != NULL && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        if (memcmp(a, mapped, sizeof(mapped)) == 0) {
            key[0] = 4;
            memcpy(key + 1, a + 12, 4);
            return 5;
        }
        key[0] = 6;
        memcpy(key + 1, a, 8); /* the /64 */
        return 9;
    }
    key[0] = 0;
    return 1;
}

/* 1 when a bucket whose TAT is *tat has a token at now (GCRA); the new TAT in *next. */
static int conforms(const rule_t *r, uint64_t tat, uint64_t now, uint64_t *next)
{
    uint64_t t = tat > now ? tat : now;

    *next = t + r->interval_us;
    return r->interval_us == 0 || *next - now <= r->tolerance_us;
}

/* Under the mutex: the entry of `key`, made (the one used longest ago dropped beyond the bound) when there is none,
 * and made the most recently used. */
static client_t *client_of(gw_addr_budget_t *b, const char *key, size_t key_len)
{
    gw_hashtab_node_t *n = gw_hashtab_find(&b->clients, key, key_len);
    client_t *c;

    if (n != NULL) {
        c = H2O_STRUCT_FROM_MEMBER(client_t, node, n);
        h2o_linklist_unlink(&c->lru);
    } else {
        if (gw_hashtab_size(&b->clients) >= GW_ADDR_BUDGET_MAX_CLIENTS) {
            client_t *old = H2O_STRUCT_FROM_MEMBER(client_t, lru, b->lru.next);
            h2o_linklist_unlink(&old->lru);
            gw_hashtab_remove(&b->clients, &old->node);
            free(old);
        }
        c = h2o_mem_alloc(sizeof(*c));
        memset(c, 0, sizeof(*c));
        memcpy(c->key, key, key_len);
        c->key_len = key_len;
        gw_hashtab_insert(&b->clients, &c->node, c->key, c->key_len);
    }
    h2o_linklist_insert(&b->lru, &c->lru);
    return c;
}

gw_addr_budget_result_t gw_addr_budget_take_at(gw_addr_budget_t *b, const struct sockaddr *sa, socklen_t len, uint64_t now_us)
{
    gw_addr_budget_result_t res = GW_ADDR_BUDGET_OK;
    uint64_t client_next = 0, total_next;
    client_t *c = NULL;
    char key[KEY_MAX];
    size_t key_len = client_key(sa, len, key);

    pthread_mutex_lock(&b->mutex);
    if (b->per_client.interval_us != 0) {
        c = client_of(b, key, key_len);
        if (!conforms(&b->per_client, c->tat_us, now_us, &client_next))
            res = GW_ADDR_BUDGET_CLIENT;
    }
    if (res == GW_ADDR_BUDGET_OK && !conforms(&b->total, b->total_tat_us, now_us, &total_next))
        res = GW_ADDR_BUDGET_TOTAL;
    if (res == GW_ADDR_BUDGET_OK) { /* both or none */
        if (c != NULL)
            c->tat_us = client_next;
        if (b->total.interval_us != 0)
            b->total_tat_us = total_next;
    }
    pthread_mutex_unlock(&b->mutex);
    atomic_fetch_add_explicit(res == GW_ADDR_BUDGET_OK       ? &b->counters.taken
                              : res == GW_ADDR_BUDGET_CLIENT ? &b->counters.refused_client
                                                             : &b->counters.refused_total,
                              1, memory_order_relaxed);
    return res;
}

gw_addr_budget_result_t gw_addr_budget_take(gw_addr_budget_t *b, const struct sockaddr *sa, socklen_t len)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return gw_addr_budget_take_at(b, sa, len, (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
}
