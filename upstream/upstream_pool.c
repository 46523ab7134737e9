/*
 * Idle upstream connections of one worker. Sets of idle sockets are hashed
 * by sandbox id alone, so that gw_upstream_pool_drop finds one sandbox's sets
 * with one lookup; a set is freed as soon as it is empty, so memory follows
 * the number of idle connections.
 */
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include "common/engine.h"
#include "common/hashtab.h"
#include "common/recycle.h"
#include "upstream/opt_timeout.h"
#include "upstream/upstream_pool.h"

typedef struct st_keyed_set_t {
    gw_hashtab_node_t node; /* in pool->sets, under sandbox_id */
    char *sandbox_id;       /* this and lifecycle.base: in the set's own allocation, after it */
    h2o_iovec_t lifecycle;
    uint16_t port;
    gw_netaddr_t addr;
    h2o_linklist_t idle; /* of idle_conn_t, oldest first */
    size_t num_idle;
    int recycled; /* allocated from pool->set_allocator */
} keyed_set_t;

/* A set and its two strings up to this size come from the pool's recycler. */
#define SET_RECYCLED_SIZE (sizeof(keyed_set_t) + 128)

typedef struct st_idle_conn_t {
    h2o_linklist_t link;     /* in set->idle */
    h2o_linklist_t lru_link; /* in pool->lru */
    gw_upstream_pool_t *pool;
    keyed_set_t *set;
    h2o_socket_t *sock;
    gw_timer_t timeout;
} idle_conn_t;

struct st_gw_upstream_pool_t {
    h2o_loop_t *loop;
    gw_opt_timeout_t idle_timeout;
    gw_opt_timeout_t surplus_timeout;
    size_t max_idle_per_key;
    size_t max_idle;
    size_t num_idle;
    h2o_linklist_t lru;          /* of idle_conn_t, every key's, oldest first */
    gw_hashtab_t sets;           /* of keyed_set_t */
    keyed_set_t *last;           /* the set found or made last, or NULL: a request takes from and gives back to
                                  * one set, so most lookups compare one set instead of hashing */
    gw_recycle_t conn_allocator; /* of idle_conn_t: one is made and freed per request on a keep-alive upstream */
    gw_recycle_t set_allocator;  /* of SET_RECYCLED_SIZE: a sandbox served one request at a time empties its set
                                  * at every take, and the put makes it again */
};

static int addr_equals(const gw_netaddr_t *a, const gw_netaddr_t *b)
{
    if (a->ss.ss_family != b->ss.ss_family)
        return 0;
    switch (a->ss.ss_family) {
    case AF_INET: {
        const struct sockaddr_in *x = (const void *)&a->ss, *y = (const void *)&b->ss;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    case AF_INET6: {
        const struct sockaddr_in6 *x = (const void *)&a->ss, *y = (const void *)&b->ss;
        return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
    }
    default:
        return a->len == b->len && memcmp(&a->ss, &b->ss, a->len) == 0;
    }
}

/* the sandbox id aside (the table compares it) */
static int set_is(const keyed_set_t *set, const gw_upstream_key_t *key)
{
    return set->port == key->port && h2o_memis(set->lifecycle.base, set->lifecycle.len, key->lifecycle.base, key->lifecycle.len) &&
           addr_equals(&set->addr, key->addr);
}

static keyed_set_t *find_set(gw_upstream_pool_t *pool, const gw_upstream_key_t *key)
{
    gw_hashtab_node_t *node;

    if (pool->last != NULL && set_is(pool->last, key) && strcmp(pool->last->sandbox_id, key->sandbox_id) == 0)
        return pool->last;
    for (node = gw_hashtab_find(&pool->sets, key->sandbox_id, strlen(key->sandbox_id)); node != NULL;
         node = gw_hashtab_find_next(&pool->sets, node)) {
        keyed_set_t *set = H2O_STRUCT_FROM_MEMBER(keyed_set_t, node, node);
        if (set_is(set, key))
            return pool->last = set;
    }
    return NULL;
}

static keyed_set_t *create_set(gw_upstream_pool_t *pool, const gw_upstream_key_t *key)
{
    /* one allocation with its strings, recycled when they are short (they are: ids and lifecycles are tokens) */
    size_t id_len = strlen(key->sandbox_id), size = sizeof(keyed_set_t) + id_len + 1 + key->lifecycle.len + 1;
    keyed_set_t *set = size <= SET_RECYCLED_SIZE ? gw_recycle_alloc(&pool->set_allocator, SET_RECYCLED_SIZE) : h2o_mem_alloc(size);
    memset(set, 0, sizeof(*set));
    set->recycled = size <= SET_RECYCLED_SIZE;
    set->sandbox_id = memcpy((char *)(set + 1), key->sandbox_id, id_len + 1);
    set->lifecycle = h2o_iovec_init(set->sandbox_id + id_len + 1, key->lifecycle.len);
    memcpy(set->lifecycle.base, key->lifecycle.base, key->lifecycle.len);
    set->lifecycle.base[key->lifecycle.len] = '\0';
    set->port = key->port;
    set->addr = *key->addr;
    h2o_linklist_init_anchor(&set->idle);
    gw_hashtab_insert(&pool->sets, &set->node, set->sandbox_id, id_len);
    return pool->last = set;
}

static void free_set_if_empty(gw_upstream_pool_t *pool, keyed_set_t *set)
{
    if (set->num_idle != 0)
        return;
    if (pool->last == set)
        pool->last = NULL;
    gw_hashtab_remove(&pool->sets, &set->node);
    if (set->recycled)
        gw_recycle_free(&pool->set_allocator, set);
    else
        free(set);
}

/* Unlinks the entry and returns its socket, still reading. */
static h2o_socket_t *detach_conn(idle_conn_t *conn)
{
    h2o_socket_t *sock = conn->sock;
    keyed_set_t *set = conn->set;
    gw_upstream_pool_t *pool = conn->pool;

    h2o_linklist_unlink(&conn->link);
    h2o_linklist_unlink(&conn->lru_link);
    if (gw_timer_is_linked(&conn->timeout))
        gw_timer_unlink(&conn->timeout);
    --set->num_idle;
    --pool->num_idle;
    gw_recycle_free(&pool->conn_allocator, conn);
    free_set_if_empty(pool, set);
    sock->data = NULL;
    return sock;
}

static void close_conn(idle_conn_t *conn)
{
    h2o_socket_close(detach_conn(conn));
}

static void on_idle_event(h2o_socket_t *sock, const char *err)
{
    (void)err;
    /* an idle HTTP/1.1 connection has nothing to say: data or EOF both
     * mean it cannot serve another request */
    close_conn(sock->data);
}

static void on_idle_timeout(gw_timer_t *entry)
{
    close_conn(H2O_STRUCT_FROM_MEMBER(idle_conn_t, timeout, entry));
}

gw_upstream_pool_t *gw_upstream_pool_new(h2o_loop_t *loop, const gw_upstream_pool_conf_t *conf)
{
    gw_upstream_pool_t *pool = h2o_mem_alloc(sizeof(*pool));

    memset(pool, 0, sizeof(*pool));
    pool->loop = loop;
    pool->max_idle_per_key = conf->max_idle_per_key;
    pool->max_idle = conf->max_idle;
    gw_opt_timeout_init(loop, &pool->idle_timeout, conf->idle_timeout_ms);
    gw_opt_timeout_init(loop, &pool->surplus_timeout, conf->surplus_timeout_ms);
    h2o_linklist_init_anchor(&pool->lru);
    gw_hashtab_init(&pool->sets);
    pool->conn_allocator.max = GW_RECYCLE_MAX;
    pool->set_allocator.max = GW_RECYCLE_MAX;
    return pool;
}

void gw_upstream_pool_free(gw_upstream_pool_t *pool)
{
    if (pool == NULL)
        return;
    /* closing a set's last connection frees the set */
    while (!h2o_linklist_is_empty(&pool->lru))
        close_conn(H2O_STRUCT_FROM_MEMBER(idle_conn_t, lru_link, pool->lru.next));
    gw_hashtab_dispose(&pool->sets);
    gw_recycle_clear(&pool->conn_allocator);
    gw_recycle_clear(&pool->set_allocator);
    gw_opt_timeout_dispose(pool->loop, &pool->idle_timeout);
    gw_opt_timeout_dispose(pool->loop, &pool->surplus_timeout);
    free(pool);
}

h2o_socket_t *gw_upstream_pool_take(gw_upstream_pool_t *pool, const gw_upstream_key_t *key)
{
    keyed_set_t *set;
    h2o_socket_t *sock;

    if ((set = find_set(pool, key)) == NULL)
        return NULL;
    /* the newest is the least likely to have been closed by the peer */
    sock = detach_conn(H2O_STRUCT_FROM_MEMBER(idle_conn_t, link, set->idle.prev));
    h2o_socket_read_stop(sock);
    return sock;
}

void gw_upstream_pool_put(gw_upstream_pool_t *pool, const gw_upstream_key_t *key, h2o_socket_t *sock)
{
    keyed_set_t *set;
    idle_conn_t *conn;
    gw_opt_timeout_t *lifetime;

    if (pool->max_idle_per_key == 0 || pool->max_idle == 0 || sock->input->size != 0) {
        h2o_socket_close(sock);
        return;
    }
    /* before the set is looked up: closing a set's last connection frees it */
    if (pool->num_idle >= pool->max_idle)
        close_conn(H2O_STRUCT_FROM_MEMBER(idle_conn_t, lru_link, pool->lru.next));
    if ((set = find_set(pool, key)) == NULL)
        set = create_set(pool, key);
    lifetime = set->num_idle < pool->max_idle_per_key ? &pool->idle_timeout : &pool->surplus_timeout;

    conn = gw_recycle_alloc(&pool->conn_allocator, sizeof(*conn));
    memset(conn, 0, sizeof(*conn));
    conn->pool = pool;
    conn->set = set;
    conn->sock = sock;
    conn->timeout.cb = on_idle_timeout;
    h2o_linklist_insert(&set->idle, &conn->link);
    h2o_linklist_insert(&pool->lru, &conn->lru_link);
    ++set->num_idle;
    ++pool->num_idle;
    if (lifetime->enabled)
        gw_timer_link(pool->loop, lifetime->timeout, &conn->timeout);
    sock->data = conn;
    h2o_socket_read_start(sock, on_idle_event);
}

void gw_upstream_pool_drop(gw_upstream_pool_t *pool, const char *sandbox_id, const char *keep_lifecycle)
{
    gw_hashtab_node_t *node = gw_hashtab_find(&pool->sets, sandbox_id, strlen(sandbox_id));

    while (node != NULL) {
        keyed_set_t *set = H2O_STRUCT_FROM_MEMBER(keyed_set_t, node, node);
        /* closing a set's last connection frees it: step first */
        node = gw_hashtab_find_next(&pool->sets, node);
        if (keep_lifecycle != NULL && h2o_memis(set->lifecycle.base, set->lifecycle.len, keep_lifecycle, strlen(keep_lifecycle)))
            continue;
        while (set->num_idle > 1)
            close_conn(H2O_STRUCT_FROM_MEMBER(idle_conn_t, link, set->idle.next));
        close_conn(H2O_STRUCT_FROM_MEMBER(idle_conn_t, link, set->idle.next));
    }
}

size_t gw_upstream_pool_num_idle(const gw_upstream_pool_t *pool)
{
    return pool->num_idle;
}
