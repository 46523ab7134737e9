/*
 * WebSocket tunnel: relays bytes both ways between the client and the
 * upstream. Each direction has at most one write in flight, and its source
 * is not read during that write, so neither side can make the gateway
 * buffer more than one read's worth per direction.
 */
#include <stdlib.h>
#include <string.h>
#include "upstream/tunnel.h"
#include "upstream/ws_track.h"

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
    /* keep-alive Pings (gw_tunnel_set_pings); ping_timeout NULL: off */
    h2o_timeout_t *ping_timeout;
    h2o_timeout_entry_t ping_entry;
    gw_ws_track_t track[2]; /* of the bytes read from each side */
    int at_boundary;        /* what was written to the client ends between frames */
    int ping_writing, awaiting_pong;
    uint64_t pings;
    uint8_t ping[GW_WS_PING_MAX];
};

static void on_read(h2o_socket_t *sock, const char *err);

static int side_of(gw_tunnel_t *tunnel, h2o_socket_t *sock)
{
    return tunnel->side[SIDE_CLIENT].sock == sock ? SIDE_CLIENT : SIDE_UPSTREAM;
}

/* Starts `entry` on `timeout` again (NULL: that timer is off). */
static void relink(gw_tunnel_t *tunnel, h2o_timeout_t *timeout, h2o_timeout_entry_t *entry)
{
    if (timeout == NULL)
        return;
    if (h2o_timeout_is_linked(entry))
        h2o_timeout_unlink(entry);
    h2o_timeout_link(tunnel->loop, timeout, entry);
}

static void reset_timeout(gw_tunnel_t *tunnel)
{
    relink(tunnel, tunnel->idle_timeout, &tunnel->timeout_entry);
}

static void on_timeout(h2o_timeout_entry_t *entry)
{
    gw_tunnel_t *tunnel = H2O_STRUCT_FROM_MEMBER(gw_tunnel_t, timeout_entry, entry);
    if (tunnel->awaiting_pong && tunnel->callbacks->on_keepalive != NULL)
        tunnel->callbacks->on_keepalive(tunnel->data, 1);
    gw_tunnel_close(tunnel);
}

static void relay(gw_tunnel_t *tunnel, int from);

static void reset_ping(gw_tunnel_t *tunnel)
{
    relink(tunnel, tunnel->ping_timeout, &tunnel->ping_entry);
}

static void on_ping_written(h2o_socket_t *sock, const char *err)
{
    gw_tunnel_t *tunnel = sock->data;
    h2o_socket_t *up = tunnel->side[SIDE_UPSTREAM].sock;

    tunnel->ping_writing = 0;
    if (err != NULL) {
        gw_tunnel_close(tunnel);
        return;
    }
    if (up->input->size != 0)
        relay(tunnel, SIDE_UPSTREAM);
    else if (!tunnel->side[SIDE_UPSTREAM].eof)
        h2o_socket_read_start(up, on_read);
}

/* Between two frames with nothing in flight to the client: a Ping now;
 * otherwise at the next interval. */
static void on_ping_due(h2o_timeout_entry_t *entry)
{
    gw_tunnel_t *tunnel = H2O_STRUCT_FROM_MEMBER(gw_tunnel_t, ping_entry, entry);
    h2o_iovec_t buf;

    reset_ping(tunnel);
    if (tunnel->side[SIDE_UPSTREAM].writing != 0 || !tunnel->at_boundary || tunnel->side[SIDE_CLIENT].sock == NULL)
        return;
    buf = h2o_iovec_init(tunnel->ping, gw_ws_ping_encode(tunnel->ping, ++tunnel->pings));
    tunnel->ping_writing = 1;
    tunnel->awaiting_pong = 1;
    if (tunnel->callbacks->on_keepalive != NULL)
        tunnel->callbacks->on_keepalive(tunnel->data, 0);
    h2o_socket_write(tunnel->side[SIDE_CLIENT].sock, &buf, 1, on_ping_written);
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
    if (tunnel->ping_timeout != NULL)
        gw_ws_track_consumed(&tunnel->track[1 - to], src->writing);
    src->writing = 0;
    if (src->eof) {
        gw_tunnel_close(tunnel);
        return;
    }
    reset_timeout(tunnel);
    h2o_socket_read_start(src->sock, on_read);
    /* tracking may have held back a Pong that is in the input already */
    if (tunnel->ping_timeout != NULL && src->sock->input->size != 0)
        relay(tunnel, 1 - to);
}

/* With tracking: how many of src's input bytes go now (0: none yet). The
 * gateway's Pongs are dropped here; a Ping to the client in flight delays
 * the upstream's bytes until it is written. */
static size_t track(gw_tunnel_t *tunnel, int from)
{
    h2o_socket_t *sock = tunnel->side[from].sock;
    size_t n;

    if (from == SIDE_UPSTREAM) {
        if (tunnel->ping_writing)
            return 0;
        tunnel->at_boundary = gw_ws_track_to_client(&tunnel->track[from], (uint8_t *)sock->input->bytes, sock->input->size);
        reset_ping(tunnel);
        return sock->input->size;
    }
    while (gw_ws_track_from_client(&tunnel->track[from], (uint8_t *)sock->input->bytes, sock->input->size, &n) ==
           GW_WS_TRACK_DROP) {
        h2o_buffer_consume(&sock->input, n);
        gw_ws_track_consumed(&tunnel->track[from], n);
        tunnel->awaiting_pong = 0;
        reset_timeout(tunnel);
    }
    /* the client's frames on their way keep the tunnel from being silent: no Ping is due */
    if (n != 0)
        reset_ping(tunnel);
    return n;
}

/* src's input is not empty and nothing from src is being written */
static void relay(gw_tunnel_t *tunnel, int from)
{
    tunnel_side_t *src = &tunnel->side[from], *dst = &tunnel->side[1 - from];
    h2o_iovec_t buf = h2o_iovec_init(src->sock->input->bytes, src->sock->input->size);

    if (tunnel->ping_timeout != NULL && (buf.len = track(tunnel, from)) == 0) {
        /* a Ping in flight (its completion relays), or a Pong to complete */
        if (from == SIDE_UPSTREAM)
            h2o_socket_read_stop(src->sock);
        else
            h2o_socket_read_start(src->sock, on_read);
        return;
    }
    buf.base = src->sock->input->bytes; /* track() may have consumed a Pong */
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

void gw_tunnel_set_pings(gw_tunnel_t *tunnel, h2o_timeout_t *interval)
{
    tunnel->ping_timeout = interval;
    tunnel->ping_entry.cb = on_ping_due;
    tunnel->at_boundary = 1;
    gw_ws_track_init(&tunnel->track[SIDE_CLIENT], GW_WS_FROM_CLIENT);
    gw_ws_track_init(&tunnel->track[SIDE_UPSTREAM], GW_WS_FROM_SERVER);
}

void gw_tunnel_start(gw_tunnel_t *tunnel, h2o_socket_t *client)
{
    int i;

    tunnel->side[SIDE_CLIENT].sock = client;
    client->data = tunnel;
    reset_timeout(tunnel);
    reset_ping(tunnel);
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
    if (h2o_timeout_is_linked(&tunnel->ping_entry))
        h2o_timeout_unlink(&tunnel->ping_entry);
    for (i = 0; i != 2; ++i) {
        if (tunnel->side[i].sock != NULL)
            h2o_socket_close(tunnel->side[i].sock);
    }
    if (tunnel->callbacks->on_close != NULL)
        tunnel->callbacks->on_close(tunnel->data);
    free(tunnel);
}
