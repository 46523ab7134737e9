/*
 * The process's cache of custom-domain certificates (tls/dyncert.h): one
 * mutex over two hash tables (by host, and by certificate name for a
 * publish of cert:<name>) and two LRU lists (positive, negative). Every
 * operation under the mutex is O(1) except a publish of cert:<name> (the
 * hosts of that certificate) and the expiry gauge (a walk at scrape time).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/crypto.h>
#include <h2o/linklist.h>
#include <h2o/string_.h>
#include "common/hashtab.h"
#include "tls/dyncert.h"

#define LOG_TABLE_SIZE 4096 /* names remembered as logged (direct-mapped by hash) */
#define LOG_LINES_PER_SECOND 10

typedef struct st_entry_t {
    gw_hashtab_node_t by_host;
    gw_hashtab_node_t by_cert; /* positive entries only */
    h2o_linklist_t lru;        /* in d->positive or d->negative, most recent last */
    SSL_CTX *ctx;              /* NULL: negative */
    int stale;
    gw_dyncert_reason_t reason;
    uint64_t negative_until_ms;
    int64_t not_after;
    char *cert; /* positive entries only */
    char host[];
} entry_t;

struct st_gw_dyncert_t {
    gw_dyncert_conf_t conf;
    gw_tls_t *tls;
    gw_dyncert_counters_t counters;
    pthread_mutex_t mutex;
    gw_hashtab_t by_host, by_cert;
    h2o_linklist_t positive, negative;
    size_t num_positive, num_negative;
    /* refusal log: hashes of (host, reason) logged, and this second's budget */
    pthread_mutex_t log_mutex;
    uint64_t logged[LOG_TABLE_SIZE];
    time_t log_second;
    unsigned log_lines;
};

static const char *const reason_names[GW_DYNCERT_NUM_REASONS] = {"ok",       "no_domain",       "not_active",    "no_certificate",
                                                                 "bad_seal", "bad_certificate", "name_mismatch", "expired",
                                                                 "bad_name", "timeout",         "unavailable",   "rate_limited"};

const char *gw_dyncert_reason_name(gw_dyncert_reason_t r)
{
    return r < GW_DYNCERT_NUM_REASONS ? reason_names[r] : "unknown";
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

gw_dyncert_t *gw_dyncert_new(gw_tls_t *tls, const gw_dyncert_conf_t *conf)
{
    gw_dyncert_t *d = h2o_mem_alloc(sizeof(*d));
    size_t i;

    memset(d, 0, sizeof(*d));
    d->conf = *conf;
    d->conf.prefix = h2o_strdup(NULL, conf->prefix != NULL ? conf->prefix : "", SIZE_MAX).base;
    d->conf.domains = h2o_mem_alloc(sizeof(char *) * (conf->num_domains + 1));
    for (i = 0; i != conf->num_domains; ++i)
        ((char **)d->conf.domains)[i] = h2o_strdup(NULL, conf->domains[i], SIZE_MAX).base;
    if (d->conf.max_certs == 0)
        d->conf.max_certs = 1;
    d->tls = tls;
    pthread_mutex_init(&d->mutex, NULL);
    pthread_mutex_init(&d->log_mutex, NULL);
    gw_hashtab_init(&d->by_host);
    gw_hashtab_init(&d->by_cert);
    h2o_linklist_init_anchor(&d->positive);
    h2o_linklist_init_anchor(&d->negative);
    return d;
}

static void entry_free(gw_dyncert_t *d, entry_t *e)
{
    gw_hashtab_remove(&d->by_host, &e->by_host);
    h2o_linklist_unlink(&e->lru);
    if (e->ctx != NULL) {
        gw_hashtab_remove(&d->by_cert, &e->by_cert);
        SSL_CTX_free(e->ctx);
        --d->num_positive;
    } else {
        --d->num_negative;
    }
    free(e->cert);
    free(e);
}

void gw_dyncert_free(gw_dyncert_t *d)
{
    size_t i;

    if (d == NULL)
        return;
    while (!h2o_linklist_is_empty(&d->positive))
        entry_free(d, H2O_STRUCT_FROM_MEMBER(entry_t, lru, d->positive.next));
    while (!h2o_linklist_is_empty(&d->negative))
        entry_free(d, H2O_STRUCT_FROM_MEMBER(entry_t, lru, d->negative.next));
    gw_hashtab_dispose(&d->by_host);
    gw_hashtab_dispose(&d->by_cert);
    for (i = 0; i != d->conf.num_domains; ++i)
        free(d->conf.domains[i]);
    free((void *)d->conf.domains);
    free((void *)d->conf.prefix);
    OPENSSL_cleanse(d->conf.key, sizeof(d->conf.key));
    pthread_mutex_destroy(&d->log_mutex);
    pthread_mutex_destroy(&d->mutex);
    free(d);
}

const gw_dyncert_conf_t *gw_dyncert_conf(gw_dyncert_t *d)
{
    return &d->conf;
}

gw_dyncert_counters_t *gw_dyncert_counters(gw_dyncert_t *d)
{
    return &d->counters;
}

gw_tls_t *gw_dyncert_tls(gw_dyncert_t *d)
{
    return d->tls;
}

int gw_dyncert_is_custom(gw_dyncert_t *d, const char *name, size_t len)
{
    size_t i;

    for (i = 0; i != d->conf.num_domains; ++i) {
        const char *dom = d->conf.domains[i];
        size_t dl = strlen(dom);
        if (len == dl && memcmp(name, dom, dl) == 0)
            return 0;
        if (len > dl && name[len - dl - 1] == '.' && memcmp(name + len - dl, dom, dl) == 0)
            return 0;
    }
    return 1;
}

static entry_t *find(gw_dyncert_t *d, const char *host)
{
    gw_hashtab_node_t *n = gw_hashtab_find(&d->by_host, host, strlen(host));
    return n != NULL ? H2O_STRUCT_FROM_MEMBER(entry_t, by_host, n) : NULL;
}

int gw_dyncert_lookup(gw_dyncert_t *d, const char *host, gw_dyncert_found_t *found)
{
    entry_t *e;
    int rc = 0;

    memset(found, 0, sizeof(*found));
    pthread_mutex_lock(&d->mutex);
    if ((e = find(d, host)) != NULL) {
        if (e->ctx == NULL && mono_ms() >= e->negative_until_ms) {
            entry_free(d, e);
        } else if (e->ctx != NULL && (int64_t)time(NULL) >= e->not_after) {
            entry_free(d, e); /* expired while cached: a renewal may be in Redis */
        } else {
            h2o_linklist_unlink(&e->lru);
            h2o_linklist_insert(e->ctx != NULL ? &d->positive : &d->negative, &e->lru);
            if (e->ctx != NULL) {
                SSL_CTX_up_ref(e->ctx);
                found->ctx = e->ctx;
                found->stale = e->stale;
            } else {
                found->reason = e->reason;
            }
            rc = 1;
        }
    }
    pthread_mutex_unlock(&d->mutex);
    return rc;
}

static entry_t *entry_new(const char *host)
{
    size_t len = strlen(host);
    entry_t *e = h2o_mem_alloc(offsetof(entry_t, host) + len + 1);

    memset(e, 0, offsetof(entry_t, host));
    memcpy(e->host, host, len + 1);
    return e;
}

void gw_dyncert_store(gw_dyncert_t *d, const char *host, const char *cert_name, SSL_CTX *ctx, int64_t not_after)
{
    entry_t *e = entry_new(host), *old;

    e->cert = h2o_strdup(NULL, cert_name, SIZE_MAX).base;
    e->not_after = not_after;
    SSL_CTX_up_ref(ctx);
    e->ctx = ctx;
    pthread_mutex_lock(&d->mutex);
    if ((old = find(d, host)) != NULL)
        entry_free(d, old);
    gw_hashtab_insert(&d->by_host, &e->by_host, e->host, strlen(e->host));
    gw_hashtab_insert(&d->by_cert, &e->by_cert, e->cert, strlen(e->cert));
    h2o_linklist_insert(&d->positive, &e->lru);
    ++d->num_positive;
    while (d->num_positive > d->conf.max_certs) {
        entry_free(d, H2O_STRUCT_FROM_MEMBER(entry_t, lru, d->positive.next));
        atomic_fetch_add_explicit(&d->counters.evictions, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&d->mutex);
}

void gw_dyncert_store_negative(gw_dyncert_t *d, const char *host, gw_dyncert_reason_t reason)
{
    entry_t *e, *old;

    if (d->conf.negative_ttl_ms == 0 || !GW_DYNCERT_DEFINITIVE(reason))
        return;
    e = entry_new(host);
    e->reason = reason;
    e->negative_until_ms = mono_ms() + d->conf.negative_ttl_ms;
    pthread_mutex_lock(&d->mutex);
    if ((old = find(d, host)) != NULL)
        entry_free(d, old);
    gw_hashtab_insert(&d->by_host, &e->by_host, e->host, strlen(e->host));
    h2o_linklist_insert(&d->negative, &e->lru);
    ++d->num_negative;
    while (d->num_negative > GW_DYNCERT_MAX_NEGATIVE)
        entry_free(d, H2O_STRUCT_FROM_MEMBER(entry_t, lru, d->negative.next));
    pthread_mutex_unlock(&d->mutex);
}

/* Under the mutex: every entry of certificate `name`. */
static size_t drop_cert_locked(gw_dyncert_t *d, const char *name, size_t len)
{
    gw_hashtab_node_t *n;
    size_t dropped = 0;

    while ((n = gw_hashtab_find(&d->by_cert, name, len)) != NULL) {
        entry_free(d, H2O_STRUCT_FROM_MEMBER(entry_t, by_cert, n));
        ++dropped;
    }
    return dropped;
}

static void mark_all_stale_locked(gw_dyncert_t *d)
{
    h2o_linklist_t *pos;

    while (!h2o_linklist_is_empty(&d->negative))
        entry_free(d, H2O_STRUCT_FROM_MEMBER(entry_t, lru, d->negative.next));
    for (pos = d->positive.next; pos != &d->positive; pos = pos->next)
        H2O_STRUCT_FROM_MEMBER(entry_t, lru, pos)->stale = 1;
}

void gw_dyncert_on_publish(gw_dyncert_t *d, const char *message)
{
    size_t dropped = 0;
    entry_t *e;

    pthread_mutex_lock(&d->mutex);
    if (message == NULL) {
        mark_all_stale_locked(d);
    } else if (strncmp(message, "domain:", 7) == 0) {
        if ((e = find(d, message + 7)) != NULL) {
            entry_free(d, e);
            dropped = 1;
        }
    } else if (strncmp(message, "cert:", 5) == 0) {
        dropped = drop_cert_locked(d, message + 5, strlen(message + 5));
    }
    pthread_mutex_unlock(&d->mutex);
    if (dropped != 0)
        atomic_fetch_add_explicit(&d->counters.invalidations, dropped, memory_order_relaxed);
}

size_t gw_dyncert_count(gw_dyncert_t *d)
{
    size_t n;

    pthread_mutex_lock(&d->mutex);
    n = d->num_positive;
    pthread_mutex_unlock(&d->mutex);
    return n;
}

void gw_dyncert_expiry(gw_dyncert_t *d, uint64_t out[GW_DYNCERT_EXPIRY_BUCKETS + 1])
{
    static const int64_t bounds[GW_DYNCERT_EXPIRY_BUCKETS] = GW_DYNCERT_EXPIRY_BOUNDS;
    int64_t now = (int64_t)time(NULL);
    h2o_linklist_t *pos;
    size_t i;

    memset(out, 0, sizeof(out[0]) * (GW_DYNCERT_EXPIRY_BUCKETS + 1));
    pthread_mutex_lock(&d->mutex);
    for (pos = d->positive.next; pos != &d->positive; pos = pos->next) {
        int64_t left = H2O_STRUCT_FROM_MEMBER(entry_t, lru, pos)->not_after - now;
        for (i = 0; i != GW_DYNCERT_EXPIRY_BUCKETS && left >= bounds[i] * 86400; ++i)
            ;
        ++out[i];
    }
    pthread_mutex_unlock(&d->mutex);
}

/* FNV-1a of host and reason: the refusal log's memory of what it said. */
static uint64_t log_hash(const char *host, gw_dyncert_reason_t reason)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)reason;

    for (; *host != '\0'; ++host)
        h = (h ^ (unsigned char)*host) * 1099511628211ull;
    return h | 1; /* 0 marks an empty slot */
}

void gw_dyncert_log_refusal(gw_dyncert_t *d, const char *host, gw_dyncert_reason_t reason)
{
    uint64_t h = log_hash(host, reason);
    time_t now = time(NULL);
    int say = 0;

    pthread_mutex_lock(&d->log_mutex);
    if (now != d->log_second) {
        d->log_second = now;
        d->log_lines = 0;
    }
    if (d->logged[h % LOG_TABLE_SIZE] != h && d->log_lines < LOG_LINES_PER_SECOND) {
        d->logged[h % LOG_TABLE_SIZE] = h;
        ++d->log_lines;
        say = 1;
    }
    pthread_mutex_unlock(&d->log_mutex);
    if (say)
        fprintf(stderr, "lizard-gateway: tls: no certificate for %s (%s): unrecognized_name\n", host,
                gw_dyncert_reason_name(reason));
    else
        atomic_fetch_add_explicit(&d->counters.logs_suppressed, 1, memory_order_relaxed);
}
