/*
 * Route lookups: a keyed cache (routing/keyed_cache.c) of sandbox records
 * by id, kept honest by the SUBSCRIBE of <prefix>routes that this store
 * owns. A publish of a sandbox id revokes its entry (kept, never served, so
 * that the next fetch can tell a lifecycle change); a (re)subscription
 * expires everything and lets the lookup connection reconnect at once.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/hashtab.h"
#include "routing/route_store.h"

struct st_gw_route_store_t {
    h2o_loop_t *loop;
    gw_redis_t *redis;
    gw_redis_t *subscriber;     /* NULL: no cache */
    int listening;              /* the subscription is confirmed: a cached entry can be trusted */
    gw_route_store_conf_t conf; /* conf.prefix points to `prefix` */
    char *prefix;
    gw_keyed_cache_t *cache;        /* of gw_sandbox_t by id */
    uint64_t bad_host_logged_at;    /* when the last "host:<n> not recognised" line was written */
    uint64_t bad_timeout_logged_at; /* when the last "timeout:<n> ignored" line was written */
    gw_hashtab_t bad_cors;          /* of bad_cors_t: the (sandbox, lifecycle) whose malformed cors_origins were logged */
};

/* A (sandbox, lifecycle) whose cors_origins:<n> entry that is not an origin was logged. */
typedef struct st_bad_cors_t {
    gw_hashtab_node_t node;
    char key[]; /* "<id>\n<lifecycle>" */
} bad_cors_t;

/* At most this many are remembered per store; past it the memo starts again (a line more, never unbounded). */
#define MAX_BAD_CORS 1024

/* Lines about unrecognised host:<n> values are at least this far apart in
 * one store (without a cache every fetch would write one). */
#define BAD_HOST_LOG_INTERVAL_MS 1000

/* the cache's callbacks */

static void counted(void *value, uint64_t total)
{
    ((gw_sandbox_t *)value)->egress_total = total;
}

static int parse(void *ctx, const char *id, const redisReply *reply, void **value)
{
    gw_sandbox_t *sandbox = NULL;
    const char *err;

    if (gw_sandbox_parse_capped(id, reply, ((gw_route_store_t *)ctx)->conf.max_port_timeout_ms, &sandbox, &err) != 0)
        return -1;
    *value = sandbox;
    return 0;
}

static void retain(void *value)
{
    gw_sandbox_retain(value);
}

static void release(void *value)
{
    gw_sandbox_release(value);
}

static int listening(void *ctx)
{
    return ((gw_route_store_t *)ctx)->listening;
}

static void answer(gw_keyed_fn cb, void *data, gw_keyed_status_t status, void *value)
{
    ((gw_route_cb)cb)(data, (gw_route_status_t)status, value);
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

/* Tells the operator once per (sandbox, lifecycle) and worker, and again when
 * it changes, that a record's timeout:<n> is ignored (the config's defaults
 * apply to that port). */
static void note_bad_timeout(gw_route_store_t *s, const gw_sandbox_t *before, const gw_sandbox_t *now)
{
    uint64_t t;

    if (now == NULL || now->bad_timeout_port == 0)
        return;
    if (before != NULL && before->bad_timeout_port == now->bad_timeout_port &&
        strcmp(before->bad_timeout_value, now->bad_timeout_value) == 0 && strcmp(before->lifecycle.base, now->lifecycle.base) == 0)
        return;
    t = h2o_now(s->loop);
    if (s->bad_timeout_logged_at != 0 && t - s->bad_timeout_logged_at < BAD_HOST_LOG_INTERVAL_MS)
        return;
    s->bad_timeout_logged_at = t;
    fprintf(stderr,
            "routing: sandbox %s (lifecycle %s): timeout:%u is \"%s\", not a decimal from %u to %llu "
            "(upstream.max_port_timeout_ms): port %u keeps upstream.first_byte_timeout_ms and upstream.idle_timeout_ms\n",
            now->id, now->lifecycle.base, (unsigned)now->bad_timeout_port, now->bad_timeout_value, GW_SANDBOX_MIN_TIMEOUT_MS,
            (unsigned long long)s->conf.max_port_timeout_ms, (unsigned)now->bad_timeout_port);
}

/* Tells the operator once per (sandbox, lifecycle) in each worker that an entry of a record's cors_origins:<n> is not
 * an origin: it is ignored, the port's other origins hold (docs/cors.md, Browser code on other origins). */
static void note_bad_cors(gw_route_store_t *s, const gw_sandbox_t *now)
{
    size_t id_len, key_len;
    bad_cors_t *b;

    if (now == NULL || now->bad_cors_port == 0)
        return;
    id_len = strlen(now->id);
    key_len = id_len + 1 + now->lifecycle.len;
    b = h2o_mem_alloc(sizeof(*b) + key_len);
    memcpy(b->key, now->id, id_len);
    b->key[id_len] = '\n';
    memcpy(b->key + id_len + 1, now->lifecycle.base, now->lifecycle.len);
    if (gw_hashtab_find(&s->bad_cors, b->key, key_len) != NULL) {
        free(b);
        return;
    }
    if (gw_hashtab_size(&s->bad_cors) >= MAX_BAD_CORS)
        gw_hashtab_free_all(&s->bad_cors, offsetof(bad_cors_t, node));
    gw_hashtab_insert(&s->bad_cors, &b->node, b->key, key_len);
    fprintf(stderr, "routing: sandbox %s: cors_origins:%u has \"%s\", not an origin (scheme://host[:port]): ignored\n", now->id,
            (unsigned)now->bad_cors_port, now->bad_cors_value);
}

/* Tells the owner when a known sandbox changed lifecycle or disappeared. */
static void on_fetched(void *ctx, const char *id, void *before_value, void *after_value)
{
    gw_route_store_t *s = ctx;
    const gw_sandbox_t *before = before_value, *after = after_value;

    note_bad_host(s, before, after);
    note_bad_timeout(s, before, after);
    note_bad_cors(s, after);
    if (before != NULL && s->conf.on_lifecycle != NULL &&
        (after == NULL || strcmp(before->lifecycle.base, after->lifecycle.base) != 0))
        s->conf.on_lifecycle(s->conf.lifecycle_data, id, after != NULL ? after->lifecycle.base : NULL);
}

/* pub/sub */

static void on_message(void *data, const char *payload, size_t len)
{
    gw_route_store_t *s = data;
    char id[GW_SANDBOX_ID_MAX + 1];

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
    gw_keyed_cache_invalidate(s->cache, id, len);
    if (s->conf.on_invalidate != NULL)
        s->conf.on_invalidate(s->conf.invalidate_data, id);
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
        gw_keyed_cache_flush(s->cache);
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
    gw_keyed_cache_conf_t cconf = {
        .prefix = prefix,
        .kind = "sbx",            /* "<prefix>sbx:{<id>}" */
        .counter_kind = "egress", /* the running total egress_quota is checked against, in the same round trip */
        .counted = counted,
        .key_max = GW_SANDBOX_ID_MAX,
        .max_entries = GW_ROUTE_CACHE_MAX_ENTRIES,
        .lookup_timeout_ms = conf->lookup_timeout_ms,
        .cache_ttl_ms = conf->cache_ttl_ms,
        .negative_ttl_ms = conf->negative_ttl_ms,
        .stale_ttl_ms = conf->stale_ttl_ms,
        .counters = conf->counters,
        .keep_revoked = 1, /* the next fetch compares lifecycles */
        .ctx = s,
        .parse = parse,
        .retain = retain,
        .release = release,
        .listening = listening,
        .answer = answer,
        .on_fetched = on_fetched,
    };

    memset(s, 0, sizeof(*s));
    s->prefix = h2o_strdup(NULL, prefix, SIZE_MAX).base;
    s->loop = loop;
    s->redis = redis;
    s->conf = *conf;
    s->conf.prefix = s->prefix;
    if (s->conf.max_port_timeout_ms == 0)
        s->conf.max_port_timeout_ms = GW_SANDBOX_MAX_TIMEOUT_MS;
    s->cache = gw_keyed_cache_new(loop, redis, &cconf);
    gw_hashtab_init(&s->bad_cors);
    return s;
}

void gw_route_store_free(gw_route_store_t *s)
{
    if (s == NULL)
        return;
    gw_keyed_cache_free(s->cache);
    gw_hashtab_free_all(&s->bad_cors, offsetof(bad_cors_t, node));
    gw_hashtab_dispose(&s->bad_cors);
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
    if (ret == 0) {
        s->subscriber = subscriber;
        gw_keyed_cache_set_caching(s->cache, 1);
    }
    return ret;
}

gw_route_lookup_t *gw_route_store_lookup(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data)
{
    return gw_keyed_cache_lookup(s->cache, sandbox_id, strlen(sandbox_id), 0, (gw_keyed_fn)cb, data);
}

gw_route_lookup_t *gw_route_store_lookup_fresh(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data)
{
    return gw_keyed_cache_lookup(s->cache, sandbox_id, strlen(sandbox_id), 1, (gw_keyed_fn)cb, data);
}

void gw_route_lookup_cancel(gw_route_lookup_t *l)
{
    gw_keyed_lookup_cancel(l);
}

int gw_route_store_listening(const gw_route_store_t *s)
{
    return s->listening;
}

size_t gw_route_store_num_entries(const gw_route_store_t *s)
{
    return gw_keyed_cache_num_entries(s->cache);
}
