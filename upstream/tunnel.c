/*
 * WebSocket tunnel: relays bytes both ways between the client and the
 * upstream. Each direction has at most one write in flight, and its source
 * is not read during that write, so neither side can make the gateway
 * buffer more than one read's worth per direction.
 */
#include <stdlib.h>
#include <string.h>
#include "upstream/tunnel.h"

enum { SIDE_CLIENT = 0, SIDE_UPSTREAM = 1 };

typedef struct st_tunnel_side_t {
    h2o_socket_t *sock;
    /* bytes of sock->input being written to the other side; 0 when none */
    size_t writing;
    /* the peer closed; close the tunnel once `writing` is done */
    int eof;
} tunnel_side_t;

struct st_gw_tunnel_t {
    h2o_loop_t *loop;
    h2o_timeout_t *idle_timeout;
    h2o_timeout_entry_t timeout_entry;
    h2o_timeout_t *stall_timeout; /* NULL: writes to the client may take any time */
    h2o_timeout_entry_t stall_entry;
    const gw_tunnel_callbacks_t *callbacks;
    void *data;
    tunnel_side_t side[2];
};

static void on_read(h2o_socket_t *sock, const char *err);

static int side_of(gw_tunnel_t *tunnel, h2o_socket_t *sock)
{
    return tunnel->side[SIDE_CLIENT].sock == sock ? SIDE_CLIENT : SIDE_UPSTREAM;
}

static void reset_timeout(gw_tunnel_t *tunnel)
{
    if (tunnel->idle_timeout == NULL)
        return;
    if (h2o_timeout_is_linked(&tunnel->timeout_entry))
        h2o_timeout_unlink(&tunnel->timeout_entry);
    h2o_timeout_link(tunnel->loop, tunnel->idle_timeout, &tunnel->timeout_entry);
}

static void on_timeout(h2o_timeout_entry_t *entry)
{
    gw_tunnel_close(H2O_STRUCT_FROM_MEMBER(gw_tunnel_t, timeout_entry, entry));
}

static void on_stall_timeout(h2o_timeout_entry_t *entry)
{
    gw_tunnel_close(H2O_STRUCT_FROM_MEMBER(gw_tunnel_t, stall_entry, entry));
}

static void on_write_complete(h2o_socket_t *dst, const char *err)
{
    gw_tunnel_t *tunnel = dst->data;
    int to = side_of(tunnel, dst);
    tunnel_side_t *src = &tunnel->side[1 - to];

    if (err != NULL) {
        gw_tunnel_close(tunnel);
        return;
    }
    if (to == SIDE_CLIENT && h2o_timeout_is_linked(&tunnel->stall_entry))
        h2o_timeout_unlink(&tunnel->stall_entry);
    /* written to the socket: these are the bytes billed */
    if (tunnel->callbacks->on_bytes != NULL)
        tunnel->callbacks->on_bytes(tunnel->data, to == SIDE_CLIENT ? src->writing : 0, to == SIDE_UPSTREAM ? src->writing : 0);
    h2o_buffer_consume(&src->sock->input, src->writing);
    src->writing = 0;
    if (src->eof) {
        gw_tunnel_close(tunnel);
        return;
    }
    reset_timeout(tunnel);
    h2o_socket_read_start(src->sock, on_read);
}

/* src's input is not empty and nothing from src is being written */
static void relay(gw_tunnel_t *tunnel, int from)
{
    tunnel_side_t *src = &tunnel->side[from], *dst = &tunnel->side[1 - from];
    h2o_iovec_t buf = h2o_iovec_init(src->sock->input->bytes, src->sock->input->size);

    h2o_socket_read_stop(src->sock);
    src->writing = buf.len;
    reset_timeout(tunnel);
    if (from == SIDE_UPSTREAM && tunnel->stall_timeout != NULL)
        h2o_timeout_link(tunnel->loop, tunnel->stall_timeout, &tunnel->stall_entry);
    h2o_socket_write(dst->sock, &buf, 1, on_write_complete);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    gw_tunnel_t *tunnel = sock->data;
    int from = side_of(tunnel, sock);

    if (err != NULL) {
        /* deliver what this side said before closing (e.g. a close frame) */
        tunnel->side[from].eof = 1;
        h2o_socket_read_stop(sock);
        if (tunnel->side[from].writing == 0)
            gw_tunnel_close(tunnel);
        return;
    }
    if (sock->input->size != 0)
        relay(tunnel, from);
}

gw_tunnel_t *gw_tunnel_new(h2o_loop_t *loop, h2o_socket_t *upstream, h2o_timeout_t *idle_timeout,
                           const gw_tunnel_callbacks_t *callbacks, void *data)
{
    gw_tunnel_t *tunnel = h2o_mem_alloc(sizeof(*tunnel));

    memset(tunnel, 0, sizeof(*tunnel));
    tunnel->loop = loop;
    tunnel->idle_timeout = idle_timeout;
    tunnel->timeout_entry.cb = on_timeout;
    tunnel->stall_entry.cb = on_stall_timeout;
    tunnel->callbacks = callbacks;
    tunnel->data = data;
    tunnel->side[SIDE_UPSTREAM].sock = upstream;
    upstream->data = tunnel;
    h2o_socket_read_stop(upstream);
    return tunnel;
}

void gw_tunnel_set_stall_timeout(gw_tunnel_t *tunnel, h2o_timeout_t *stall_timeout)
{
    tunnel->stall_timeout = stall_timeout;
}

void gw_tunnel_start(gw_tunnel_t *tunnel, h2o_socket_t *client)
{
    int i;

    tunnel->side[SIDE_CLIENT].sock = client;
    client->data = tunnel;
    reset_timeout(tunnel);
    for (i = 0; i != 2; ++i) {
        h2o_socket_t *sock = tunnel->side[i].sock;
        if (sock->input->size != 0) {
            relay(tunnel, i);
        } else {
            h2o_socket_read_start(sock, on_read);
        }
    }
}

void gw_tunnel_close(gw_tunnel_t *tunnel)
{
    int i;

    if (h2o_timeout_is_linked(&tunnel->timeout_entry))
        h2o_timeout_unlink(&tunnel->timeout_entry);
    if (h2o_timeout_is_linked(&tunnel->stall_entry))
        h2o_timeout_unlink(&tunnel->stall_entry);
    for (i = 0; i != 2; ++i) {
        if (tunnel->side[i].sock != NULL)
            h2o_socket_close(tunnel->side[i].sock);
    }
    if (tunnel->callbacks->on_close != NULL)
        tunnel->callbacks->on_close(tunnel->data);
    free(tunnel);
}
