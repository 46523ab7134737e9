/*
 * The shared timeouts (common/loop_timeout.h): a list of (loop, duration)
 * with a reference count. Only modules' set-up and tear-down touch it, never
 * a request; the mutex makes it safe whichever thread builds or frees them
 * (a loop itself is only ever run by one thread).
 */
#include <pthread.h>
#include <stdlib.h>
#include "common/loop_timeout.h"
#include "common/engine.h"

typedef struct st_shared_timeout_t {
    gw_timeout_t *timeout; /* &own, or an adopted one */
    gw_timeout_t own;
    h2o_loop_t *loop;
    size_t refs; /* an adopted one keeps one: never disposed here */
    struct st_shared_timeout_t *next;
} shared_timeout_t;

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static shared_timeout_t *shared; /* every loop's, few: one per duration in use */

static shared_timeout_t *find(h2o_loop_t *loop, uint64_t ms)
{
    shared_timeout_t *t;

    for (t = shared; t != NULL; t = t->next)
        if (t->loop == loop && gw_timeout_ms(t->timeout) == ms)
            return t;
    return NULL;
}

static shared_timeout_t *add(h2o_loop_t *loop, gw_timeout_t *adopted, uint64_t ms)
{
    shared_timeout_t *t = h2o_mem_alloc(sizeof(*t));

    t->loop = loop;
    if (adopted != NULL) {
        t->timeout = adopted;
        t->refs = 1;
    } else {
        t->timeout = &t->own;
        gw_timeout_init(loop, &t->own, ms);
        t->refs = 0;
    }
    t->next = shared;
    shared = t;
    return t;
}

void gw_loop_timeout_adopt(h2o_loop_t *loop, gw_timeout_t *timeout)
{
    pthread_mutex_lock(&mutex);
    if (find(loop, gw_timeout_ms(timeout)) == NULL)
        add(loop, timeout, gw_timeout_ms(timeout));
    pthread_mutex_unlock(&mutex);
}

gw_timeout_t *gw_loop_timeout_acquire(h2o_loop_t *loop, uint64_t ms)
{
    shared_timeout_t *t;

    pthread_mutex_lock(&mutex);
    if ((t = find(loop, ms)) == NULL)
        t = add(loop, NULL, ms);
    ++t->refs;
    pthread_mutex_unlock(&mutex);
    return t->timeout;
}

void gw_loop_timeout_release(h2o_loop_t *loop, gw_timeout_t *timeout)
{
    shared_timeout_t **p, *t;

    if (timeout == NULL)
        return;
    pthread_mutex_lock(&mutex);
    for (p = &shared; (t = *p) != NULL; p = &t->next)
        if (t->timeout == timeout)
            break;
    if (t != NULL && --t->refs == 0) {
        *p = t->next;
        gw_timeout_dispose(loop, &t->own);
        free(t);
    }
    pthread_mutex_unlock(&mutex);
}

void gw_loop_timeout_adopt_context(h2o_context_t *ctx)
{
    gw_loop_timeout_adopt(ctx->loop, &ctx->zero_timeout);
    gw_loop_timeout_adopt(ctx->loop, &ctx->one_sec_timeout);
}
