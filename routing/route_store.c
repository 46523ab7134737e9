/*
 * Route lookups: HGETALL <prefix>sbx:{<id>} through the worker's Redis
 * connection, with a deadline, answered on the loop. No cache yet: every
 * lookup is one Redis round trip (the cache comes behind this interface).
 */
#include <stdlib.h>
#include <string.h>
#include "routing/route_store.h"

struct st_gw_route_store_t {
    h2o_loop_t *loop;
    gw_redis_t *redis;
    gw_route_store_conf_t conf; /* conf.prefix points to `prefix` */
    char *prefix;
    h2o_timeout_t deferred; /* 0 ms: answers decided at lookup time still go through the loop */
    h2o_linklist_t lookups; /* every gw_route_lookup_t not yet answered or cancelled */
};

struct st_gw_route_lookup_t {
    gw_route_store_t *store;
    gw_route_cb cb;
    void *data;
    gw_redis_req_t *req;       /* non-NULL while the HGETALL is in flight */
    h2o_timeout_entry_t defer; /* linked while an immediate answer waits for the loop */
    gw_route_status_t deferred_status;
    h2o_linklist_t link;
    char id[GW_SANDBOX_ID_MAX + 1];
};

static void lookup_free(gw_route_lookup_t *l)
{
    h2o_linklist_unlink(&l->link);
    h2o_timeout_unlink(&l->defer);
    free(l);
}

static void answer(gw_route_lookup_t *l, gw_route_status_t status, gw_sandbox_t *sandbox)
{
    gw_route_cb cb = l->cb;
    void *data = l->data;

    /* freed first: the callback may start another lookup or free nothing of ours */
    lookup_free(l);
    cb(data, status, sandbox);
}

static void on_deferred(h2o_timeout_entry_t *entry)
{
    gw_route_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_route_lookup_t, defer, entry);
    answer(l, l->deferred_status, NULL);
}

static void on_hgetall(void *data, const char *err, redisReply *reply)
{
    gw_route_lookup_t *l = data;
    gw_sandbox_t *sandbox = NULL;
    const char *perr;

    l->req = NULL;
    if (err != NULL) {
        /* "timeout", "disconnected" or a server error: Redis cannot tell us now */
        answer(l, GW_ROUTE_UNAVAILABLE, NULL);
        return;
    }
    if (gw_sandbox_parse(l->id, reply, &sandbox, &perr) != 0) {
        answer(l, GW_ROUTE_UNAVAILABLE, NULL);
        return;
    }
    if (sandbox == NULL) {
        answer(l, GW_ROUTE_NOT_FOUND, NULL);
        return;
    }
    answer(l, GW_ROUTE_FOUND, sandbox);
    gw_sandbox_release(sandbox);
}

gw_route_store_t *gw_route_store_new(h2o_loop_t *loop, gw_redis_t *redis, const gw_route_store_conf_t *conf)
{
    gw_route_store_t *s;

    if ((s = calloc(1, sizeof(*s))) == NULL)
        return NULL;
    if ((s->prefix = strdup(conf->prefix != NULL ? conf->prefix : "")) == NULL) {
        free(s);
        return NULL;
    }
    s->loop = loop;
    s->redis = redis;
    s->conf = *conf;
    s->conf.prefix = s->prefix;
    h2o_timeout_init(loop, &s->deferred, 0);
    h2o_linklist_init_anchor(&s->lookups);
    return s;
}

void gw_route_store_free(gw_route_store_t *s)
{
    if (s == NULL)
        return;
    /* Lookups still open are dropped without a callback; their handles die with the store.
     * Not from inside a lookup callback: h2o may be walking `deferred` at that moment. */
    while (!h2o_linklist_is_empty(&s->lookups))
        gw_route_lookup_cancel(H2O_STRUCT_FROM_MEMBER(gw_route_lookup_t, link, s->lookups.next));
    h2o_timeout_dispose(s->loop, &s->deferred);
    free(s->prefix);
    free(s);
}

gw_route_lookup_t *gw_route_store_lookup(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data)
{
    gw_route_lookup_t *l;
    size_t id_len = strlen(sandbox_id), prefix_len = strlen(s->prefix), key_len;
    char *key;

    if ((l = calloc(1, sizeof(*l))) == NULL)
        return NULL;
    l->store = s;
    l->cb = cb;
    l->data = data;
    l->defer.cb = on_deferred;
    h2o_linklist_insert(&s->lookups, &l->link);

    if (id_len == 0 || id_len > GW_SANDBOX_ID_MAX) {
        /* cannot be a sandbox the control plane wrote */
        l->deferred_status = GW_ROUTE_NOT_FOUND;
        goto Defer;
    }
    memcpy(l->id, sandbox_id, id_len + 1);

    /* "<prefix>sbx:{<id>}" */
    key_len = prefix_len + 5 + id_len + 1;
    if ((key = malloc(key_len + 1)) == NULL) {
        l->deferred_status = GW_ROUTE_UNAVAILABLE;
        goto Defer;
    }
    memcpy(key, s->prefix, prefix_len);
    memcpy(key + prefix_len, "sbx:{", 5);
    memcpy(key + prefix_len + 5, sandbox_id, id_len);
    key[key_len - 1] = '}';
    key[key_len] = '\0';
    {
        const char *argv[] = {"HGETALL", key};
        size_t argvlen[] = {7, key_len};
        l->req = gw_redis_command_argv(s->redis, s->conf.lookup_timeout_ms, on_hgetall, l, 2, argv, argvlen);
    }
    free(key);
    if (l->req == NULL) {
        /* not connected: answer "unavailable" without waiting for a deadline */
        l->deferred_status = GW_ROUTE_UNAVAILABLE;
        goto Defer;
    }
    return l;

Defer:
    h2o_timeout_link(s->loop, &s->deferred, &l->defer);
    return l;
}

void gw_route_lookup_cancel(gw_route_lookup_t *l)
{
    if (l->req != NULL)
        gw_redis_req_cancel(l->req);
    lookup_free(l);
}
