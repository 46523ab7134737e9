/*
 * Route lookups behind a per-worker cache. An entry per sandbox id holds
 * what Redis last said (a record, "no such sandbox", or "revoked by a
 * message") and the fetch in flight for that id, so concurrent misses share
 * one HGETALL. Pub/sub messages evict; a (re)subscription expires
 * everything; TTLs bound staleness whatever pub/sub does. A lookup is never
 * answered with what was read before a publish of its sandbox that the store
 * has seen: the waiters of a fetch that a publish detached are looked up
 * again, and so is an answer from the cache still waiting for the loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/counter.h"
#include "common/hashtab.h"
#include "common/recycle.h"
#include "routing/route_store.h"

typedef enum {
    ENTRY_EMPTY = 0, /* created by a miss; its first fetch is in flight */
    ENTRY_FOUND,     /* `sandbox` as read at `confirmed_at` */
    ENTRY_NOT_FOUND, /* Redis said there is no such sandbox */
    ENTRY_REVOKED,   /* a message said it changed: never served; `sandbox` kept to notice a lifecycle change */
} entry_kind_t;

typedef struct st_flight_t flight_t;

typedef struct st_entry_t {
    gw_hashtab_node_t node; /* in store->entries, keyed by `id` */
    h2o_linklist_t age;     /* in store->by_age, confirmed (or fetched) longest ago first */
    entry_kind_t kind;
    gw_sandbox_t *sandbox; /* owned; FOUND and (optionally) REVOKED */
    uint64_t confirmed_at; /* when the fetch that produced this answer was sent */
    uint64_t fresh_until;  /* served without asking Redis before this */
    flight_t *flight;      /* the fetch for this id, or NULL */
    char id[GW_SANDBOX_ID_MAX + 1];
} entry_t;

/* One HGETALL (with the GET of the running total sent right before it) and
 * the lookups waiting for it. */
struct st_flight_t {
    gw_route_store_t *store;
    entry_t *entry; /* NULL once detached: the answer still goes to the waiters but is not cached */
    gw_redis_req_t *req;
    gw_redis_req_t *total_req; /* the GET of <prefix>egress:{<id>}, until it answered */
    uint64_t total;            /* its answer (0: absent or unknown) */
    uint64_t sent_at;
    h2o_linklist_t waiters; /* gw_route_lookup_t.link */
    h2o_linklist_t link;    /* in store->flights */
    char id[GW_SANDBOX_ID_MAX + 1];
};

struct st_gw_route_store_t {
    h2o_loop_t *loop;
    gw_redis_t *redis;
    gw_redis_t *subscriber;     /* NULL: no cache */
    int listening;              /* the subscription is confirmed: a cached entry can be trusted */
    gw_route_store_conf_t conf; /* conf.prefix points to `prefix` */
    char *prefix;
    h2o_timeout_t deferred; /* 0 ms: answers known at lookup time still go through the loop */
    h2o_linklist_t lookups; /* every gw_route_lookup_t not yet answered or cancelled */
    h2o_linklist_t flights; /* every flight_t whose HGETALL is in flight */
    gw_hashtab_t entries;   /* entry_t by id */
    h2o_linklist_t by_age;
    h2o_mem_recycle_t lookup_allocator; /* of gw_route_lookup_t: one per request */
    uint64_t publishes;                 /* messages and (re)subscriptions seen: deferred answers read before one are redone */
    uint64_t bad_host_logged_at;        /* when the last "host:<n> not recognised" line was written */
};

/* Lines about unrecognised host:<n> values are at least this far apart in
 * one store (without a cache every fetch would write one). */
#define BAD_HOST_LOG_INTERVAL_MS 1000

struct st_gw_route_lookup_t {
    gw_route_store_t *store;
    gw_route_cb cb;
    void *data;
    h2o_timeout_entry_t defer; /* linked while an answer known at lookup time waits for the loop */
    gw_route_status_t deferred_status;
    gw_sandbox_t *deferred_sandbox; /* retained */
    uint64_t deferred_publishes;    /* store->publishes when the deferred answer was known */
    h2o_linklist_t link;            /* in a flight's waiters while waiting for its fetch */
    h2o_linklist_t all;             /* in store->lookups */
    unsigned again;                 /* times looked up again after a publish (bounded by MAX_AGAIN) */
    unsigned fresh : 1;             /* gw_route_store_lookup_fresh */
    char id[GW_SANDBOX_ID_MAX + 1]; /* "" when the id cannot be a sandbox's */
};

/* A lookup whose fetch publishes of its sandbox keep detaching is answered
 * GW_ROUTE_UNAVAILABLE after this many fetches more, so that a stream of
 * publishes cannot hold it for ever (each fetch has its own deadline). */
#define MAX_AGAIN 4

#define COUNT(s, name)                                                                                                             \
    do {                                                                                                                           \
        if ((s)->conf.counters != NULL)                                                                                            \
            GW_COUNTER_ADD(&(s)->conf.counters->name, 1);                                                                          \
    } while (0)

/* the table */

static entry_t *entry_find(gw_route_store_t *s, const char *id, size_t len)
{
    gw_hashtab_node_t *n = gw_hashtab_find(&s->entries, id, len);
    return n != NULL ? H2O_STRUCT_FROM_MEMBER(entry_t, node, n) : NULL;
}

static void flight_detach(flight_t *f)
{
    if (f->entry != NULL) {
        f->entry->flight = NULL;
        f->entry = NULL;
    }
}

static void entry_remove(gw_route_store_t *s, entry_t *e)
{
    gw_hashtab_remove(&s->entries, &e->node);
    h2o_linklist_unlink(&e->age);
    if (e->flight != NULL)
        flight_detach(e->flight);
    gw_sandbox_release(e->sandbox);
    free(e);
}

static entry_t *entry_new(gw_route_store_t *s, const char *id, size_t len)
{
    entry_t *e;

    /* Oldest first, skipping those with a fetch in flight: its waiters must stay reachable from the entry,
     * where a publish finds them. So the table may pass the bound by the fetches in flight (at most the
     * requests in flight, each bounded by lookup_timeout_ms). */
    for (h2o_linklist_t *pos = s->by_age.next; gw_hashtab_size(&s->entries) >= GW_ROUTE_CACHE_MAX_ENTRIES && pos != &s->by_age;) {
        entry_t *old = H2O_STRUCT_FROM_MEMBER(entry_t, age, pos);
        pos = pos->next;
        if (old->flight != NULL)
            continue;
        entry_remove(s, old);
        COUNT(s, evictions);
    }
    e = h2o_mem_alloc(sizeof(*e));
    memset(e, 0, sizeof(*e));
    memcpy(e->id, id, len);
    e->id[len] = '\0';
    gw_hashtab_insert(&s->entries, &e->node, e->id, len);
    h2o_linklist_insert(&s->by_age, &e->age);
    return e;
}

static int caching(const gw_route_store_t *s)
{
    return s->subscriber != NULL;
}

/* 1 when a FOUND entry may answer although Redis could not be asked now */
static int usable_stale(const gw_route_store_t *s, const entry_t *e, uint64_t now)
{
    return e->kind == ENTRY_FOUND && now - e->confirmed_at < s->conf.stale_ttl_ms;
}

/* answering */

static void lookup_free(gw_route_lookup_t *l)
{
    h2o_linklist_unlink(&l->all);
    if (h2o_linklist_is_linked(&l->link))
        h2o_linklist_unlink(&l->link);
    h2o_timeout_unlink(&l->defer);
    gw_sandbox_release(l->deferred_sandbox);
    h2o_mem_free_recycle(&l->store->lookup_allocator, l);
}

static void answer(gw_route_lookup_t *l, gw_route_status_t status, gw_sandbox_t *sandbox)
{
    gw_route_cb cb = l->cb;
    void *data = l->data;

    if (status == GW_ROUTE_UNAVAILABLE)
        COUNT(l->store, unavailable);
    /* freed first: the callback may start another lookup or cancel others */
    l->deferred_sandbox = NULL; /* the caller holds a reference during the call */
    lookup_free(l);
    cb(data, status, sandbox);
}

static void resolve(gw_route_store_t *s, gw_route_lookup_t *l, int again);

static void on_deferred(h2o_timeout_entry_t *entry)
{
    gw_route_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_route_lookup_t, defer, entry);
    gw_sandbox_t *sandbox = l->deferred_sandbox;

    if (l->deferred_publishes != l->store->publishes) {
        /* a publish (of this sandbox or another) arrived in the same loop turn, after the answer was known:
         * it may be revoked, and what the answer lets in would register with revocation after the publish
         * was handled */
        l->deferred_sandbox = NULL;
        gw_sandbox_release(sandbox);
        resolve(l->store, l, 1);
        return;
    }
    answer(l, l->deferred_status, sandbox);
    gw_sandbox_release(sandbox);
}

static void defer(gw_route_lookup_t *l, gw_route_status_t status, gw_sandbox_t *sandbox)
{
    l->deferred_status = status;
    if (sandbox != NULL)
        gw_sandbox_retain(sandbox);
    l->deferred_sandbox = sandbox;
    l->deferred_publishes = l->store->publishes;
    h2o_timeout_link(l->store->loop, &l->store->deferred, &l->defer);
}

/* Tells the operator once (per worker, and again when it changes) that a
 * record's host:<n> is neither preserve nor localhost. */
static void note_bad_host(gw_route_store_t *s, const gw_sandbox_t *before, const gw_sandbox_t *now)
{
    uint64_t t;

    if (now == NULL || now->bad_host_port == 0)
        return;
    if (before != NULL && before->bad_host_port == now->bad_host_port && strcmp(before->bad_host_value, now->bad_host_value) == 0)
        return;
    t = h2o_now(s->loop);
    if (s->bad_host_logged_at != 0 && t - s->bad_host_logged_at < BAD_HOST_LOG_INTERVAL_MS)
        return;
    s->bad_host_logged_at = t;
    fprintf(stderr,
            "routing: sandbox %s: host:%u is \"%s\", neither preserve nor localhost: port %u follows upstream.host_header\n",
            now->id, (unsigned)now->bad_host_port, now->bad_host_value, (unsigned)now->bad_host_port);
}

/* Stores what a fetch sent at `sent_at` found into `e`; tells the owner when a
 * known sandbox changed lifecycle or disappeared. Returns the entry, or NULL
 * when the answer is not to be kept (the entry is then removed). */
static entry_t *entry_update(gw_route_store_t *s, entry_t *e, gw_sandbox_t *sandbox, uint64_t sent_at)
{
    note_bad_host(s, e->sandbox, sandbox);
    if (e->sandbox != NULL && s->conf.on_lifecycle != NULL &&
        (sandbox == NULL || strcmp(e->sandbox->lifecycle.base, sandbox->lifecycle.base) != 0))
        s->conf.on_lifecycle(s->conf.lifecycle_data, e->id, sandbox != NULL ? sandbox->lifecycle.base : NULL);

    if (!caching(s) || (sandbox != NULL ? s->conf.cache_ttl_ms == 0 && s->conf.stale_ttl_ms == 0 : s->conf.negative_ttl_ms == 0)) {
        entry_remove(s, e);
        return NULL;
    }
    gw_sandbox_release(e->sandbox);
    if (sandbox != NULL) {
        gw_sandbox_retain(sandbox);
        e->sandbox = sandbox;
        e->kind = ENTRY_FOUND;
        e->fresh_until = sent_at + s->conf.cache_ttl_ms;
    } else {
        e->sandbox = NULL;
        e->kind = ENTRY_NOT_FOUND;
        e->fresh_until = sent_at + s->conf.negative_ttl_ms;
    }
    e->confirmed_at = sent_at;
    /* confirmed now: youngest */
    h2o_linklist_unlink(&e->age);
    h2o_linklist_insert(&s->by_age, &e->age);
    return e;
}

static void flight_free(flight_t *f)
{
    if (f->total_req != NULL)
        gw_redis_req_cancel(f->total_req);
    flight_detach(f);
    h2o_linklist_unlink(&f->link);
    free(f);
}

static void on_hgetall(void *data, const char *err, redisReply *reply)
{
    flight_t *f = data;
    gw_route_store_t *s = f->store;
    gw_sandbox_t *sandbox = NULL;
    gw_route_status_t status;
    entry_t *e = f->entry;
    const char *perr;

    f->req = NULL;
    if (f->total_req != NULL) {
        /* sent first, so answered first; unless it timed out in the same turn: the total is unknown */
        gw_redis_req_cancel(f->total_req);
        f->total_req = NULL;
    }
    /* err: "timeout", "disconnected" or a server error (a key of the wrong type): Redis cannot tell us now */
    if (err != NULL || gw_sandbox_parse(f->id, reply, &sandbox, &perr) != 0) {
        status = GW_ROUTE_UNAVAILABLE;
        if (e != NULL && usable_stale(s, e, h2o_now(s->loop))) {
            status = GW_ROUTE_FOUND;
            sandbox = e->sandbox;
            gw_sandbox_retain(sandbox);
            COUNT(s, stale);
        } else if (e != NULL && e->kind == ENTRY_EMPTY) {
            entry_remove(s, e);
        }
    } else {
        status = sandbox != NULL ? GW_ROUTE_FOUND : GW_ROUTE_NOT_FOUND;
        if (sandbox != NULL)
            sandbox->egress_total = f->total; /* not shared yet */
        if (e != NULL) {
            e->flight = NULL; /* before the lifecycle callback: the entry is settled */
            f->entry = NULL;
            entry_update(s, e, sandbox, f->sent_at);
        }
    }
    flight_detach(f);

    /* One at a time from the head: a callback may cancel another waiter, or start a
     * lookup of this id (which finds the settled entry or starts a new flight). */
    while (!h2o_linklist_is_empty(&f->waiters)) {
        gw_route_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_route_lookup_t, link, f->waiters.next);
        h2o_linklist_unlink(&l->link);
        answer(l, status, sandbox);
    }
    gw_sandbox_release(sandbox);
    flight_free(f);
}

/* pub/sub */

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
static void resolve_all(gw_route_store_t *s, h2o_linklist_t *list)
{
    while (!h2o_linklist_is_empty(list)) {
        gw_route_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_route_lookup_t, link, list->next);
        h2o_linklist_unlink(&l->link);
        resolve(s, l, 1);
    }
}

static void on_message(void *data, const char *payload, size_t len)
{
    gw_route_store_t *s = data;
    char id[GW_SANDBOX_ID_MAX + 1];
    h2o_linklist_t again;
    entry_t *e;

    if (memchr(payload, ':', len) != NULL) {
        if (s->conf.on_other_message != NULL)
            s->conf.on_other_message(s->conf.other_message_data, payload, len);
        return;
    }
    if (len == 0 || len > GW_SANDBOX_ID_MAX)
        return; /* not a sandbox id: nothing of ours */
    memcpy(id, payload, len);
    h2o_strtolower(id, len);
    id[len] = '\0';
    ++s->publishes;
    h2o_linklist_init_anchor(&again);
    if ((e = entry_find(s, id, len)) != NULL) {
        COUNT(s, invalidations);
        /* a fetch already on its way may have been read before the change: its answer is neither kept nor
         * given to its waiters */
        if (e->flight != NULL)
            take_waiters(e->flight, &again);
        if (e->sandbox != NULL) {
            /* kept, never served: the next fetch compares lifecycles */
            e->kind = ENTRY_REVOKED;
            e->fresh_until = 0;
        } else {
            entry_remove(s, e);
        }
    }
    /* after the entry is revoked: what is looked up from here reads Redis again */
    resolve_all(s, &again);
    if (s->conf.on_invalidate != NULL)
        s->conf.on_invalidate(s->conf.invalidate_data, id);
}

static void flush_all(gw_route_store_t *s)
{
    h2o_linklist_t *pos, *next, again;

    COUNT(s, flushes);
    ++s->publishes;
    h2o_linklist_init_anchor(&again);
    for (pos = s->by_age.next; pos != &s->by_age; pos = next) {
        entry_t *e = H2O_STRUCT_FROM_MEMBER(entry_t, age, pos);
        next = pos->next;
        if (e->flight != NULL)
            take_waiters(e->flight, &again);
        if (e->sandbox != NULL) {
            /* must be confirmed before it serves again, but still answers during an outage
             * (bounded by stale_ttl_ms) */
            e->fresh_until = 0;
        } else {
            entry_remove(s, e);
        }
    }
    /* after the walk: looking up again adds entries */
    resolve_all(s, &again);
}

static void on_subscriber_state(void *data, int connected)
{
    gw_route_store_t *s = data;

    /* "connected" comes when the SUBSCRIBE is confirmed: whatever was published while we were
     * not listening is lost, so nothing read before now is trusted. While not listening, a
     * publish would go unheard, so no entry answers as fresh: every lookup asks Redis, and
     * cached routes only stand in when Redis cannot answer (stale_ttl_ms). */
    s->listening = connected;
    if (connected) {
        flush_all(s);
        /* the server is back: the lookup connection need not wait out its backoff */
        gw_redis_reconnect_now(s->redis);
        if (s->conf.on_invalidate != NULL)
            s->conf.on_invalidate(s->conf.invalidate_data, NULL);
    }
}

/* public API */

gw_route_store_t *gw_route_store_new(h2o_loop_t *loop, gw_redis_t *redis, const gw_route_store_conf_t *conf)
{
    gw_route_store_t *s = h2o_mem_alloc(sizeof(*s));
    const char *prefix = conf->prefix != NULL ? conf->prefix : "";

    memset(s, 0, sizeof(*s));
    s->prefix = h2o_strdup(NULL, prefix, SIZE_MAX).base;
    gw_hashtab_init(&s->entries);
    s->loop = loop;
    s->redis = redis;
    s->conf = *conf;
    s->conf.prefix = s->prefix;
    h2o_timeout_init(loop, &s->deferred, 0);
    h2o_linklist_init_anchor(&s->lookups);
    h2o_linklist_init_anchor(&s->flights);
    h2o_linklist_init_anchor(&s->by_age);
    s->lookup_allocator.max = GW_RECYCLE_MAX;
    return s;
}

void gw_route_store_free(gw_route_store_t *s)
{
    if (s == NULL)
        return;
    /* Lookups still open are dropped without a callback; their handles die with the store.
     * Not from inside a lookup callback: h2o may be walking `deferred` at that moment. */
    while (!h2o_linklist_is_empty(&s->lookups))
        gw_route_lookup_cancel(H2O_STRUCT_FROM_MEMBER(gw_route_lookup_t, all, s->lookups.next));
    while (!h2o_linklist_is_empty(&s->flights)) {
        flight_t *f = H2O_STRUCT_FROM_MEMBER(flight_t, link, s->flights.next);
        if (f->req != NULL)
            gw_redis_req_cancel(f->req);
        flight_free(f);
    }
    while (!h2o_linklist_is_empty(&s->by_age))
        entry_remove(s, H2O_STRUCT_FROM_MEMBER(entry_t, age, s->by_age.next));
    h2o_timeout_dispose(s->loop, &s->deferred);
    gw_hashtab_dispose(&s->entries);
    gw_recycle_clear(&s->lookup_allocator);
    free(s->prefix);
    free(s);
}

int gw_route_store_subscribe(gw_route_store_t *s, gw_redis_t *subscriber)
{
    size_t prefix_len = strlen(s->prefix);
    char *channel = h2o_mem_alloc(prefix_len + sizeof("routes"));
    int ret;

    memcpy(channel, s->prefix, prefix_len);
    memcpy(channel + prefix_len, "routes", sizeof("routes"));
    gw_redis_set_state_cb(subscriber, on_subscriber_state, s);
    ret = gw_redis_subscribe(subscriber, channel, on_message, s);
    free(channel);
    if (ret == 0)
        s->subscriber = subscriber;
    return ret;
}

/* "<prefix><kind>{<id>}" in buf (GW_ROUTE_KEY_MAX bytes) or, for a longer
 * prefix, on the heap (*heap, to free); returns the key, its length in *len. */
#define GW_ROUTE_KEY_MAX (256 + GW_SANDBOX_ID_MAX + 16)
static char *make_key(const gw_route_store_t *s, const char *kind, const char *id, char *buf, char **heap, size_t *len)
{
    size_t prefix_len = strlen(s->prefix), kind_len = strlen(kind), id_len = strlen(id);
    char *k = buf;

    *len = prefix_len + kind_len + 1 + id_len + 1;
    *heap = NULL;
    if (*len + 1 > GW_ROUTE_KEY_MAX)
        k = *heap = h2o_mem_alloc(*len + 1);
    memcpy(k, s->prefix, prefix_len);
    memcpy(k + prefix_len, kind, kind_len);
    k[prefix_len + kind_len] = '{';
    memcpy(k + prefix_len + kind_len + 1, id, id_len);
    k[*len - 1] = '}';
    k[*len] = '\0';
    return k;
}

static void on_total(void *data, const char *err, redisReply *reply)
{
    flight_t *f = data;

    f->total_req = NULL;
    f->total = err == NULL ? gw_ingress_parse_total(reply) : 0;
}

/* Sends "<cmd> <prefix><kind>{<id>}" for f; NULL when Redis cannot be asked now. */
static gw_redis_req_t *send_key_command(gw_route_store_t *s, flight_t *f, const char *cmd, const char *kind, const char *id,
                                        gw_redis_reply_cb cb)
{
    char buf[GW_ROUTE_KEY_MAX], *heap;
    size_t len;
    const char *argv[] = {cmd, make_key(s, kind, id, buf, &heap, &len)};
    size_t argvlen[] = {strlen(cmd), len};
    gw_redis_req_t *req = gw_redis_command_argv(s->redis, s->conf.lookup_timeout_ms, cb, f, 2, argv, argvlen);

    free(heap);
    return req;
}

/* Starts the fetch of e->id: GET of the running total (egress_quota), then
 * HGETALL, pipelined in one round trip. NULL when Redis cannot be asked now. */
static flight_t *flight_start(gw_route_store_t *s, entry_t *e)
{
    flight_t *f = h2o_mem_alloc(sizeof(*f));

    memset(f, 0, sizeof(*f));
    f->total_req = send_key_command(s, f, "GET", "egress:", e->id, on_total);
    if ((f->req = send_key_command(s, f, "HGETALL", "sbx:", e->id, on_hgetall)) == NULL) {
        if (f->total_req != NULL)
            gw_redis_req_cancel(f->total_req);
        free(f);
        return NULL;
    }
    COUNT(s, fetches);
    f->store = s;
    f->entry = e;
    f->sent_at = h2o_now(s->loop);
    memcpy(f->id, e->id, strlen(e->id) + 1);
    h2o_linklist_init_anchor(&f->waiters);
    h2o_linklist_insert(&s->flights, &f->link);
    e->flight = f;
    /* in use: youngest, so that eviction (which skips entries with a fetch in flight) finds the oldest free */
    h2o_linklist_unlink(&e->age);
    h2o_linklist_insert(&s->by_age, &e->age);
    return f;
}

/* Finds l's answer: from the cache (through the loop), or by joining or
 * starting the fetch of its id. l->fresh: the cache never answers; only a
 * fetch sent from now on (or one in flight, which a publish would have
 * detached) does. `again`: l was looked up before and a publish came
 * meanwhile (MAX_AGAIN bounds how often). */
static void resolve(gw_route_store_t *s, gw_route_lookup_t *l, int again)
{
    size_t id_len = strlen(l->id);
    uint64_t now = h2o_now(s->loop);
    entry_t *e;

    if (id_len == 0) {
        /* cannot be a sandbox the control plane wrote */
        defer(l, GW_ROUTE_NOT_FOUND, NULL);
        return;
    }
    if (again && ++l->again > MAX_AGAIN) {
        defer(l, GW_ROUTE_UNAVAILABLE, NULL);
        return;
    }
    if ((e = entry_find(s, l->id, id_len)) != NULL) {
        if (e->flight != NULL) {
            COUNT(s, coalesced);
            goto Join;
        }
        if (!l->fresh && now < e->fresh_until && s->listening) {
            if (e->kind == ENTRY_NOT_FOUND) {
                COUNT(s, hits);
                defer(l, GW_ROUTE_NOT_FOUND, NULL);
                return;
            }
            /* e->kind == ENTRY_FOUND; while Redis is known to be down, stale_ttl_ms bounds it as well */
            if (gw_redis_is_ready(s->redis) || usable_stale(s, e, now)) {
                COUNT(s, hits);
                defer(l, GW_ROUTE_FOUND, e->sandbox);
                return;
            }
        }
    } else {
        e = entry_new(s, l->id, id_len);
    }

    /* a miss: no fetch in flight for this id */
    if (flight_start(s, e) == NULL) {
        /* not connected: answer now rather than at a deadline */
        if (usable_stale(s, e, now)) {
            COUNT(s, stale);
            defer(l, GW_ROUTE_FOUND, e->sandbox);
        } else {
            if (e->kind == ENTRY_EMPTY)
                entry_remove(s, e);
            defer(l, GW_ROUTE_UNAVAILABLE, NULL);
        }
        return;
    }

Join:
    h2o_linklist_insert(&e->flight->waiters, &l->link);
}

static gw_route_lookup_t *lookup(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data, int fresh)
{
    gw_route_lookup_t *l = h2o_mem_alloc_recycle(&s->lookup_allocator, sizeof(*l));
    size_t id_len = strlen(sandbox_id);

    memset(l, 0, sizeof(*l));
    l->store = s;
    l->cb = cb;
    l->data = data;
    l->defer.cb = on_deferred;
    l->fresh = fresh != 0;
    if (id_len <= GW_SANDBOX_ID_MAX)
        memcpy(l->id, sandbox_id, id_len + 1); /* longer: left "", never a sandbox */
    h2o_linklist_insert(&s->lookups, &l->all);
    resolve(s, l, 0);
    return l;
}

gw_route_lookup_t *gw_route_store_lookup(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data)
{
    return lookup(s, sandbox_id, cb, data, 0);
}

gw_route_lookup_t *gw_route_store_lookup_fresh(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data)
{
    return lookup(s, sandbox_id, cb, data, 1);
}

void gw_route_lookup_cancel(gw_route_lookup_t *l)
{
    /* a flight left without waiters goes on: its answer fills the cache */
    lookup_free(l);
}

int gw_route_store_listening(const gw_route_store_t *s)
{
    return s->listening;
}

size_t gw_route_store_num_entries(const gw_route_store_t *s)
{
    return gw_hashtab_size(&s->entries);
}
