/*
 * Per-worker fetches of custom-domain certificates and the client-hello
 * callback's part for custom names (tls/cert_fetch.h). A connection waiting
 * before its handshake is a gw_cert_wait_t on its host's flight; its peek
 * (gateway/sni_peek.c) frees it, which takes it off the flight.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include "common/hashtab.h"
#include "tls/cert_fetch.h"
#include "tls/tls_internal.h"

/* One round trip: the domain, then the certificate record it names (same server: hash tags differ, so this
 * needs a single Redis, as the gateway's Sentinel or standalone setup is, not Redis Cluster). */
static const char FETCH_SCRIPT[] =
    "if redis.call('EXISTS', KEYS[1]) == 0 then return {'none'} end\n"
    "local d = redis.call('HMGET', KEYS[1], 'state', 'cert')\n"
    "if d[1] ~= 'active' then return {'state'} end\n"
    "if not d[2] or d[2] == '' then return {'nocert'} end\n"
    "local c = redis.call('HMGET', ARGV[1] .. 'cert:{' .. d[2] .. '}', 'chain', 'key', 'not_after')\n"
    "return {'ok', d[2], c[1], c[2], c[3]}\n";

typedef struct st_flight_t {
    gw_hashtab_node_t node; /* in fetch->flights, by host */
    gw_cert_fetch_t *fetch;
    h2o_linklist_t waiters;
    uint64_t generation; /* fetch->generation when sent: a publish since makes the answer unfit for the cache */
    char host[];
} flight_t;

/* A connection's wait for its certificate, made before its handshake (gw_cert_fetch_wait). */
struct st_gw_cert_wait_t {
    h2o_linklist_t link; /* in a flight's waiters while one is in flight for it, or on the list being answered */
    gw_cert_wait_cb cb;
    void *data;
    uint64_t started_us;
    int answered;
    SSL_CTX *ctx; /* the answer (a reference of ours); while waiting, a stale cached one to fall back on */
    gw_dyncert_reason_t reason;
    char host[GW_DYNCERT_MAX_NAME + 1];
};

struct st_gw_cert_fetch_t {
    h2o_loop_t *loop;
    gw_redis_t *redis;
    gw_dyncert_t *d;
    gw_addr_budget_t *budget; /* NULL: none */
    gw_hashtab_t flights;
    uint64_t generation; /* publishes seen */
};

static __thread gw_cert_wait_t *thread_handover; /* the wait of the handshake h2o is starting on this thread, or NULL */

#define COUNT(d, field) atomic_fetch_add_explicit(&gw_dyncert_counters(d)->field, 1, memory_order_relaxed)

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

gw_cert_fetch_t *gw_cert_fetch_new(h2o_loop_t *loop, gw_redis_t *redis, gw_dyncert_t *d, gw_addr_budget_t *budget)
{
    gw_cert_fetch_t *f = h2o_mem_alloc(sizeof(*f));

    *f = (gw_cert_fetch_t){.loop = loop, .redis = redis, .d = d, .budget = budget};
    gw_hashtab_init(&f->flights);
    return f;
}

void gw_cert_fetch_on_publish(gw_cert_fetch_t *f, const char *message, size_t len)
{
    char buf[GW_DYNCERT_MAX_NAME + 16];

    ++f->generation;
    if (message == NULL) {
        gw_dyncert_on_publish(f->d, NULL);
        return;
    }
    if (len >= sizeof(buf))
        return; /* no host or certificate name of ours is that long */
    memcpy(buf, message, len);
    buf[len] = '\0';
    if (strncmp(buf, "domain:", 7) == 0)
        h2o_strtolower(buf + 7, len - 7);
    gw_dyncert_on_publish(f->d, buf);
}

/* --- building the SSL_CTX of a record -------------------------------------------------------------------- */

static int is_str(const redisReply *r)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

/* The chain (leaf first) and the key into a fresh context; GW_DYNCERT_OK or why not. */
static gw_dyncert_reason_t load_pem(SSL_CTX *ctx, const char *chain, size_t chain_len, const char *key, size_t key_len)
{
    BIO *bio = BIO_new_mem_buf(chain, (int)chain_len);
    X509 *x = NULL;
    EVP_PKEY *pkey = NULL;
    gw_dyncert_reason_t r = GW_DYNCERT_BAD_CERT;
    int first = 1;

    if (bio == NULL)
        return r;
    while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        int ok = first ? SSL_CTX_use_certificate(ctx, x) == 1 : SSL_CTX_add0_chain_cert(ctx, x) == 1;
        if (first || !ok)
            X509_free(x); /* use_certificate took its own reference; add0 took ours on success */
        if (!ok)
            goto Exit;
        first = 0;
    }
    if (first)
        goto Exit;
    BIO_free(bio);
    if ((bio = BIO_new_mem_buf(key, (int)key_len)) == NULL || (pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)) == NULL)
        goto Exit;
    if (SSL_CTX_use_PrivateKey(ctx, pkey) == 1 && SSL_CTX_check_private_key(ctx) == 1 &&
        gw_tls_set_cert_session_id_context(ctx) == 0 && gw_tls_attach_picotls(ctx) == 0)
        r = GW_DYNCERT_OK;

Exit:
    EVP_PKEY_free(pkey);
    BIO_free(bio);
    ERR_clear_error();
    return r;
}

static int parse_not_after(const redisReply *r, int64_t *out)
{
    char buf[32], *end;
    long long v;

    if (!is_str(r) || r->len == 0 || r->len >= sizeof(buf))
        return -1;
    memcpy(buf, r->str, r->len);
    buf[r->len] = '\0';
    errno = 0;
    v = strtoll(buf, &end, 10);
    if (errno != 0 || *end != '\0' || v <= 0)
        return -1;
    *out = v;
    return 0;
}

/* e: {"ok", name, chain, sealed key, not_after}. */
static gw_dyncert_reason_t build(gw_dyncert_t *d, const char *host, redisReply **e, SSL_CTX **out, int64_t *not_after)
{
    char *key = NULL;
    size_t key_len = 0;
    gw_dyncert_reason_t r;
    SSL_CTX *ctx;

    if (!is_str(e[1]) || !is_str(e[2]) || !is_str(e[3]) || parse_not_after(e[4], not_after) != 0)
        return GW_DYNCERT_NO_CERT;
    if ((int64_t)time(NULL) >= *not_after)
        return GW_DYNCERT_EXPIRED;
    if (gw_seal_open(gw_dyncert_conf(d)->key, e[1]->str, e[1]->len, e[3]->str, e[3]->len, &key, &key_len) != 0)
        return GW_DYNCERT_BAD_SEAL;
    if ((ctx = gw_tls_new_cert_ctx(gw_dyncert_tls(d))) == NULL) {
        r = GW_DYNCERT_BAD_CERT;
    } else if ((r = load_pem(ctx, e[2]->str, e[2]->len, key, key_len)) == GW_DYNCERT_OK &&
               !gw_tls_cert_serves(SSL_CTX_get0_certificate(ctx), h2o_iovec_init(host, strlen(host)), 1)) {
        r = GW_DYNCERT_NAME_MISMATCH;
    }
    OPENSSL_cleanse(key, key_len);
    free(key);
    if (r == GW_DYNCERT_OK)
        *out = ctx;
    else
        SSL_CTX_free(ctx);
    return r;
}

static gw_dyncert_reason_t parse_reply(gw_dyncert_t *d, const char *host, redisReply *reply, SSL_CTX **ctx, int64_t *not_after)
{
    redisReply **e = reply->element;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0 || !is_str(e[0]))
        return GW_DYNCERT_UNAVAILABLE;
    if (strcmp(e[0]->str, "none") == 0)
        return GW_DYNCERT_NO_DOMAIN;
    if (strcmp(e[0]->str, "state") == 0)
        return GW_DYNCERT_NOT_ACTIVE;
    if (strcmp(e[0]->str, "ok") != 0 || reply->elements != 5)
        return GW_DYNCERT_NO_CERT;
    return build(d, host, e, ctx, not_after);
}

/* --- flights ------------------------------------------------------------------------------------------------- */

static void record_pause(gw_dyncert_t *d, uint64_t us)
{
    static const uint64_t bounds[GW_DYNCERT_PAUSE_BUCKETS] = GW_DYNCERT_PAUSE_BOUNDS;
    gw_dyncert_counters_t *c = gw_dyncert_counters(d);
    size_t i;

    for (i = 0; i != GW_DYNCERT_PAUSE_BUCKETS && us > bounds[i] * 1000; ++i)
        ;
    atomic_fetch_add_explicit(&c->pause_buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->pause_us_sum, us, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->paused, 1, memory_order_relaxed);
}

/* Answers every wait of fl with (ctx, reason) and calls its callback, which may free it or other waits: each
 * wait is taken off the list before its callback, and a freed one unlinks itself. */
static void answer(gw_dyncert_t *d, flight_t *fl, SSL_CTX *ctx, gw_dyncert_reason_t reason)
{
    h2o_linklist_t list;

    h2o_linklist_init_anchor(&list);
    h2o_linklist_insert_list(&list, &fl->waiters);
    while (!h2o_linklist_is_empty(&list)) {
        gw_cert_wait_t *w = H2O_STRUCT_FROM_MEMBER(gw_cert_wait_t, link, list.next);
        h2o_linklist_unlink(&w->link);
        w->answered = 1;
        if (ctx != NULL) {
            SSL_CTX_free(w->ctx);
            SSL_CTX_up_ref(ctx);
            w->ctx = ctx;
        } else if (w->ctx != NULL && !GW_DYNCERT_DEFINITIVE(reason)) {
            COUNT(d, stale_served); /* Redis could not confirm it: the cached certificate serves */
        } else {
            SSL_CTX_free(w->ctx);
            w->ctx = NULL;
            w->reason = reason;
        }
        record_pause(d, mono_us() - w->started_us);
        w->cb(w->data); /* w may be gone from here */
    }
}

static void on_reply(void *data, const char *err, redisReply *reply)
{
    flight_t *fl = data;
    gw_cert_fetch_t *f = fl->fetch;
    gw_dyncert_reason_t reason;
    SSL_CTX *ctx = NULL;
    int64_t not_after = 0;

    if (err != NULL)
        reason = strcmp(err, "timeout") == 0 ? GW_DYNCERT_TIMEOUT : GW_DYNCERT_UNAVAILABLE;
    else
        reason = parse_reply(f->d, fl->host, reply, &ctx, &not_after);
    gw_hashtab_remove(&f->flights, &fl->node);
    if (fl->generation == f->generation) {
        if (ctx != NULL)
            gw_dyncert_store(f->d, fl->host, reply->element[1]->str, ctx, not_after);
        else
            gw_dyncert_store_negative(f->d, fl->host, reason);
    }
    if (reason != GW_DYNCERT_OK) {
        COUNT(f->d, fetch_errors[reason]);
        gw_dyncert_log_refusal(f->d, fl->host, reason);
    }
    answer(f->d, fl, ctx, reason);
    SSL_CTX_free(ctx);
    free(fl);
}

/* 1 when the client of `sock` may make this worker read Redis once more (a token of its budget, and of everyone's) */
static int admitted(gw_cert_fetch_t *f, h2o_socket_t *sock)
{
    struct sockaddr_storage ss;
    socklen_t len;

    if (f->budget == NULL)
        return 1;
    len = h2o_socket_getpeername(sock, (void *)&ss);
    return gw_addr_budget_take(f->budget, len != 0 ? (void *)&ss : NULL, len) == GW_ADDR_BUDGET_OK;
}

/* The flight of `host` on this worker, sent now if there was none; NULL when Redis is known to be down, or (*refused
 * set) when the client of `sock` is over its budget. Confirming a certificate the cache holds (`known`) costs no
 * token: that is bounded by the certificates cached, not by the names clients make up. */
static flight_t *join_or_send(gw_cert_fetch_t *f, const char *host, h2o_socket_t *sock, int known, int *refused)
{
    const gw_dyncert_conf_t *conf = gw_dyncert_conf(f->d);
    gw_hashtab_node_t *n = gw_hashtab_find(&f->flights, host, strlen(host));
    char key[GW_DYNCERT_MAX_NAME + 128];
    flight_t *fl;
    size_t len = strlen(host);

    if (n != NULL) {
        COUNT(f->d, coalesced);
        return H2O_STRUCT_FROM_MEMBER(flight_t, node, n);
    }
    if (!known && !admitted(f, sock)) {
        *refused = 1;
        return NULL;
    }
    snprintf(key, sizeof(key), "%sdomain:{%s}", conf->prefix, host);
    fl = h2o_mem_alloc(offsetof(flight_t, host) + len + 1);
    memset(fl, 0, offsetof(flight_t, host));
    memcpy(fl->host, host, len + 1);
    fl->fetch = f;
    fl->generation = f->generation;
    h2o_linklist_init_anchor(&fl->waiters);
    const char *argv[] = {"EVAL", FETCH_SCRIPT, "1", key, conf->prefix};
    size_t argvlen[] = {4, sizeof(FETCH_SCRIPT) - 1, 1, strlen(key), strlen(conf->prefix)};
    if (gw_redis_command_argv(f->redis, conf->fetch_timeout_ms, on_reply, fl, 5, argv, argvlen) == NULL) {
        free(fl);
        return NULL;
    }
    COUNT(f->d, fetches);
    gw_hashtab_insert(&f->flights, &fl->node, fl->host, len);
    return fl;
}

/* --- the client-hello callback ------------------------------------------------------------------------------- */

/* The SNI as a lowercase host name into buf (GW_DYNCERT_MAX_NAME + 1): letters, digits, '-', dots between
 * labels. Returns 0, or -1 for anything else (never looked up, never logged as is). */
static int normalize(h2o_iovec_t name, char *buf)
{
    size_t i;

    if (name.len == 0 || name.len > GW_DYNCERT_MAX_NAME || name.base[0] == '.' || name.base[name.len - 1] == '.')
        return -1;
    for (i = 0; i != name.len; ++i) {
        char c = h2o_tolower(name.base[i]);
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (c == '.' && buf[i - 1] != '.')))
            return -1;
        buf[i] = c;
    }
    buf[name.len] = '\0';
    return 0;
}

static SSL_CTX *finish(gw_dyncert_t *d, SSL_CTX *ctx, gw_dyncert_reason_t reason)
{
    if (ctx == NULL)
        COUNT(d, refused[reason]);
    return ctx;
}

/* The answer of a wait made now, when no fetch is to be waited for: a stale entry, or why not. */
static void answer_now(gw_dyncert_t *d, gw_cert_wait_t *w, SSL_CTX *stale, int refused)
{
    gw_dyncert_reason_t reason = refused ? GW_DYNCERT_RATE_LIMITED : GW_DYNCERT_UNAVAILABLE;

    w->answered = 1;
    if (stale != NULL) {
        COUNT(d, stale_served);
        w->ctx = stale;
        return;
    }
    COUNT(d, fetch_errors[reason]);
    if (!refused) /* a flood of random names is counted, not logged */
        gw_dyncert_log_refusal(d, w->host, reason);
    w->reason = reason;
}

gw_cert_wait_t *gw_cert_fetch_wait(gw_cert_fetch_t *f, h2o_iovec_t name, h2o_socket_t *sock, gw_cert_wait_cb cb, void *data)
{
    gw_dyncert_found_t found = {.ctx = NULL};
    gw_cert_wait_t *w;
    flight_t *fl;
    int refused = 0;

    if (!gw_tls_is_custom_name(gw_dyncert_tls(f->d), name))
        return NULL;
    w = h2o_mem_alloc(sizeof(*w));
    *w = (gw_cert_wait_t){.cb = cb, .data = data, .started_us = mono_us()};
    if (normalize(name, w->host) != 0) {
        free(w);
        return NULL; /* the client-hello callback refuses it (bad_name) */
    }
    if (gw_dyncert_lookup(f->d, w->host, &found) && (found.ctx == NULL || !found.stale)) {
        if (found.ctx != NULL)
            COUNT(f->d, hits);
        else
            COUNT(f->d, negative_hits);
        w->answered = 1;
        w->ctx = found.ctx;
        w->reason = found.reason;
        return w;
    }
    if ((fl = join_or_send(f, w->host, sock, found.ctx != NULL, &refused)) == NULL) {
        answer_now(f->d, w, found.ctx, refused);
        return w;
    }
    w->ctx = found.ctx;
    h2o_linklist_insert(&fl->waiters, &w->link);
    COUNT(f->d, misses);
    return w;
}

int gw_cert_wait_answered(const gw_cert_wait_t *w)
{
    return w->answered;
}

void gw_cert_wait_handover(gw_cert_wait_t *w)
{
    thread_handover = w;
}

void gw_cert_wait_free(gw_cert_wait_t *w)
{
    if (w == NULL)
        return;
    if (thread_handover == w)
        thread_handover = NULL;
    if (h2o_linklist_is_linked(&w->link))
        h2o_linklist_unlink(&w->link);
    SSL_CTX_free(w->ctx);
    free(w);
}

SSL_CTX *gw_cert_fetch_choose(gw_dyncert_t *d, h2o_iovec_t name)
{
    char host[GW_DYNCERT_MAX_NAME + 1];
    gw_dyncert_found_t found;
    gw_cert_wait_t *w = thread_handover;

    if (normalize(name, host) != 0) {
        COUNT(d, fetch_errors[GW_DYNCERT_BAD_NAME]);
        return finish(d, NULL, GW_DYNCERT_BAD_NAME);
    }
    if (w != NULL && w->answered && strcmp(w->host, host) == 0) {
        /* the answer its SNI peek waited for (gateway/sni_peek.c), used once */
        SSL_CTX *ctx = w->ctx;
        w->ctx = NULL;
        thread_handover = NULL;
        return finish(d, ctx, w->reason);
    }
    /* no peek waited for this handshake: the cache alone answers, a stale entry as well as it can */
    if (gw_dyncert_lookup(d, host, &found)) {
        if (found.ctx == NULL) {
            COUNT(d, negative_hits);
            return finish(d, NULL, found.reason);
        }
        if (found.stale)
            COUNT(d, stale_served);
        else
            COUNT(d, hits);
        return finish(d, found.ctx, GW_DYNCERT_OK);
    }
    COUNT(d, fetch_errors[GW_DYNCERT_UNAVAILABLE]);
    return finish(d, NULL, GW_DYNCERT_UNAVAILABLE);
}
