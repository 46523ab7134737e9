/*
 * Custom-domain lookups: a keyed cache (routing/keyed_cache.c) of domain
 * records by host, like the route store's of sandboxes. A publish of
 * "domain:<host>" on the route store's channel evicts the host, a
 * (re)subscription of that channel expires everything; entries answer as
 * fresh only while the route store listens.
 */
#include <stdlib.h>
#include <string.h>
#include "common/netaddr.h"
#include "routing/domain_store.h"

struct st_gw_domain_store_t {
    gw_domain_store_conf_t conf; /* conf.prefix is not kept */
    gw_keyed_cache_t *cache;     /* of value_t by host */
};

/* What the cache holds for an active host: a gw_domain_t with a count. */
typedef struct st_value_t {
    size_t refs;
    gw_domain_t domain;
} value_t;

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

/* the cache's callbacks */

static int parse(void *ctx, const char *host, const redisReply *reply, void **value)
{
    gw_domain_t domain;
    value_t *v;
    int active;

    (void)ctx;
    (void)host;
    if (parse_record(reply, &active, &domain) != 0)
        return -1;
    *value = NULL;
    if (active) {
        v = h2o_mem_alloc(sizeof(*v));
        v->refs = 1;
        v->domain = domain;
        *value = v;
    }
    return 0;
}

static void retain(void *value)
{
    ++((value_t *)value)->refs;
}

static void release(void *value)
{
    value_t *v = value;
    if (--v->refs == 0)
        free(v);
}

static int listening(void *ctx)
{
    gw_domain_store_t *s = ctx;
    return s->conf.routes != NULL && gw_route_store_listening(s->conf.routes);
}

static void answer(gw_keyed_fn cb, void *data, gw_keyed_status_t status, void *value)
{
    /* a copy: the callback may drop the last reference (by a lookup that evicts) */
    gw_domain_t copy;
    if (value != NULL)
        copy = ((value_t *)value)->domain;
    ((gw_domain_cb)cb)(data, (gw_domain_status_t)status, value != NULL ? &copy : NULL);
}

/* public API */

void gw_domain_store_on_message(gw_domain_store_t *s, const char *payload, size_t len)
{
    char host[GW_DOMAIN_HOST_MAX + 1];
    size_t host_len;

    if (len <= 7 || memcmp(payload, "domain:", 7) != 0)
        return;
    if ((host_len = gw_domain_host_normalize(h2o_iovec_init(payload + 7, len - 7), host)) == 0)
        return; /* never looked up, so never cached */
    gw_keyed_cache_invalidate(s->cache, host, host_len);
}

void gw_domain_store_flush(gw_domain_store_t *s)
{
    gw_keyed_cache_flush(s->cache);
}

gw_domain_store_t *gw_domain_store_new(h2o_loop_t *loop, gw_redis_t *redis, const gw_domain_store_conf_t *conf)
{
    gw_domain_store_t *s = h2o_mem_alloc(sizeof(*s));
    const char *prefix = conf->prefix != NULL ? conf->prefix : "";
    gw_keyed_cache_conf_t cconf = {
        .prefix = prefix,
        .kind = "domain", /* "<prefix>domain:{<host>}" */
        .key_max = GW_DOMAIN_HOST_MAX,
        .max_entries = GW_DOMAIN_CACHE_MAX_ENTRIES,
        .lookup_timeout_ms = conf->lookup_timeout_ms,
        .cache_ttl_ms = conf->cache_ttl_ms,
        .negative_ttl_ms = conf->negative_ttl_ms,
        .stale_ttl_ms = conf->stale_ttl_ms,
        .counters = conf->counters,
        .ctx = s,
        .parse = parse,
        .retain = retain,
        .release = release,
        .listening = listening,
        .answer = answer,
    };

    s->conf = *conf;
    s->conf.prefix = NULL;
    s->cache = gw_keyed_cache_new(loop, redis, &cconf);
    gw_keyed_cache_set_caching(s->cache, conf->routes != NULL);
    return s;
}

void gw_domain_store_free(gw_domain_store_t *s)
{
    if (s == NULL)
        return;
    gw_keyed_cache_free(s->cache);
    free(s);
}

gw_domain_lookup_t *gw_domain_store_lookup(gw_domain_store_t *s, const char *host, const struct sockaddr_storage *client,
                                           gw_domain_cb cb, void *data)
{
    size_t len = strlen(host);

    /* what the cache answers costs nothing, nor does reading again a domain it holds (bounded by the domains served);
     * a fetch of a name it does not know takes a token of the client's and of everyone's first. Over the budget: "not
     * served", through the cache like any answer (a key of length 0 is never fetched) */
    if (s->conf.budget != NULL && gw_keyed_cache_would_fetch_unknown(s->cache, host, len) &&
        gw_addr_budget_take(s->conf.budget, (const struct sockaddr *)client, sizeof(*client)) != GW_ADDR_BUDGET_OK)
        len = 0;
    return gw_keyed_cache_lookup(s->cache, host, len, 0, (gw_keyed_fn)cb, data);
}

void gw_domain_lookup_cancel(gw_domain_lookup_t *l)
{
    gw_keyed_lookup_cancel(l);
}

size_t gw_domain_store_num_entries(const gw_domain_store_t *s)
{
    return gw_keyed_cache_num_entries(s->cache);
}
