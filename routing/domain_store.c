/*
 * Custom-domain lookups behind a per-worker cache, built like the route
 * store (routing/route_store.c): an entry per host holds what Redis last
 * said and the fetch in flight, so concurrent misses share one HGETALL; a
 * publish of "domain:<host>" evicts, a (re)subscription of the route store's
 * channel expires everything, TTLs bound staleness. The waiters of a fetch a
 * publish detached are looked up again, as are answers still waiting for the
 * loop when a publish comes, so no answer predates a publish the store saw.
 */
#include <stdlib.h>
#include <string.h>
#include "common/counter.h"
#include "common/hashtab.h"
#include "common/netaddr.h"
#include "common/recycle.h"
#include "routing/domain_store.h"

typedef enum {
    ENTRY_EMPTY = 0, /* created by a miss; its first fetch is in flight */
    ENTRY_FOUND,     /* an active record, as read at `confirmed_at` */
    ENTRY_NOT_FOUND, /* no record, or one that is not served */
} entry_kind_t;

typedef struct st_flight_t flight_t;

typedef struct st_entry_t {
    gw_hashtab_node_t node; /* in store->entries, keyed by `host` */
    h2o_linklist_t age;     /* in store->by_age, confirmed longest ago first */
    entry_kind_t kind;
    gw_domain_t domain; /* ENTRY_FOUND */
    uint64_t confirmed_at;
    uint64_t fresh_until;
    flight_t *flight;
    size_t host_len;
    char host[]; /* NUL-terminated */
} entry_t;

struct st_flight_t {
    gw_domain_store_t *store;
    entry_t *entry; /* NULL once detached by a publish: its answer is neither cached nor given to waiters */
    gw_redis_req_t *req;
    uint64_t sent_at;
    h2o_linklist_t waiters; /* gw_domain_lookup_t.link */
    h2o_linklist_t link;    /* in store->flights */
};

struct st_gw_domain_store_t {
    h2o_loop_t *loop;
    gw_redis_t *redis;
    gw_domain_store_conf_t conf; /* conf.prefix points to `prefix` */
    char *prefix;
    h2o_timeout_t deferred; /* 0 ms: answers known at lookup time still go through the loop */
    h2o_linklist_t lookups; /* every open gw_domain_lookup_t */
    h2o_linklist_t flights;
    gw_hashtab_t entries;
    h2o_linklist_t by_age;
    h2o_mem_recycle_t lookup_allocator;
    uint64_t publishes; /* messages and flushes seen: deferred answers known before one are redone */
};

struct st_gw_domain_lookup_t {
    gw_domain_store_t *store;
    gw_domain_cb cb;
    void *data;
    h2o_timeout_entry_t defer;
    gw_domain_status_t deferred_status;
    gw_domain_t deferred_domain;
    uint64_t deferred_publishes;
    h2o_linklist_t link; /* in a flight's waiters */
    h2o_linklist_t all;  /* in store->lookups */
    unsigned again;
    char host[GW_DOMAIN_HOST_MAX + 1];
};

/* As in the route store: a lookup whose fetches publishes keep detaching is
 * answered GW_DOMAIN_UNAVAILABLE after this many more. */
#define MAX_AGAIN 4

#define COUNT(s, name)                                                                                                             \
    do {                                                                                                                           \
        if ((s)->conf.counters != NULL)                                                                                            \
            GW_COUNTER_ADD(&(s)->conf.counters->name, 1);                                                                          \
    } while (0)

/* host names */

static int label_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

size_t gw_domain_host_normalize(h2o_iovec_t authority, char *out)
{
    h2o_iovec_t host = gw_host_strip_port(authority);
    size_t i, rest = authority.len - host.len, label = 0;
    int all_digits = 1;

    /* ":<1-5 digits>" or nothing after the name, as for preview hosts */
    if (rest != 0) {
        if (rest < 2 || rest > 6 || authority.base[host.len] != ':')
            return 0;
        for (i = host.len + 1; i != authority.len; ++i)
            if (authority.base[i] < '0' || authority.base[i] > '9')
                return 0;
    }
    if (host.len != 0 && host.base[host.len - 1] == '.')
        --host.len;
    if (host.len == 0 || host.len > GW_DOMAIN_HOST_MAX)
        return 0;
    for (i = 0; i != host.len; ++i) {
        char c = (char)h2o_tolower(host.base[i]);
        if (c == '.') {
            if (label == 0)
                return 0;
            label = 0;
        } else if (!label_char(c) || ++label > 63) {
            return 0;
        } else if (c < '0' || c > '9') {
            all_digits = 0;
        }
        out[i] = c;
    }
    /* "1.2.3.4" is an address, never a customer's name ('[' of IPv6 is refused above) */
    if (label == 0 || all_digits)
        return 0;
    out[host.len] = '\0';
    return host.len;
}

/* records */

static h2o_iovec_t field(const redisReply *reply, const char *name)
{
    size_t i, n = strlen(name);

    for (i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *k = reply->element[i], *v = reply->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING && k->len == n && memcmp(k->str, name, n) == 0)
            return h2o_iovec_init(v->str, v->len);
    }
    return h2o_iovec_init(NULL, 0);
}

/* 0 with *active set (1: served, `out` filled), or -1 when the reply is not a hash's. */
static int parse_record(const redisReply *reply, int *active, gw_domain_t *out)
{
    h2o_iovec_t state, sandbox, port;
    size_t i;

    *active = 0;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY)
        return -1;
    state = field(reply, "state");
    sandbox = field(reply, "sandbox");
    port = field(reply, "port");
    if (!h2o_memis(state.base, state.len, H2O_STRLIT("active")))
        return 0;
    if (sandbox.len == 0 || sandbox.len > GW_SANDBOX_ID_MAX || gw_port_parse(port.base, port.len, &out->port) != 0)
        return 0;
    for (i = 0; i != sandbox.len; ++i) {
        char c = (char)h2o_tolower(sandbox.base[i]);
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            return 0;
        out->sandbox_id[i] = c;
    }
    out->sandbox_id[sandbox.len] = '\0';
    *active = 1;
    return 0;
}

/* the table */

static entry_t *entry_find(gw_domain_store_t *s, const char *host, size_t len)
{
    gw_hashtab_node_t *n = gw_hashtab_find(&s->entries, host, len);
    return n != NULL ? H2O_STRUCT_FROM_MEMBER(entry_t, node, n) : NULL;
}

static void flight_detach(flight_t *f)
{
    if (f->entry != NULL) {
        f->entry->flight = NULL;
        f->entry = NULL;
    }
}

static void entry_remove(gw_domain_store_t *s, entry_t *e)
{
    gw_hashtab_remove(&s->entries, &e->node);
    h2o_linklist_unlink(&e->age);
    if (e->flight != NULL)
        flight_detach(e->flight);
    free(e);
}

static void make_youngest(gw_domain_store_t *s, entry_t *e)
{
    h2o_linklist_unlink(&e->age);
    h2o_linklist_insert(&s->by_age, &e->age);
}

static entry_t *entry_new(gw_domain_store_t *s, const char *host, size_t len)
{
    entry_t *e;

    for (h2o_linklist_t *pos = s->by_age.next; gw_hashtab_size(&s->entries) >= GW_DOMAIN_CACHE_MAX_ENTRIES && pos != &s->by_age;) {
        entry_t *old = H2O_STRUCT_FROM_MEMBER(entry_t, age, pos);
        pos = pos->next;
        if (old->flight != NULL)
            continue; /* its waiters must stay reachable by a publish */
        entry_remove(s, old);
        COUNT(s, evictions);
    }
    e = h2o_mem_alloc(sizeof(*e) + len + 1);
    memset(e, 0, sizeof(*e));
    memcpy(e->host, host, len);
    e->host[len] = '\0';
    e->host_len = len;
    gw_hashtab_insert(&s->entries, &e->node, e->host, len);
    h2o_linklist_insert(&s->by_age, &e->age);
    return e;
}

static int listening(const gw_domain_store_t *s)
{
    return s->conf.routes != NULL && gw_route_store_listening(s->conf.routes);
}

static int usable_stale(const gw_domain_store_t *s, const entry_t *e, uint64_t now)
{
    return e->kind == ENTRY_FOUND && now - e->confirmed_at < s->conf.stale_ttl_ms;
}

/* answering */

static void lookup_free(gw_domain_lookup_t *l)
{
    h2o_linklist_unlink(&l->all);
    if (h2o_linklist_is_linked(&l->link))
        h2o_linklist_unlink(&l->link);
    h2o_timeout_unlink(&l->defer);
    h2o_mem_free_recycle(&l->store->lookup_allocator, l);
}

static void answer(gw_domain_lookup_t *l, gw_domain_status_t status, const gw_domain_t *domain)
{
    gw_domain_cb cb = l->cb;
    void *data = l->data;
    gw_domain_t copy;

    if (status == GW_DOMAIN_UNAVAILABLE)
        COUNT(l->store, unavailable);
    if (domain != NULL)
        copy = *domain;
    /* freed first: the callback may start or cancel lookups */
    lookup_free(l);
    cb(data, status, domain != NULL ? &copy : NULL);
}

static void resolve(gw_domain_store_t *s, gw_domain_lookup_t *l, int again);

static void on_deferred(h2o_timeout_entry_t *entry)
{
    gw_domain_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_domain_lookup_t, defer, entry);

    if (l->deferred_publishes != l->store->publishes) {
        /* a publish came in the same loop turn, after the answer was known */
        resolve(l->store, l, 1);
        return;
    }
    answer(l, l->deferred_status, l->deferred_status == GW_DOMAIN_ACTIVE ? &l->deferred_domain : NULL);
}

static void defer(gw_domain_lookup_t *l, gw_domain_status_t status, const gw_domain_t *domain)
{
    l->deferred_status = status;
    if (domain != NULL)
        l->deferred_domain = *domain;
    l->deferred_publishes = l->store->publishes;
    h2o_timeout_link(l->store->loop, &l->store->deferred, &l->defer);
}

/* Keeps what a fetch sent at `sent_at` found (active: `domain`), or removes the entry when nothing is to be kept. */
static void entry_update(gw_domain_store_t *s, entry_t *e, int active, const gw_domain_t *domain, uint64_t sent_at)
{
    uint64_t ttl = active ? s->conf.cache_ttl_ms : s->conf.negative_ttl_ms;

    if (s->conf.routes == NULL || (active ? ttl == 0 && s->conf.stale_ttl_ms == 0 : ttl == 0)) {
        entry_remove(s, e);
        return;
    }
    e->kind = active ? ENTRY_FOUND : ENTRY_NOT_FOUND;
    if (active)
        e->domain = *domain;
    e->confirmed_at = sent_at;
    e->fresh_until = sent_at + ttl;
    make_youngest(s, e);
}

static void flight_free(flight_t *f)
{
    flight_detach(f);
    h2o_linklist_unlink(&f->link);
    free(f);
}

static void on_hgetall(void *data, const char *err, redisReply *reply)
{
    flight_t *f = data;
    gw_domain_store_t *s = f->store;
    entry_t *e = f->entry;
    gw_domain_status_t status;
    gw_domain_t domain;
    int active = 0;

    f->req = NULL;
    if (err != NULL || parse_record(reply, &active, &domain) != 0) {
        /* Redis cannot tell us now (down, late, or a key of the wrong type) */
        status = GW_DOMAIN_UNAVAILABLE;
        if (e != NULL && usable_stale(s, e, h2o_now(s->loop))) {
            status = GW_DOMAIN_ACTIVE;
            domain = e->domain;
            active = 1;
            COUNT(s, stale);
        } else if (e != NULL && e->kind == ENTRY_EMPTY) {
            entry_remove(s, e);
        }
    } else {
        status = active ? GW_DOMAIN_ACTIVE : GW_DOMAIN_NOT_SERVED;
        if (e != NULL) {
            flight_detach(f);
            entry_update(s, e, active, &domain, f->sent_at);
        }
    }
    flight_detach(f);
    while (!h2o_linklist_is_empty(&f->waiters)) {
        gw_domain_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_domain_lookup_t, link, f->waiters.next);
        h2o_linklist_unlink(&l->link);
        answer(l, status, active ? &domain : NULL);
    }
    flight_free(f);
}

/* Starts the fetch of e->host; NULL when Redis cannot be asked now. */
static flight_t *flight_start(gw_domain_store_t *s, entry_t *e)
{
    size_t prefix_len = strlen(s->prefix), key_len = prefix_len + sizeof("domain:{}") - 1 + e->host_len;
    char *key = h2o_mem_alloc(key_len + 1);
    flight_t *f = h2o_mem_alloc(sizeof(*f));

    memset(f, 0, sizeof(*f));
    /* "<prefix>domain:{<host>}" */
    memcpy(key, s->prefix, prefix_len);
    memcpy(key + prefix_len, "domain:{", 8);
    memcpy(key + prefix_len + 8, e->host, e->host_len);
    key[key_len - 1] = '}';
    key[key_len] = '\0';
    {
        const char *argv[] = {"HGETALL", key};
        size_t argvlen[] = {7, key_len};
        f->req = gw_redis_command_argv(s->redis, s->conf.lookup_timeout_ms, on_hgetall, f, 2, argv, argvlen);
    }
    free(key);
    if (f->req == NULL) {
        free(f);
        return NULL;
    }
    COUNT(s, fetches);
    f->store = s;
    f->entry = e;
    f->sent_at = h2o_now(s->loop);
    h2o_linklist_init_anchor(&f->waiters);
    h2o_linklist_insert(&s->flights, &f->link);
    e->flight = f;
    make_youngest(s, e);
    return f;
}

/* Finds l's answer: from the cache (through the loop), or by joining or starting the fetch of its host. */
static void resolve(gw_domain_store_t *s, gw_domain_lookup_t *l, int again)
{
    size_t len = strlen(l->host);
    uint64_t now = h2o_now(s->loop);
    entry_t *e;

    if (again && ++l->again > MAX_AGAIN) {
        defer(l, GW_DOMAIN_UNAVAILABLE, NULL);
        return;
    }
    if ((e = entry_find(s, l->host, len)) != NULL) {
        if (e->flight != NULL) {
            COUNT(s, coalesced);
            h2o_linklist_insert(&e->flight->waiters, &l->link);
            return;
        }
        if (now < e->fresh_until && listening(s)) {
            if (e->kind == ENTRY_NOT_FOUND) {
                COUNT(s, hits);
                defer(l, GW_DOMAIN_NOT_SERVED, NULL);
                return;
            }
            if (gw_redis_is_ready(s->redis) || usable_stale(s, e, now)) {
                COUNT(s, hits);
                defer(l, GW_DOMAIN_ACTIVE, &e->domain);
                return;
            }
        }
    } else {
        e = entry_new(s, l->host, len);
    }
    if (flight_start(s, e) == NULL) {
        /* not connected: answer now rather than at a deadline */
        if (usable_stale(s, e, now)) {
            COUNT(s, stale);
            defer(l, GW_DOMAIN_ACTIVE, &e->domain);
        } else {
            if (e->kind == ENTRY_EMPTY)
                entry_remove(s, e);
            defer(l, GW_DOMAIN_UNAVAILABLE, NULL);
        }
        return;
    }
    h2o_linklist_insert(&e->flight->waiters, &l->link);
}

/* publishes */

/* Detaches f (its answer may predate the publish) and looks its waiters up again once the entry is gone. */
static void redo_waiters(flight_t *f, h2o_linklist_t *into)
{
    flight_detach(f);
    while (!h2o_linklist_is_empty(&f->waiters)) {
        h2o_linklist_t *node = f->waiters.next;
        h2o_linklist_unlink(node);
        h2o_linklist_insert(into, node);
    }
}

static void resolve_all(gw_domain_store_t *s, h2o_linklist_t *list)
{
    while (!h2o_linklist_is_empty(list)) {
        gw_domain_lookup_t *l = H2O_STRUCT_FROM_MEMBER(gw_domain_lookup_t, link, list->next);
        h2o_linklist_unlink(&l->link);
        resolve(s, l, 1);
    }
}

void gw_domain_store_on_message(gw_domain_store_t *s, const char *payload, size_t len)
{
    char host[GW_DOMAIN_HOST_MAX + 1];
    size_t host_len;
    h2o_linklist_t again;
    entry_t *e;

    if (len <= 7 || memcmp(payload, "domain:", 7) != 0)
        return;
    if ((host_len = gw_domain_host_normalize(h2o_iovec_init(payload + 7, len - 7), host)) == 0)
        return; /* never looked up, so never cached */
    ++s->publishes;
    h2o_linklist_init_anchor(&again);
    if ((e = entry_find(s, host, host_len)) != NULL) {
        COUNT(s, invalidations);
        if (e->flight != NULL)
            redo_waiters(e->flight, &again);
        entry_remove(s, e);
    }
    resolve_all(s, &again);
}

void gw_domain_store_flush(gw_domain_store_t *s)
{
    h2o_linklist_t *pos, *next, again;

    COUNT(s, flushes);
    ++s->publishes;
    h2o_linklist_init_anchor(&again);
    for (pos = s->by_age.next; pos != &s->by_age; pos = next) {
        entry_t *e = H2O_STRUCT_FROM_MEMBER(entry_t, age, pos);
        next = pos->next;
        if (e->flight != NULL)
            redo_waiters(e->flight, &again);
        if (e->kind == ENTRY_FOUND) {
            /* confirmed again before it serves, but still answers during an outage (stale_ttl_ms) */
            e->fresh_until = 0;
        } else {
            entry_remove(s, e);
        }
    }
    resolve_all(s, &again);
}

/* public API */

gw_domain_store_t *gw_domain_store_new(h2o_loop_t *loop, gw_redis_t *redis, const gw_domain_store_conf_t *conf)
{
    gw_domain_store_t *s = h2o_mem_alloc(sizeof(*s));

    memset(s, 0, sizeof(*s));
    s->prefix = h2o_strdup(NULL, conf->prefix != NULL ? conf->prefix : "", SIZE_MAX).base;
    s->loop = loop;
    s->redis = redis;
    s->conf = *conf;
    s->conf.prefix = s->prefix;
    gw_hashtab_init(&s->entries);
    h2o_timeout_init(loop, &s->deferred, 0);
    h2o_linklist_init_anchor(&s->lookups);
    h2o_linklist_init_anchor(&s->flights);
    h2o_linklist_init_anchor(&s->by_age);
    s->lookup_allocator.max = GW_RECYCLE_MAX;
    return s;
}

void gw_domain_store_free(gw_domain_store_t *s)
{
    if (s == NULL)
        return;
    while (!h2o_linklist_is_empty(&s->lookups))
        gw_domain_lookup_cancel(H2O_STRUCT_FROM_MEMBER(gw_domain_lookup_t, all, s->lookups.next));
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

gw_domain_lookup_t *gw_domain_store_lookup(gw_domain_store_t *s, const char *host, gw_domain_cb cb, void *data)
{
    gw_domain_lookup_t *l = h2o_mem_alloc_recycle(&s->lookup_allocator, sizeof(*l));
    size_t len = strlen(host);

    memset(l, 0, sizeof(*l));
    l->store = s;
    l->cb = cb;
    l->data = data;
    l->defer.cb = on_deferred;
    h2o_linklist_insert(&s->lookups, &l->all);
    if (len == 0 || len > GW_DOMAIN_HOST_MAX) {
        defer(l, GW_DOMAIN_NOT_SERVED, NULL); /* cannot be a name the control plane wrote */
        return l;
    }
    memcpy(l->host, host, len + 1);
    resolve(s, l, 0);
    return l;
}

void gw_domain_lookup_cancel(gw_domain_lookup_t *l)
{
    /* a flight left without waiters goes on: its answer fills the cache */
    lookup_free(l);
}

size_t gw_domain_store_num_entries(const gw_domain_store_t *s)
{
    return gw_hashtab_size(&s->entries);
}
