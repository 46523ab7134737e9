/*
 * Double-buffered writer thread for the access log (see log_writer.h).
 * Lines are whole when they enter the buffer and the buffer is written
 * whole, so lines never interleave, even with several processes appending
 * (O_APPEND).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <h2o/memory.h>
#include "observe/log_writer.h"

/* The writer sleeps at most this long between looks (it is woken sooner by
 * the first line into an empty buffer). */
#define PERIOD_MS 1000

struct st_gw_log_writer_t {
    int fd;
    pthread_t thread;
    pthread_mutex_t mutex; /* guards fill, fill_len, stopping */
    pthread_cond_t cond;
    char *fill; /* workers append here */
    size_t fill_len;
    char *drain; /* the writer thread's, outside the mutex */
    size_t capacity;
    int stopping;
    atomic_uint_fast64_t dropped;
    atomic_uint_fast64_t written;
};

static void write_all(int fd, const char *p, size_t len)
{
    while (len != 0) {
        ssize_t r = write(fd, p, len);
        if (r == -1 && errno == EINTR)
            continue;
        if (r <= 0)
            return; /* a full disk or a closed file must not take the gateway down */
        p += r;
        len -= (size_t)r;
    }
}

static size_t count_lines(const char *p, size_t len)
{
    size_t n = 0;
    const char *end = p + len;
    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        ++n;
        ++p;
    }
    return n;
}

static void *writer_main(void *_w)
{
    gw_log_writer_t *w = _w;
    int stopping;

    pthread_mutex_lock(&w->mutex);
    do {
        if (w->fill_len == 0 && !w->stopping) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += PERIOD_MS * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec += 1;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&w->cond, &w->mutex, &until);
        }
        /* swap: the workers fill the other half while this one is written */
        char *full = w->fill;
        size_t len = w->fill_len;
        w->fill = w->drain;
        w->fill_len = 0;
        w->drain = full;
        stopping = w->stopping;
        pthread_mutex_unlock(&w->mutex);
        if (len != 0) {
            write_all(w->fd, full, len);
            atomic_fetch_add_explicit(&w->written, count_lines(full, len), memory_order_relaxed);
        }
        pthread_mutex_lock(&w->mutex);
    } while (!(stopping && w->fill_len == 0));
    pthread_mutex_unlock(&w->mutex);
    return NULL;
}

gw_log_writer_t *gw_log_writer_new(int fd, size_t capacity)
{
    gw_log_writer_t *w = h2o_mem_alloc(sizeof(*w));

    memset(w, 0, sizeof(*w));
    w->fd = fd;
    w->capacity = capacity / 2;
    w->fill = h2o_mem_alloc(w->capacity);
    w->drain = h2o_mem_alloc(w->capacity);
    pthread_mutex_init(&w->mutex, NULL);
    pthread_cond_init(&w->cond, NULL);
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0)
        h2o_fatal("log writer: pthread_create failed");
    return w;
}

void gw_log_writer_free(gw_log_writer_t *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mutex);
    w->stopping = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->mutex);
    free(w->fill);
    free(w->drain);
    free(w);
}

int gw_log_writer_append(gw_log_writer_t *w, const char *line, size_t len)
{
    int wake;

    pthread_mutex_lock(&w->mutex);
    if (len > w->capacity - w->fill_len) {
        pthread_mutex_unlock(&w->mutex);
        atomic_fetch_add_explicit(&w->dropped, 1, memory_order_relaxed);
        return -1;
    }
    memcpy(w->fill + w->fill_len, line, len);
    w->fill_len += len;
    /* The first line into an empty buffer wakes the writer: a quiet log is on
     * disk at once. Under load the writer is still busy with the previous
     * batch when lines arrive, so they are written together. */
    wake = w->fill_len == len;
    if (wake)
        pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
    return 0;
}

uint64_t gw_log_writer_dropped(gw_log_writer_t *w)
{
    return atomic_load_explicit(&w->dropped, memory_order_relaxed);
}

uint64_t gw_log_writer_written(gw_log_writer_t *w)
{
    return atomic_load_explicit(&w->written, memory_order_relaxed);
}
