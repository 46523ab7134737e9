/*
 * A socket as a tunnel's end (tunnel_end.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <h2o.h>
#include "upstream/tunnel_end.h"

typedef struct st_socket_end_t {
    gw_tunnel_end_t super;
    gw_tunnel_end_cb read_cb, write_cb;
} socket_end_t;

static void on_sock_read(h2o_socket_t *sock, const char *err)
{
    socket_end_t *e = sock->data;
    e->read_cb(&e->super, err);
}

static void on_sock_written(h2o_socket_t *sock, const char *err)
{
    socket_end_t *e = sock->data;
    e->write_cb(&e->super, err);
}

static void sock_read_start(gw_tunnel_end_t *end, gw_tunnel_end_cb cb)
{
    ((socket_end_t *)end)->read_cb = cb;
    h2o_socket_read_start(end->sock, on_sock_read);
}

static void sock_read_stop(gw_tunnel_end_t *end)
{
    h2o_socket_read_stop(end->sock);
}

static void sock_write(gw_tunnel_end_t *end, h2o_iovec_t *bufs, size_t bufcnt, gw_tunnel_end_cb cb)
{
    ((socket_end_t *)end)->write_cb = cb;
    h2o_socket_write(end->sock, bufs, bufcnt, on_sock_written);
}

static void sock_shutdown(gw_tunnel_end_t *end)
{
    shutdown(h2o_socket_get_fd(end->sock), SHUT_WR);
}

static void sock_close(gw_tunnel_end_t *end)
{
    h2o_socket_close(end->sock);
    free(end);
}

static const gw_tunnel_end_ops_t socket_ops = {sock_read_start, sock_read_stop, sock_write, sock_shutdown, sock_close};

gw_tunnel_end_t *gw_tunnel_end_socket(h2o_socket_t *sock)
{
    socket_end_t *e = h2o_mem_alloc(sizeof(*e));

    memset(e, 0, sizeof(*e));
    e->super.ops = &socket_ops;
    e->super.input = &sock->input;
    e->super.sock = sock;
    sock->data = e;
    return &e->super;
}
