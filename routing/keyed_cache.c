/*
 * Lookups behind a per-worker cache. An entry per key holds what Redis last
 * said (a value, "not found", or "revoked by a publish") and the fetch in
 * flight for that key, so concurrent misses share one HGETALL. Publishes
 * evict; a flush expires everything; TTLs bound staleness whatever pub/sub
 * does. A lookup is never answered with what was read before a publish of
 * its key that the cache has seen: the waiters of a fetch that a publish
 * detached are looked up again, and so is an answer from the cache still
 * waiting for the loop.
 */
#include <stdlib.h>
#include <string.h>
#include "common/engine.h"
#include "common/counter.h"
#include "common/hashtab.h"
#include "common/loop_timeout.h"
#include "common/recycle.h"
#include "routing/ingress.h"
#include "routing/keyed_cache.h"

typedef enum {
    ENTRY_EMPTY = 0, /* created by a miss; its first fetch is in flight */
    ENTRY_FOUND,     /* `value` as read at `confirmed_at` */
    ENTRY_NOT_FOUND, /* Redis said there is no such key */
    ENTRY_REVOKED,   /* a publish said it changed: never served; `value` kept for on_fetched (keep_revoked) */
} entry_kind_t;

typedef struct st_flight_t flight_t;

typedef struct st_entry_t {
    gw_hashtab_node_t node; /* in cache->entries, keyed by `key` */
    h2o_linklist_t age;     /* in cache->by_age, confirmed (or fetched) longest ago first */
    entry_kind_t kind;
    void *value;           /* owned; FOUND and (optionally) REVOKED */
    uint64_t confirmed_at; /* when the fetch that produced this answer was sent */
    uint64_t fresh_until;  /* served without asking Redis before this */
    flight_t *flight;      /* the fetch for this key, or NULL */
    size_t len;
    char key[]; /* NUL-terminated */
} entry_t;

/* One HGETALL (with conf.counter_kind, the GET sent right before it) and the lookups waiting for it. */
struct st_flight_t {
    gw_keyed_cache_t *cache;
    entry_t *entry; /* NULL once detached: the answer is not cached (nor given to waiters a publish moved) */
    gw_redis_req_t *req;
    gw_redis_req_t *counter_req; /* the GET, until it answered */
    uint64_t counter;            /* its answer (0: absent or unknown) */
    uint64_t sent_at;
    h2o_linklist_t waiters; /* gw_keyed_lookup_t.link */
    h2o_linklist_t link;    /* in cache->flights */
    char key[];             /* NUL-terminated */
};

struct st_gw_keyed_cache_t {
    h2o_loop_t *loop;
    gw_redis_t *redis;
    gw_keyed_cache_conf_t conf; /* conf.prefix and conf.kind: NULL (only key_head keeps them) */
    char *key_head;             /* "<prefix><kind>:{" */
    size_t key_head_len;
    char *counter_head; /* "<prefix><counter_kind>:{", or NULL */
    size_t counter_head_len;
    int caching;
    gw_timeout_t *deferred; /* 0 ms, the loop's (common/loop_timeout.h): answers known at lookup time still go through the loop */
    h2o_linklist_t lookups; /* every gw_keyed_lookup_t not yet answered or cancelled */
    h2o_linklist_t flights; /* every flight_t whose HGETALL is in flight */
    gw_hashtab_t entries;   /* entry_t by key */
    h2o_linklist_t by_age;
    gw_recycle_t lookup_allocator; /* of gw_keyed_lookup_t (with room for key_max): one per request */
    uint64_t publishes;            /* publishes and flushes seen: deferred answers known before one are redone */
};

struct st_gw_keyed_lookup_t {
    gw_keyed_cache_t *cache;
    gw_keyed_fn cb;
    void *data;
    gw_timer_t defer; /* linked while an answer known at lookup time waits for the loop */
    gw_keyed_status_t deferred_status;
    void *deferred_value;        /* retained */
    uint64_t deferred_publishes; /* cache->publishes when the deferred answer was known */
    h2o_linklist_t link;         /* in a flight's waiters while waiting for its fetch */
    h2o_linklist_t all;          /* in cache->lookups */
    unsigned again;              /* times looked up again after a publish (bounded by MAX_AGAIN) */
    unsigned fresh : 1;
    size_t len; /* 0 when the key cannot be looked up */
    char key[]; /* conf.key_max + 1 bytes */
};

/* A lookup whose fetch publishes of its key keep detaching is answered
 * GW_KEYED_UNAVAILABLE after this many fetches more, so that a stream of
 * publishes cannot hold it for ever (each fetch has its own deadline). */
#define MAX_AGAIN 4

#define COUNT(c, name)                                                                                                             \
    do {                                                                                                                           \
        if ((c)->conf.counters != NULL)                                                                                            \
            GW_COUNTER_ADD(&(c)->conf.counters->name, 1);                                                                          \
    } while (0)

static void retain(gw_keyed_cache_t *c, void *value)
{
    if (value != NULL)
        c->conf.retain(value);
}

static void release(gw_keyed_cache_t *c, void *value)
{
    if (value != NULL)
        c->conf.release(value);
}

/* the table */

static entry_t *entry_find(gw_keyed_cache_t *c, const char *key, size_t len)
{
    gw_hashtab_node_t *n = gw_hashtab_find(&c->entries, key, len);
    return n != NULL ? H2O_STRUCT_FROM_MEMBER(entry_t, node, n) : NULL;
}

static void flight_detach(flight_t *f)
{
    if (f->entry != NULL) {
        f->entry->flight = NULL;
        f->entry = NULL;
    }
}

static void entry_remove(gw_keyed_cache_t *c, entry_t *e)
{
    gw_hashtab_remove(&c->entries, &e->node);
    h2o_linklist_unlink(&e->age);
    if (e->flight != NULL)
        flight_detach(e->flight);
    release(c, e->value);
    free(e);
}

static void make_youngest(gw_keyed_cache_t *c, entry_t *e)
{
    h2o_linklist_unlink(&e->age);
    h2o_linklist_insert(&c->by_age, &e->age);
}

static entry_t *entry_new(gw_keyed_cache_t *c, const char *key, size_t len)
{
    entry_t *e;

    /* Oldest first, skipping those with a fetch in flight: its waiters must stay reachable from the entry,
     * where a publish finds them. So the table may pass the bound by the fetches in flight (at most the
     * requests in flight, each bounded by lookup_timeout_ms). */
    for (h2o_linklist_t *pos = c->by_age.next; gw_hashtab_size(&c->entries) >= c->conf.max_entries && pos != &c->by_age;) {
        entry_t *old = H2O_STRUCT_FROM_MEMBER(entry_t, age, pos);
        pos = pos->next;
        if (old->flight != NULL)
            continue;
        entry_remove(c, old);
        COUNT(c, evictions);
    }
    e = h2o_mem_alloc(sizeof(*e) + len + 1);
    memset(e, 0, sizeof(*e));
    memcpy(e->key, key, len);
    e->key[len] = '\0';
    e->len = len;
    gw_hashtab_insert(&c->entries, &e->node, e->key, len);
    h2o_linklist_insert(&c->by_age, &e->age);
    return e;
}

/* 1 when a FOUND entry may answer although Redis could not be asked now */
static int usable_stale(const gw_keyed_cache_t *c, const entry_t *e, uint64_t now)
{
    return e->kind == ENTRY_FOUND && now - e->confirmed_at < c->conf.stale_ttl_ms;
}

/* answering */

static void lookup_free(gw_keyed_lookup_t *l)
{
    gw_keyed_cache_t *c = l->cache;

    h2o_linklist_unlink(&l->all);
    if (h2o_linklist_is_linked(&l->link))
        h2o_linklist_unlink(&l->link);
    gw_timer_unlink(&l->defer);
    release(c, l->deferred_value);
    gw_recycle_free(&c->lookup_allocator, l);
}

/* `value` is held by the caller during the call */
static void answer(gw_keyed_lookup_t *l, gw_keyed_status_t status, void *value)
{
    gw_keyed_cache_t *c = l->cache;
    gw_keyed_fn cb = l->cb;
    void *data = l->data;

    if (status == GW_KEYED_UNAVAILABLE)
        COUNT(c, unavailable);
    /* freed first: the callback may start another lookup or cancel others */
    l->deferred_value = NULL;
    lookup_free(l);
    c->conf.answer(cb, data, status, status == GW_KEYED_FOUND ? value : NULL);
}

static void resolve(gw_keyed_cache_t *c, gw_keyed_lookup_t *l, int again);

static void on_deferred(gw_timer_t *entry)
{
    gw_keyed_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_keyed_lookup_t, defer, entry);
    gw_keyed_cache_t *c = l->cache;
    void *value;

    if (l->deferred_publishes != c->publishes) {
        /* a publish came in the same loop turn, after the answer was known: it may be older than the change */
        release(c, l->deferred_value);
        l->deferred_value = NULL;
        resolve(c, l, 1);
        return;
    }
    value = l->deferred_value; /* the reference passes to us */
    answer(l, l->deferred_status, value);
    release(c, value);
}

static void defer(gw_keyed_lookup_t *l, gw_keyed_status_t status, void *value)
{
    gw_keyed_cache_t *c = l->cache;

    l->deferred_status = status;
    retain(c, value);
    l->deferred_value = value;
    l->deferred_publishes = c->publishes;
    gw_timer_link(c->loop, c->deferred, &l->defer);
}

/* Stores what a fetch sent at `sent_at` found (`value`, NULL: not found) into `e`, or removes the entry when the
 * answer is not to be kept. */
static void entry_update(gw_keyed_cache_t *c, entry_t *e, void *value, uint64_t sent_at)
{
    if (c->conf.on_fetched != NULL)
        c->conf.on_fetched(c->conf.ctx, e->key, e->value, value);
    if (!c->caching || (value != NULL ? c->conf.cache_ttl_ms == 0 && c->conf.stale_ttl_ms == 0 : c->conf.negative_ttl_ms == 0)) {
        entry_remove(c, e);
        return;
    }
    release(c, e->value);
    retain(c, value);
    e->value = value;
    e->kind = value != NULL ? ENTRY_FOUND : ENTRY_NOT_FOUND;
    e->fresh_until = sent_at + (value != NULL ? c->conf.cache_ttl_ms : c->conf.negative_ttl_ms);
    e->confirmed_at = sent_at;
    make_youngest(c, e); /* confirmed now: youngest */
}

static void flight_free(flight_t *f)
{
    if (f->counter_req != NULL)
        gw_redis_req_cancel(f->counter_req);
    flight_detach(f);
    h2o_linklist_unlink(&f->link);
    free(f);
}

static void on_hgetall(void *data, const char *err, redisReply *reply)
{
    flight_t *f = data;
    gw_keyed_cache_t *c = f->cache;
    gw_keyed_status_t status;
    entry_t *e = f->entry;
    void *value = NULL;

    f->req = NULL;
    if (f->counter_req != NULL) {
        /* sent first, so answered first; unless it timed out in the same turn: the counter is unknown */
        gw_redis_req_cancel(f->counter_req);
        f->counter_req = NULL;
    }
    /* err: "timeout", "disconnected" or a server error (a key of the wrong type): Redis cannot tell us now */
    if (err != NULL || c->conf.parse(c->conf.ctx, f->key, reply, &value) != 0) {
        status = GW_KEYED_UNAVAILABLE;
        if (e != NULL && usable_stale(c, e, h2o_now(c->loop))) {
            status = GW_KEYED_FOUND;
            value = e->value;
            retain(c, value);
            COUNT(c, stale);
        } else if (e != NULL && e->kind == ENTRY_EMPTY) {
            entry_remove(c, e);
        }
    } else {
        status = value != NULL ? GW_KEYED_FOUND : GW_KEYED_NOT_FOUND;
        if (value != NULL && c->conf.counted != NULL)
            c->conf.counted(value, f->counter); /* not shared yet */
        if (e != NULL) {
            flight_detach(f); /* before on_fetched: the entry is settled */
            entry_update(c, e, value, f->sent_at);
        }
    }
    flight_detach(f);

    /* One at a time from the head: a callback may cancel another waiter, or start a
     * lookup of this key (which finds the settled entry or starts a new flight). */
    while (!h2o_linklist_is_empty(&f->waiters)) {
        gw_keyed_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_keyed_lookup_t, link, f->waiters.next);
        h2o_linklist_unlink(&l->link);
        answer(l, status, value);
    }
    release(c, value);
    flight_free(f);
}

static void on_counter(void *data, const char *err, redisReply *reply)
{
    flight_t *f = data;

    f->counter_req = NULL;
    f->counter = err == NULL ? gw_ingress_parse_total(reply) : 0;
}

/* Sends "<cmd> <head><key>}" for f; NULL when Redis cannot be asked now. */
static gw_redis_req_t *send_key_command(gw_keyed_cache_t *c, flight_t *f, const char *cmd, const char *head, size_t head_len,
                                        const entry_t *e, gw_redis_reply_cb cb)
{
    size_t key_len = head_len + e->len + 1;
    char buf[512], *heap = NULL, *k = buf;
    gw_redis_req_t *req;

    if (key_len + 1 > sizeof(buf))
        k = heap = h2o_mem_alloc(key_len + 1);
    memcpy(k, head, head_len);
    memcpy(k + head_len, e->key, e->len);
    k[key_len - 1] = '}';
    k[key_len] = '\0';
    {
        const char *argv[] = {cmd, k};
        size_t argvlen[] = {strlen(cmd), key_len};
        req = gw_redis_command_argv(c->redis, c->conf.lookup_timeout_ms, cb, f, 2, argv, argvlen);
    }
    free(heap);
    return req;
}

/* Starts the fetch of e->key (the counter's GET, then the HGETALL, in one
 * round trip); NULL when Redis cannot be asked now. */
static flight_t *flight_start(gw_keyed_cache_t *c, entry_t *e)
{
    flight_t *f = h2o_mem_alloc(sizeof(*f) + e->len + 1);

    memset(f, 0, sizeof(*f));
    if (c->counter_head != NULL)
        f->counter_req = send_key_command(c, f, "GET", c->counter_head, c->counter_head_len, e, on_counter);
    if ((f->req = send_key_command(c, f, "HGETALL", c->key_head, c->key_head_len, e, on_hgetall)) == NULL) {
        if (f->counter_req != NULL)
            gw_redis_req_cancel(f->counter_req);
        free(f);
        return NULL;
    }
    COUNT(c, fetches);
    f->cache = c;
    f->entry = e;
    f->sent_at = h2o_now(c->loop);
    memcpy(f->key, e->key, e->len + 1);
    h2o_linklist_init_anchor(&f->waiters);
    h2o_linklist_insert(&c->flights, &f->link);
    e->flight = f;
    /* in use: youngest, so that eviction (which skips entries with a fetch in flight) finds the oldest free */
    make_youngest(c, e);
    return f;
}

/* 1 when `e` answers a lookup that is not `fresh` from the cache, without a fetch */
static int entry_answers(gw_keyed_cache_t *c, const entry_t *e, int fresh, uint64_t now)
{
    if (fresh || now >= e->fresh_until || !c->conf.listening(c->conf.ctx))
        return 0;
    /* ENTRY_FOUND: while Redis is known to be down, stale_ttl_ms bounds it as well */
    return e->kind == ENTRY_NOT_FOUND || (e->kind == ENTRY_FOUND && (gw_redis_is_ready(c->redis) || usable_stale(c, e, now)));
}

/* 1 when `e` answers l from the cache (then deferred) */
static int answer_from_entry(gw_keyed_cache_t *c, gw_keyed_lookup_t *l, entry_t *e, uint64_t now)
{
    if (!entry_answers(c, e, l->fresh, now))
        return 0;
    COUNT(c, hits);
    defer(l, e->kind == ENTRY_NOT_FOUND ? GW_KEYED_NOT_FOUND : GW_KEYED_FOUND, e->kind == ENTRY_FOUND ? e->value : NULL);
    return 1;
}

/* Finds l's answer: from the cache (through the loop), or by joining or
 * starting the fetch of its key. `again`: l was looked up before and a
 * publish came meanwhile (MAX_AGAIN bounds how often). */
static void resolve(gw_keyed_cache_t *c, gw_keyed_lookup_t *l, int again)
{
    uint64_t now = h2o_now(c->loop);
    entry_t *e;

    if (l->len == 0) {
        defer(l, GW_KEYED_NOT_FOUND, NULL); /* cannot be a key the control plane wrote */
        return;
    }
    if (again && ++l->again > MAX_AGAIN) {
        defer(l, GW_KEYED_UNAVAILABLE, NULL);
        return;
    }
    if ((e = entry_find(c, l->key, l->len)) != NULL) {
        if (e->flight != NULL) {
            COUNT(c, coalesced);
            goto Join;
        }
        if (answer_from_entry(c, l, e, now))
            return;
    } else {
        e = entry_new(c, l->key, l->len);
    }

    /* a miss: no fetch in flight for this key */
    if (flight_start(c, e) == NULL) {
        /* not connected: answer now rather than at a deadline */
        if (usable_stale(c, e, now)) {
            COUNT(c, stale);
            defer(l, GW_KEYED_FOUND, e->value);
        } else {
            if (e->kind == ENTRY_EMPTY)
                entry_remove(c, e);
            defer(l, GW_KEYED_UNAVAILABLE, NULL);
        }
        return;
    }

Join:
    h2o_linklist_insert(&e->flight->waiters, &l->link);
}

/* publishes */

/* Detaches f (a publish came while it was in flight: its answer may predate the change) and moves its
 * waiters to `into`, to be looked up again once the entries are revoked. */
static void take_waiters(flight_t *f, h2o_linklist_t *into)
{
    flight_detach(f);
    while (!h2o_linklist_is_empty(&f->waiters)) {
        h2o_linklist_t *node = f->waiters.next;
        h2o_linklist_unlink(node);
        h2o_linklist_insert(into, node);
    }
}

/* Looks up again every lookup in `list` (taken from detached flights): each
 * joins a fetch sent from now on, or is answered from the loop. */
static void resolve_all(gw_keyed_cache_t *c, h2o_linklist_t *list)
{
    while (!h2o_linklist_is_empty(list)) {
        gw_keyed_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_keyed_lookup_t, link, list->next);
        h2o_linklist_unlink(&l->link);
        resolve(c, l, 1);
    }
}

int gw_keyed_cache_invalidate(gw_keyed_cache_t *c, const char *key, size_t len)
{
    h2o_linklist_t again;
    entry_t *e;

    ++c->publishes;
    h2o_linklist_init_anchor(&again);
    if ((e = entry_find(c, key, len)) != NULL) {
        COUNT(c, invalidations);
        /* a fetch already on its way may have been read before the change: its answer is neither kept nor
         * given to its waiters */
        if (e->flight != NULL)
            take_waiters(e->flight, &again);
        if (c->conf.keep_revoked && e->value != NULL) {
            e->kind = ENTRY_REVOKED; /* kept, never served: the next fetch tells on_fetched what it was */
            e->fresh_until = 0;
        } else {
            entry_remove(c, e);
        }
    }
    /* after the entry is revoked: what is looked up from here reads Redis again */
    resolve_all(c, &again);
    return e != NULL;
}

void gw_keyed_cache_flush(gw_keyed_cache_t *c)
{
    h2o_linklist_t *pos, *next, again;

    COUNT(c, flushes);
    ++c->publishes;
    h2o_linklist_init_anchor(&again);
    for (pos = c->by_age.next; pos != &c->by_age; pos = next) {
        entry_t *e = H2O_STRUCT_FROM_MEMBER(entry_t, age, pos);
        next = pos->next;
        if (e->flight != NULL)
            take_waiters(e->flight, &again);
        if (e->value != NULL) {
            /* must be confirmed before it serves again, but still answers during an outage
             * (bounded by stale_ttl_ms) */
            e->fresh_until = 0;
        } else {
            entry_remove(c, e);
        }
    }
    /* after the walk: looking up again adds entries */
    resolve_all(c, &again);
}

/* public API */

/* "<prefix><kind>:{" on the heap, its length in *len */
static char *key_head(const char *prefix, const char *kind, size_t *len)
{
    size_t prefix_len = strlen(prefix), kind_len = strlen(kind);
    char *head = h2o_mem_alloc(prefix_len + kind_len + 3);

    memcpy(head, prefix, prefix_len);
    memcpy(head + prefix_len, kind, kind_len);
    memcpy(head + prefix_len + kind_len, ":{", 3);
    *len = prefix_len + kind_len + 2;
    return head;
}

gw_keyed_cache_t *gw_keyed_cache_new(h2o_loop_t *loop, gw_redis_t *redis, const gw_keyed_cache_conf_t *conf)
{
    gw_keyed_cache_t *c = h2o_mem_alloc(sizeof(*c));
    const char *prefix = conf->prefix != NULL ? conf->prefix : "";

    memset(c, 0, sizeof(*c));
    c->key_head = key_head(prefix, conf->kind != NULL ? conf->kind : "", &c->key_head_len);
    if (conf->counter_kind != NULL)
        c->counter_head = key_head(prefix, conf->counter_kind, &c->counter_head_len);
    c->loop = loop;
    c->redis = redis;
    c->conf = *conf;
    c->conf.prefix = c->conf.kind = c->conf.counter_kind = NULL;
    gw_hashtab_init(&c->entries);
    c->deferred = gw_loop_timeout_acquire(loop, 0);
    h2o_linklist_init_anchor(&c->lookups);
    h2o_linklist_init_anchor(&c->flights);
    h2o_linklist_init_anchor(&c->by_age);
    c->lookup_allocator.max = GW_RECYCLE_MAX;
    return c;
}

void gw_keyed_cache_free(gw_keyed_cache_t *c)
{
    if (c == NULL)
        return;
    /* Lookups still open are dropped without a callback; their handles die with the cache.
     * Not from inside a lookup callback: h2o may be walking `deferred` at that moment. */
    while (!h2o_linklist_is_empty(&c->lookups))
        gw_keyed_lookup_cancel(H2O_STRUCT_FROM_MEMBER(gw_keyed_lookup_t, all, c->lookups.next));
    while (!h2o_linklist_is_empty(&c->flights)) {
        flight_t *f = H2O_STRUCT_FROM_MEMBER(flight_t, link, c->flights.next);
        if (f->req != NULL)
            gw_redis_req_cancel(f->req);
        flight_free(f);
    }
    while (!h2o_linklist_is_empty(&c->by_age))
        entry_remove(c, H2O_STRUCT_FROM_MEMBER(entry_t, age, c->by_age.next));
    gw_loop_timeout_release(c->loop, c->deferred);
    gw_hashtab_dispose(&c->entries);
    gw_recycle_clear(&c->lookup_allocator);
    free(c->key_head);
    free(c->counter_head);
    free(c);
}

void gw_keyed_cache_set_caching(gw_keyed_cache_t *c, int on)
{
    c->caching = on != 0;
}

gw_keyed_lookup_t *gw_keyed_cache_lookup(gw_keyed_cache_t *c, const char *key, size_t len, int fresh, gw_keyed_fn cb, void *data)
{
    gw_keyed_lookup_t *l = gw_recycle_alloc(&c->lookup_allocator, sizeof(*l) + c->conf.key_max + 1);

    memset(l, 0, sizeof(*l));
    l->cache = c;
    l->cb = cb;
    l->data = data;
    l->defer.cb = on_deferred;
    l->fresh = fresh != 0;
    if (len <= c->conf.key_max) {
        memcpy(l->key, key, len); /* longer: len 0, never looked up */
        l->len = len;
    }
    l->key[l->len] = '\0';
    h2o_linklist_insert(&c->lookups, &l->all);
    resolve(c, l, 0);
    return l;
}

void gw_keyed_lookup_cancel(gw_keyed_lookup_t *l)
{
    lookup_free(l);
}

int gw_keyed_cache_would_fetch_unknown(gw_keyed_cache_t *c, const char *key, size_t len)
{
    entry_t *e;

    if (len == 0 || len > c->conf.key_max)
        return 0;
    if ((e = entry_find(c, key, len)) == NULL)
        return 1;
    return e->flight == NULL && e->value == NULL && !entry_answers(c, e, 0, h2o_now(c->loop));
}

size_t gw_keyed_cache_num_entries(const gw_keyed_cache_t *c)
{
    return gw_hashtab_size(&c->entries);
}
