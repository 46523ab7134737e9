/*
 * The per-worker epoll set of HTTP/1 client sockets whose held request waits:
 * registered level-triggered for EPOLLRDHUP only (EPOLLHUP and EPOLLERR come
 * anyway), so a client that sends more bytes wakes nobody, and one that
 * closes wakes its watcher at once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include "common/hangup.h"
#include "common/engine.h"

#define EVENTS_PER_READ 64

struct st_gw_hangup_t {
    int epfd;
    h2o_socket_t *sock; /* the epoll fd on the loop: readable when a watched socket has an event */
};

static void on_ready(h2o_socket_t *sock, const char *err)
{
    gw_hangup_t *h = sock->data;
    struct epoll_event ev;
    int i;

    if (err != NULL)
        return;
    /* One event at a time: a callback may end other watches, so no event is kept across a call. Bounded
     * per wake-up (level-triggered: the rest come at the next turn). */
    for (i = 0; i != EVENTS_PER_READ && epoll_wait(h->epfd, &ev, 1, 0) == 1; ++i) {
        gw_hangup_watch_t *w = ev.data.ptr;
        epoll_ctl(h->epfd, EPOLL_CTL_DEL, w->fd, NULL);
        w->on = 0;
        w->cb(w);
    }
}

gw_hangup_t *gw_hangup_new(h2o_loop_t *loop)
{
    gw_hangup_t *h;
    int epfd;

    if ((epfd = epoll_create1(EPOLL_CLOEXEC)) == -1) {
        fprintf(stderr, "hangup: epoll_create1: %s; held requests are not watched for clients that leave\n", strerror(errno));
        return NULL;
    }
    h = h2o_mem_alloc(sizeof(*h));
    h->epfd = epfd;
    /* DONT_READ: h2o only says the set is readable; epoll_wait reads it */
    h->sock = h2o_evloop_socket_create(loop, epfd, H2O_SOCKET_FLAG_DONT_READ);
    h->sock->data = h;
    h2o_socket_read_start(h->sock, on_ready);
    return h;
}

void gw_hangup_free(gw_hangup_t *h)
{
    if (h == NULL)
        return;
    h2o_socket_read_stop(h->sock);
    h2o_socket_close(h->sock); /* closes epfd */
    free(h);
}

int gw_hangup_watch(gw_hangup_t *h, gw_hangup_watch_t *watch, h2o_req_t *req)
{
    h2o_socket_t *sock;
    struct epoll_event ev = {.events = EPOLLRDHUP};

    watch->on = 0;
    if (h == NULL || req->version >= 0x200 || (sock = gw_conn_socket(req->conn)) == NULL)
        return 0;
    watch->fd = h2o_socket_get_fd(sock);
    ev.data.ptr = watch;
    if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, watch->fd, &ev) != 0)
        return 0;
    watch->on = 1;
    return 1;
}

void gw_hangup_unwatch(gw_hangup_t *h, gw_hangup_watch_t *watch)
{
    if (!watch->on)
        return;
    epoll_ctl(h->epfd, EPOLL_CTL_DEL, watch->fd, NULL);
    watch->on = 0;
}
