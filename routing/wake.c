/*
 * The held-request registry: one bucket per sandbox with requests held here,
 * holding its waiters (each with its own deadline), at most one fresh read
 * in flight (a publish during that read asks for one more after it, so the
 * last publish is always followed by a read), the fallback re-read timer, and
 * the resume request this worker sent for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/engine.h"
#include "common/counter.h"
#include "common/loop_timeout.h"
#include "routing/sandbox_watch.h"
#include "routing/wake.h"

typedef struct st_bucket_t {
    gw_sandbox_watch_entry_t entry; /* in owner->watch: the id, the fresh read in flight and `read_again` */
    gw_wake_t *owner;
    h2o_linklist_t waiters; /* gw_wake_waiter_t.link, oldest first */
    size_t count;
    gw_redis_req_t *set_req;  /* the resume request (lock + XADD, one script) in flight, or NULL */
    gw_timer_t recheck;       /* the fallback re-read */
    uint64_t held_since;      /* when the first of the current waiters came: the wake time starts there */
    uint64_t resume_asked_at; /* when this worker last asked (0: never, or the ask failed) */
    unsigned busy : 1;        /* answering its waiters: not freed by cancel */
} bucket_t;

struct st_gw_wake_waiter_t {
    bucket_t *bucket;
    h2o_linklist_t link;
    gw_timer_t deadline;
    gw_wake_cb cb;
    void *data;
    size_t bytes; /* of its body, counted in owner->held_bytes */
};

struct st_gw_wake_t {
    h2o_loop_t *loop;
    gw_redis_t *redis;
    gw_wake_conf_t conf;      /* prefix and instance_id point to copies */
    gw_sandbox_watch_t watch; /* of bucket_t, FRESH reads */
    size_t num_held;
    uint64_t held_bytes;            /* body bytes of the held requests, <= conf.max_bytes */
    gw_timeout_t *deadline_timeout; /* conf.timeout_ms, the loop's (common/loop_timeout.h) */
    gw_timeout_t *recheck_timeout;  /* conf.recheck_ms, the loop's */
};

#define COUNT(w, name, n)                                                                                                          \
    do {                                                                                                                           \
        if ((w)->conf.counters != NULL)                                                                                            \
            GW_COUNTER_ADD(&(w)->conf.counters->name, (n));                                                                        \
    } while (0)

#define BUCKET_ID(b) gw_sandbox_watch_id(&(b)->entry)

int gw_wake_applies(const gw_sandbox_t *record)
{
    return record->state == GW_SANDBOX_STARTING || (record->state == GW_SANDBOX_PAUSED && record->resume_auto);
}

/* buckets */

static bucket_t *bucket_find(gw_wake_t *w, const char *id)
{
    gw_sandbox_watch_entry_t *e = gw_sandbox_watch_find(&w->watch, id);
    return e != NULL ? H2O_STRUCT_FROM_MEMBER(bucket_t, entry, e) : NULL;
}

static void on_recheck(gw_timer_t *entry)
{
    bucket_t *b = H2O_STRUCT_FROM_MEMBER(bucket_t, recheck, entry);

    gw_timer_link(b->owner->loop, b->owner->recheck_timeout, &b->recheck);
    gw_sandbox_watch_read(&b->entry);
}

static bucket_t *bucket_get(gw_wake_t *w, const char *id)
{
    bucket_t *b;

    if ((b = bucket_find(w, id)) != NULL)
        return b;
    b = h2o_mem_alloc(sizeof(*b));
    *b = (bucket_t){.owner = w, .held_since = h2o_now(w->loop), .recheck = {.cb = on_recheck}};
    h2o_linklist_init_anchor(&b->waiters);
    gw_sandbox_watch_add(&w->watch, &b->entry, id);
    gw_timer_link(w->loop, w->recheck_timeout, &b->recheck);
    return b;
}

static void bucket_free(bucket_t *b)
{
    gw_sandbox_watch_remove(&b->entry);
    if (b->set_req != NULL)
        gw_redis_req_cancel(b->set_req);
    gw_timer_unlink(&b->recheck);
    free(b);
}

/* A bucket without waiters stays while its SET is in flight: the request
 * refused over max_bytes asked for the resume through it. */
static void bucket_free_if_idle(bucket_t *b)
{
    if (b->count == 0 && !b->busy && b->set_req == NULL)
        bucket_free(b);
}

/* waiters */

static void waiter_unlink(gw_wake_waiter_t *h)
{
    gw_wake_t *w = h->bucket->owner;

    h2o_linklist_unlink(&h->link);
    gw_timer_unlink(&h->deadline);
    --h->bucket->count;
    --w->num_held;
    w->held_bytes -= h->bytes;
    if (w->conf.slots.release != NULL)
        w->conf.slots.release(w->conf.slots.data, BUCKET_ID(h->bucket));
    COUNT(w, held, -1);
    COUNT(w, held_bytes, -(int64_t)h->bytes);
}

static void answer(gw_wake_waiter_t *h, gw_wake_result_t result, gw_sandbox_t *record)
{
    gw_wake_cb cb = h->cb;
    void *data = h->data;

    waiter_unlink(h);
    free(h);
    cb(data, result, record);
}

/* Answers every waiter of b, oldest first; a callback may cancel others. */
static void answer_all(bucket_t *b, gw_wake_result_t result, gw_sandbox_t *record)
{
    b->busy = 1;
    while (!h2o_linklist_is_empty(&b->waiters))
        answer(H2O_STRUCT_FROM_MEMBER(gw_wake_waiter_t, link, b->waiters.next), result, record);
    b->busy = 0;
    bucket_free_if_idle(b);
}

static void on_deadline(gw_timer_t *entry)
{
    gw_wake_waiter_t *h = H2O_STRUCT_FROM_MEMBER(gw_wake_waiter_t, deadline, entry);
    bucket_t *b = h->bucket;

    COUNT(b->owner, timeouts, 1);
    b->busy = 1;
    answer(h, GW_WAKE_TIMEOUT, NULL);
    b->busy = 0;
    bucket_free_if_idle(b);
}

/* the resume request */

static uint64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* <prefix><middle><id><suffix>, malloc'd at its length (the caller frees it
 * once the command is sent: hiredis formats it before returning). */
static h2o_iovec_t make_key(const char *prefix, const char *middle, const char *id, const char *suffix)
{
    return h2o_concat(NULL, h2o_iovec_init(prefix, strlen(prefix)), h2o_iovec_init(middle, strlen(middle)),
                      h2o_iovec_init(id, strlen(id)), h2o_iovec_init(suffix, strlen(suffix)));
}

/* The lock and the request in one step: a Lua script runs whole or not at
 * all, so a failed XADD (an error reply, say the stream key of another
 * type) leaves no lock behind, and a gateway dying in between cannot exist.
 * The lock is checked first and set last: an XADD that fails takes the SET
 * with it. "#!lua" makes it a script that writes (refused as a whole when
 * Redis is out of memory). */
static const char resume_script[] = "#!lua\n"
                                    "if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end\n"
                                    "redis.call('XADD', KEYS[2], '*', 'sandbox', ARGV[1], 'gateway', ARGV[2], 'at_ms', ARGV[3])\n"
                                    "redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])\n"
                                    "return 1\n";

static void on_resume_reply(bucket_t *b, const char *err, redisReply *reply)
{
    if (err != NULL || reply->type != REDIS_REPLY_INTEGER) {
        /* nothing was written (or, after a timeout, both were): asked again at the next re-read,
         * where the lock, if it is there, says the request is too */
        fprintf(stderr, "wake: resume request for %s: %s\n", BUCKET_ID(b), err != NULL ? err : "unexpected reply");
        COUNT(b->owner, resume_failures, 1);
        b->resume_asked_at = 0;
        return;
    }
    if (reply->integer == 0) {
        /* another gateway (or this one, a while ago) asked less than GW_WAKE_LOCK_MS ago */
        COUNT(b->owner, resume_deduped, 1);
        return;
    }
    COUNT(b->owner, resume_requests, 1);
}

static void on_resume(void *data, const char *err, redisReply *reply)
{
    bucket_t *b = data;

    b->set_req = NULL;
    on_resume_reply(b, err, reply);
    bucket_free_if_idle(b); /* it may have been kept for this answer only */
}

/* Asks for a resume unless this worker did so less than GW_WAKE_LOCK_MS ago
 * (or a request is in flight): the lock then says whether the fleet did. */
static void ask_resume(bucket_t *b)
{
    gw_wake_t *w = b->owner;
    uint64_t now = h2o_now(w->loop);
    char px[24], at[24];
    h2o_iovec_t lock, stream;
    int px_len, at_len;

    if (b->set_req != NULL || (b->resume_asked_at != 0 && now - b->resume_asked_at < GW_WAKE_LOCK_MS))
        return;
    lock = make_key(w->conf.prefix, "resume:{", BUCKET_ID(b), "}");
    stream = make_key(w->conf.prefix, "resume", "", "");
    px_len = snprintf(px, sizeof(px), "%d", GW_WAKE_LOCK_MS);
    at_len = snprintf(at, sizeof(at), "%llu", (unsigned long long)unix_ms());
    const char *argv[] = {"EVAL", resume_script, "2", lock.base, stream.base, BUCKET_ID(b), w->conf.instance_id, at, px};
    size_t argvlen[] = {4,
                        sizeof(resume_script) - 1,
                        1,
                        lock.len,
                        stream.len,
                        strlen(BUCKET_ID(b)),
                        strlen(w->conf.instance_id),
                        (size_t)at_len,
                        (size_t)px_len};
    b->set_req = gw_redis_command_argv(w->redis, w->conf.command_timeout_ms, on_resume, b, 9, argv, argvlen);
    free(lock.base);
    free(stream.base);
    if (b->set_req == NULL) {
        COUNT(w, resume_failures, 1);
        return; /* Redis is down: asked again at the next re-read */
    }
    b->resume_asked_at = now != 0 ? now : 1;
}

/* the fresh reads */

static void observe_wake(bucket_t *b)
{
    static const uint64_t bounds[GW_WAKE_HISTOGRAM_BUCKETS] = GW_WAKE_HISTOGRAM_BOUNDS;
    gw_wake_t *w = b->owner;
    uint64_t ms = h2o_now(w->loop) - b->held_since;
    size_t i;

    for (i = 0; i != GW_WAKE_HISTOGRAM_BUCKETS && ms > bounds[i]; ++i)
        ;
    COUNT(w, wake_ms_buckets[i], 1);
    COUNT(w, wake_ms_sum, ms);
    COUNT(w, wake_count, 1);
}

/* gw_sandbox_watch_cb: 0 once the waiters are answered (b may be gone) */
static int on_read(gw_sandbox_watch_entry_t *entry, gw_route_status_t status, gw_sandbox_t *record)
{
    bucket_t *b = H2O_STRUCT_FROM_MEMBER(bucket_t, entry, entry);

    switch (status) {
    case GW_ROUTE_FOUND:
        if (!gw_wake_applies(record)) {
            if (record->state == GW_SANDBOX_RUNNING)
                observe_wake(b);
            answer_all(b, GW_WAKE_SETTLED, record);
            return 0;
        }
        if (record->state == GW_SANDBOX_PAUSED)
            ask_resume(b); /* still paused after GW_WAKE_LOCK_MS: the control plane may have lost the request */
        break;
    case GW_ROUTE_NOT_FOUND:
        answer_all(b, GW_WAKE_NOT_FOUND, NULL);
        return 0;
    default:
        break; /* Redis cannot answer now: the next re-read (or the deadline) will */
    }
    return 1; /* a publish during the read gets a read of its own */
}

/* public API */

gw_wake_t *gw_wake_new(h2o_loop_t *loop, gw_redis_t *redis, gw_route_store_t *routes, const gw_wake_conf_t *conf)
{
    gw_wake_t *w = h2o_mem_alloc(sizeof(*w));

    *w = (gw_wake_t){.loop = loop, .redis = redis, .conf = *conf};
    w->conf.prefix = h2o_strdup(NULL, conf->prefix != NULL ? conf->prefix : "", SIZE_MAX).base;
    w->conf.instance_id = h2o_strdup(NULL, conf->instance_id != NULL ? conf->instance_id : "", SIZE_MAX).base;
    if (w->conf.recheck_ms == 0)
        w->conf.recheck_ms = GW_WAKE_RECHECK_MS;
    gw_sandbox_watch_init(&w->watch, routes, GW_SANDBOX_WATCH_FRESH, on_read);
    w->deadline_timeout = gw_loop_timeout_acquire(loop, w->conf.timeout_ms);
    w->recheck_timeout = gw_loop_timeout_acquire(loop, w->conf.recheck_ms);
    return w;
}

void gw_wake_free(gw_wake_t *w)
{
    gw_sandbox_watch_entry_t *e;

    if (w == NULL)
        return;
    while ((e = gw_sandbox_watch_next(&w->watch, NULL)) != NULL) {
        bucket_t *b = H2O_STRUCT_FROM_MEMBER(bucket_t, entry, e);
        while (!h2o_linklist_is_empty(&b->waiters)) {
            gw_wake_waiter_t *h = H2O_STRUCT_FROM_MEMBER(gw_wake_waiter_t, link, b->waiters.next);
            waiter_unlink(h);
            free(h);
        }
        bucket_free(b);
    }
    gw_sandbox_watch_dispose(&w->watch);
    gw_loop_timeout_release(w->loop, w->deadline_timeout);
    gw_loop_timeout_release(w->loop, w->recheck_timeout);
    free((char *)w->conf.prefix);
    free((char *)w->conf.instance_id);
    free(w);
}

gw_wake_waiter_t *gw_wake_hold(gw_wake_t *w, const gw_sandbox_t *record, size_t body_bytes, gw_wake_cb cb, void *data,
                               gw_wake_hold_result_t *refused)
{
    bucket_t *b = bucket_find(w, record->id);
    gw_wake_waiter_t *h;

    if (w->num_held >= w->conf.max_per_worker ||
        (w->conf.slots.acquire == NULL && (b != NULL ? b->count : 0) >= w->conf.max_per_sandbox)) {
        COUNT(w, refused, 1);
        *refused = GW_WAKE_OVER_COUNT;
        return NULL;
    }
    if (body_bytes > w->conf.max_bytes - w->held_bytes) {
        /* held_bytes <= max_bytes always holds: no wrap-around */
        COUNT(w, refused_bytes, 1);
        *refused = GW_WAKE_OVER_BYTES;
        if (record->state == GW_SANDBOX_PAUSED) {
            b = bucket_get(w, record->id);
            ask_resume(b);
            bucket_free_if_idle(b);
        }
        return NULL;
    }
    if (w->conf.slots.acquire != NULL && !w->conf.slots.acquire(w->conf.slots.data, record->id)) {
        COUNT(w, refused, 1);
        *refused = GW_WAKE_OVER_COUNT;
        return NULL;
    }
    if (b == NULL)
        b = bucket_get(w, record->id);
    h = h2o_mem_alloc(sizeof(*h));
    *h = (gw_wake_waiter_t){.bucket = b, .deadline = {.cb = on_deadline}, .cb = cb, .data = data, .bytes = body_bytes};
    w->held_bytes += body_bytes;
    COUNT(w, held_bytes, (int64_t)body_bytes);
    if (b->count == 0)
        b->held_since = h2o_now(w->loop);
    h2o_linklist_insert(&b->waiters, &h->link);
    gw_timer_link(w->loop, w->deadline_timeout, &h->deadline);
    ++b->count;
    ++w->num_held;
    COUNT(w, held, 1);
    COUNT(w, held_total, 1);
    if (record->state == GW_SANDBOX_PAUSED)
        ask_resume(b);
    return h;
}

void gw_wake_cancel(gw_wake_waiter_t *h, int abandoned)
{
    bucket_t *b = h->bucket;

    if (abandoned)
        COUNT(b->owner, abandoned, 1);
    waiter_unlink(h);
    free(h);
    bucket_free_if_idle(b);
}

void gw_wake_on_publish(void *_w, const char *sandbox_id)
{
    gw_wake_t *w = _w;

    gw_sandbox_watch_on_publish(&w->watch, sandbox_id);
}

void gw_wake_expire_all(gw_wake_t *w)
{
    gw_sandbox_watch_entry_t *e;

    /* one bucket at a time, from the start again after each: callbacks may end buckets */
    while ((e = gw_sandbox_watch_next(&w->watch, NULL)) != NULL) {
        bucket_t *b = H2O_STRUCT_FROM_MEMBER(bucket_t, entry, e);
        COUNT(w, timeouts, b->count);
        answer_all(b, GW_WAKE_TIMEOUT, NULL);
    }
    /* no deadline is linked now: requests held from here on time out at the next loop turn */
    gw_loop_timeout_release(w->loop, w->deadline_timeout);
    w->deadline_timeout = gw_loop_timeout_acquire(w->loop, 0);
}

uint64_t gw_wake_held_bytes(gw_wake_t *w)
{
    return w->held_bytes;
}

size_t gw_wake_num_held(gw_wake_t *w, const char *sandbox_id)
{
    bucket_t *b;

    if (sandbox_id == NULL)
        return w->num_held;
    return (b = bucket_find(w, sandbox_id)) != NULL ? b->count : 0;
}
