/*
 * WebSocket tunnel: relays bytes both ways between the client and the
 * upstream. Each direction has at most one write in flight, and its source
 * is not read during that write, so neither side can make the gateway
 * buffer more than one read's worth per direction. A spliced direction
 * (gw_tunnel_set_splice) moves socket -> pipe -> socket instead, and its
 * source is not polled while the pipe cannot be emptied into the other
 * side: it holds at most the pipe, in the kernel. With bounds
 * (gw_tunnel_set_bounds) the client's frames are walked and charged to a
 * budget (ws_budget.h), and one past it ends the tunnel with Close frames.
 * Both sides are tunnel ends (tunnel_end.h): sockets, or the client's
 * HTTP/2 stream; only two socket ends splice.
 */
#define _GNU_SOURCE /* splice, pipe2, F_SETPIPE_SZ, arc4random_buf */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "upstream/tunnel.h"
#include "common/engine.h"
#include "upstream/ws_track.h"

enum { SIDE_CLIENT = 0, SIDE_UPSTREAM = 1 };

/* The pipe of a spliced direction; Linux's default is 64 KiB. Pipe pages
 * are a per-user budget (fs.pipe-user-pages-soft): a refusal keeps the
 * default. */
#define SPLICE_PIPE_BYTES (256 * 1024)
/* Bytes one wake-up moves in a direction before the loop serves others: the
 * next batch waits for readiness again (level-triggered, so at once when
 * ready). */
#define SPLICE_BATCH_BYTES (1024 * 1024)

typedef struct st_tunnel_side_t {
    gw_tunnel_end_t *end;
    /* bytes of end->input being written to the other side; 0 when none */
    size_t writing;
    /* the peer closed; close the tunnel once `writing` (or the pipe) is done */
    int eof;
    /* this side's bytes to the other, spliced: the pipe ([0] read end, -1:
     * none) and the bytes in it, not yet written to the other side */
    int pipe_fds[2];
    size_t in_pipe, pipe_size;
    unsigned spliced : 1;  /* this side is polled, not read: its bytes move through the pipe */
    unsigned notified : 1; /* a write notification is armed on the other side's socket (one-shot) */
} tunnel_side_t;

struct st_gw_tunnel_t {
    h2o_loop_t *loop;
    gw_timeout_t *idle_timeout;
    gw_timer_t timeout_entry;
    gw_timeout_t *stall_timeout; /* NULL: writes to the client may take any time */
    gw_timer_t stall_entry;
    const gw_tunnel_callbacks_t *callbacks;
    void *data;
    tunnel_side_t side[2];
    /* keep-alive Pings (gw_tunnel_set_pings); ping_timeout NULL: off */
    gw_timeout_t *ping_timeout;
    gw_timer_t ping_entry;
    gw_ws_track_t track[2]; /* of the bytes read from each side */
    int at_boundary;        /* what was written to the client ends between frames */
    int ping_writing, awaiting_pong;
    uint64_t pings;
    uint8_t ping[GW_WS_PING_MAX];
    int splice;                        /* gw_tunnel_set_splice: each direction is spliced once its buffered bytes are written */
    int tracked[2];                    /* the frames of the bytes read from that side are walked (track[]) */
    const gw_ws_budget_conf_t *bounds; /* gw_tunnel_set_bounds; NULL: none */
    gw_timeout_t *close_wait;          /* gw_tunnel_set_bounds */
    uint16_t refused;                  /* the close code once the client went past the bounds; 0: not */
    struct st_tunnel_refusal_t *refusal;
};

/* A tunnel refused by its bounds, from then on (allocated then: most tunnels never need it). */
typedef struct st_tunnel_refusal_t {
    uint8_t frame[2][GW_WS_MAX_HEADER + GW_WS_MAX_CONTROL_PAYLOAD]; /* the Close to each side ([SIDE_CLIENT]: to the client) */
    int started;                                                    /* the Close frames went (or the client gets none) */
    int writing;                                                    /* Close frames being written */
    int done[2];                                                    /* that side is closed (read to its end, or failed) */
} tunnel_refusal_t;

static void on_read(gw_tunnel_end_t *end, const char *err);
static void start_reading(gw_tunnel_t *tunnel, int from);
static void refusal_step(gw_tunnel_t *tunnel);

static int side_of(gw_tunnel_t *tunnel, gw_tunnel_end_t *end)
{
    return tunnel->side[SIDE_CLIENT].end == end ? SIDE_CLIENT : SIDE_UPSTREAM;
}

/* Starts `entry` on `timeout` again (NULL: that timer is off). */
static void relink(gw_tunnel_t *tunnel, gw_timeout_t *timeout, gw_timer_t *entry)
{
    if (timeout == NULL)
        return;
    if (gw_timer_is_linked(entry))
        gw_timer_unlink(entry);
    gw_timer_link(tunnel->loop, timeout, entry);
}

static void reset_timeout(gw_tunnel_t *tunnel)
{
    if (tunnel->refusal != NULL)
        return; /* the close wait runs */
    relink(tunnel, tunnel->idle_timeout, &tunnel->timeout_entry);
}

static void on_timeout(gw_timer_t *entry)
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

static void on_ping_written(gw_tunnel_end_t *end, const char *err)
{
    gw_tunnel_t *tunnel = end->data;
    gw_tunnel_end_t *up = tunnel->side[SIDE_UPSTREAM].end;

    tunnel->ping_writing = 0;
    if (err != NULL) {
        gw_tunnel_close(tunnel);
        return;
    }
    if (tunnel->refused) {
        refusal_step(tunnel);
        return;
    }
    if ((*up->input)->size != 0)
        relay(tunnel, SIDE_UPSTREAM);
    else if (!tunnel->side[SIDE_UPSTREAM].eof)
        gw_tunnel_end_read_start(up, on_read);
}

/* Between two frames with nothing in flight to the client: a Ping now;
 * otherwise at the next interval. */
static void on_ping_due(gw_timer_t *entry)
{
    gw_tunnel_t *tunnel = H2O_STRUCT_FROM_MEMBER(gw_tunnel_t, ping_entry, entry);
    h2o_iovec_t buf;

    if (tunnel->refused)
        return;
    reset_ping(tunnel);
    if (tunnel->side[SIDE_UPSTREAM].writing != 0 || !tunnel->at_boundary || tunnel->side[SIDE_CLIENT].end == NULL)
        return;
    buf = h2o_iovec_init(tunnel->ping, gw_ws_ping_encode(tunnel->ping, ++tunnel->pings));
    tunnel->ping_writing = 1;
    tunnel->awaiting_pong = 1;
    if (tunnel->callbacks->on_keepalive != NULL)
        tunnel->callbacks->on_keepalive(tunnel->data, 0);
    gw_tunnel_end_write(tunnel->side[SIDE_CLIENT].end, &buf, 1, on_ping_written);
}

static void on_stall_timeout(gw_timer_t *entry)
{
    gw_tunnel_close(H2O_STRUCT_FROM_MEMBER(gw_tunnel_t, stall_entry, entry));
}

static void on_write_complete(gw_tunnel_end_t *dst, const char *err)
{
    gw_tunnel_t *tunnel = dst->data;
    int to = side_of(tunnel, dst);
    tunnel_side_t *src = &tunnel->side[1 - to];

    if (err != NULL) {
        gw_tunnel_close(tunnel);
        return;
    }
    if (to == SIDE_CLIENT && gw_timer_is_linked(&tunnel->stall_entry))
        gw_timer_unlink(&tunnel->stall_entry);
    /* written to the socket: these are the bytes billed; tracked, Pings and Pongs are not activity */
    if (tunnel->callbacks->on_bytes != NULL)
        tunnel->callbacks->on_bytes(tunnel->data, to == SIDE_CLIENT ? src->writing : 0, to == SIDE_UPSTREAM ? src->writing : 0,
                                    tunnel->ping_timeout != NULL && !gw_ws_track_take_activity(&tunnel->track[1 - to]));
    h2o_buffer_consume(src->end->input, src->writing);
    if (tunnel->tracked[1 - to])
        gw_ws_track_consumed(&tunnel->track[1 - to], src->writing);
    src->writing = 0;
    if (tunnel->refused) {
        refusal_step(tunnel);
        return;
    }
    if (src->eof) {
        gw_tunnel_close(tunnel);
        return;
    }
    reset_timeout(tunnel);
    start_reading(tunnel, 1 - to);
    /* tracking may have held back a Pong or a header that is in the input already */
    if (tunnel->tracked[1 - to] && (*src->end->input)->size != 0)
        relay(tunnel, 1 - to);
}

static void begin_refusal(gw_tunnel_t *tunnel, uint16_t code);

/* With tracking: how many of src's input bytes go now (0: none yet). The
 * gateway's Pongs are dropped here; a Ping to the client in flight delays
 * the upstream's bytes until it is written; past the bounds only the
 * client's bytes before the refused frame go (tunnel->refused is set). */
static size_t track(gw_tunnel_t *tunnel, int from)
{
    gw_tunnel_end_t *end = tunnel->side[from].end;
    gw_ws_track_t *t = &tunnel->track[from];
    gw_ws_track_result_t r;
    uint64_t now = h2o_now(tunnel->loop);
    size_t n;

    if (from == SIDE_UPSTREAM) {
        if (tunnel->ping_writing)
            return 0;
        tunnel->at_boundary = gw_ws_track_to_client(&tunnel->track[from], (uint8_t *)(*end->input)->bytes, (*end->input)->size);
        reset_ping(tunnel);
        return (*end->input)->size;
    }
    while ((r = gw_ws_track_from_client(t, (uint8_t *)(*end->input)->bytes, (*end->input)->size, now, &n)) == GW_WS_TRACK_DROP) {
        h2o_buffer_consume(end->input, n);
        gw_ws_track_consumed(t, n);
        tunnel->awaiting_pong = 0;
        reset_timeout(tunnel);
    }
    if (r == GW_WS_TRACK_REFUSE && !tunnel->refused)
        begin_refusal(tunnel, t->refused);
    /* the client's frames on their way keep the tunnel from being silent: no Ping is due (none at all once refused) */
    if (n != 0 && !tunnel->refused)
        reset_ping(tunnel);
    return n;
}

/* src's input is not empty and nothing from src is being written */
static void relay(gw_tunnel_t *tunnel, int from)
{
    tunnel_side_t *src = &tunnel->side[from], *dst = &tunnel->side[1 - from];
    h2o_iovec_t buf = h2o_iovec_init((*src->end->input)->bytes, (*src->end->input)->size);

    if (tunnel->tracked[from] && (buf.len = track(tunnel, from)) == 0) {
        /* a Ping in flight (its completion relays), a Pong or a header to complete, or a refusal */
        if (tunnel->refused)
            refusal_step(tunnel);
        else if (from == SIDE_UPSTREAM)
            gw_tunnel_end_read_stop(src->end);
        else
            gw_tunnel_end_read_start(src->end, on_read);
        return;
    }
    buf.base = (*src->end->input)->bytes; /* track() may have consumed a Pong */
    gw_tunnel_end_read_stop(src->end);
    src->writing = buf.len;
    reset_timeout(tunnel);
    if (from == SIDE_UPSTREAM && tunnel->stall_timeout != NULL)
        gw_timer_link(tunnel->loop, tunnel->stall_timeout, &tunnel->stall_entry);
    gw_tunnel_end_write(dst->end, &buf, 1, on_write_complete);
}

/* --- refusal (gw_tunnel_set_bounds) -------------------------------------- */

/* The client went past the bounds: nothing more is read from either side
 * (the client's bytes before the refused frame are written, or being
 * written), and within the close wait the tunnel is closed (the idle
 * timer's entry, linked to it). */
static void begin_refusal(gw_tunnel_t *tunnel, uint16_t code)
{
    tunnel_refusal_t *r = h2o_mem_alloc(sizeof(*r));

    memset(r, 0, sizeof(*r));
    tunnel->refused = code;
    tunnel->refusal = r;
    tunnel->awaiting_pong = 0; /* the close wait is not a Pong timeout */
    if (gw_timer_is_linked(&tunnel->timeout_entry))
        gw_timer_unlink(&tunnel->timeout_entry);
    gw_timer_link(tunnel->loop, tunnel->close_wait, &tunnel->timeout_entry);
    if (gw_timer_is_linked(&tunnel->ping_entry))
        gw_timer_unlink(&tunnel->ping_entry);
    gw_tunnel_end_read_stop(tunnel->side[SIDE_CLIENT].end);
    gw_tunnel_end_read_stop(tunnel->side[SIDE_UPSTREAM].end);
    if (tunnel->callbacks->on_refused != NULL)
        tunnel->callbacks->on_refused(tunnel->data, code);
}

static void on_drain(gw_tunnel_end_t *end, const char *err)
{
    gw_tunnel_t *tunnel = end->data;
    tunnel_refusal_t *r = tunnel->refusal;
    int side = side_of(tunnel, end);

    h2o_buffer_consume(end->input, (*end->input)->size);
    if (err == NULL)
        return;
    gw_tunnel_end_read_stop(end);
    r->done[side] = 1;
    if (r->done[1 - side])
        gw_tunnel_close(tunnel);
}

/* A side's Close is written (or it gets none): its write side is shut,
 * and what it still sends is read and dropped until it closes. */
static void drain(gw_tunnel_t *tunnel, int side)
{
    gw_tunnel_end_t *end = tunnel->side[side].end;

    gw_tunnel_end_shutdown(end);
    if (end->sock != NULL)
        h2o_socket_dont_read(end->sock, 0); /* a spliced side was polled, not read */
    h2o_buffer_consume(end->input, (*end->input)->size);
    gw_tunnel_end_read_start(end, on_drain);
}

static void on_refusal_written(gw_tunnel_end_t *end, const char *err)
{
    gw_tunnel_t *tunnel = end->data;
    tunnel_refusal_t *r = tunnel->refusal;
    int side = side_of(tunnel, end);

    --r->writing;
    if (err == NULL) {
        drain(tunnel, side);
        return;
    }
    r->done[side] = 1;
    if (r->done[1 - side])
        gw_tunnel_close(tunnel);
}

static void write_close(gw_tunnel_t *tunnel, int side, const uint8_t *mask)
{
    tunnel_refusal_t *r = tunnel->refusal;
    const char *why = tunnel->refused == GW_WS_CLOSE_TOO_BIG ? "message too big" : "frame rate";
    uint8_t payload[GW_WS_MAX_CONTROL_PAYLOAD];
    size_t n = gw_ws_close_encode(payload, tunnel->refused, why, strlen(why)), h;
    h2o_iovec_t buf;

    h = gw_ws_header_encode(r->frame[side], 1, GW_WS_OP_CLOSE, n, mask);
    if (mask != NULL)
        gw_ws_mask(payload, n, mask, 0);
    memcpy(r->frame[side] + h, payload, n);
    buf = h2o_iovec_init(r->frame[side], h + n);
    ++r->writing;
    gw_tunnel_end_write(tunnel->side[side].end, &buf, 1, on_refusal_written);
}

/* Once no write is in flight either way: the sandbox gets a Close as from
 * the client (masked), the client one when the bytes it was sent end
 * between two frames (a spliced direction's end is not known: then none). */
static void refusal_step(gw_tunnel_t *tunnel)
{
    tunnel_refusal_t *r = tunnel->refusal;
    uint8_t mask[4];

    if (r->started || tunnel->side[SIDE_CLIENT].writing != 0 || tunnel->side[SIDE_UPSTREAM].writing != 0 || tunnel->ping_writing)
        return;
    r->started = 1;
    arc4random_buf(mask, sizeof(mask));
    write_close(tunnel, SIDE_UPSTREAM, mask);
    if (tunnel->tracked[SIDE_UPSTREAM] && tunnel->at_boundary && !tunnel->side[SIDE_UPSTREAM].spliced)
        write_close(tunnel, SIDE_CLIENT, NULL);
    else
        drain(tunnel, SIDE_CLIENT);
}

/* --- splice(2) ---------------------------------------------------------- */

static void splice_pump(gw_tunnel_t *tunnel, int from);

static void on_splice_readable(gw_tunnel_end_t *end, const char *err)
{
    gw_tunnel_t *tunnel = end->data;

    (void)err; /* splice(2) reports it */
    splice_pump(tunnel, side_of(tunnel, end));
}

static void on_splice_writable(h2o_socket_t *sock, const char *err)
{
    gw_tunnel_end_t *end = sock->data;
    gw_tunnel_t *tunnel = end->data;
    int from = 1 - side_of(tunnel, end);

    (void)err; /* splice(2) reports it */
    tunnel->side[from].notified = 0;
    if (tunnel->refused)
        return; /* the pipe's bytes are dropped: the refusal does not wait for this side */
    splice_pump(tunnel, from);
}

static ssize_t splice_fds(int in, int out, size_t len)
{
    ssize_t n;

    while ((n = splice(in, NULL, out, NULL, len, SPLICE_F_NONBLOCK | SPLICE_F_MOVE)) == -1 && errno == EINTR)
        ;
    return n;
}

/* The other side's socket is full: this side is not polled until it takes
 * more (a write to the client that does not complete is a stall, as on the
 * buffered path). */
static void wait_writable(gw_tunnel_t *tunnel, int from)
{
    tunnel_side_t *src = &tunnel->side[from];

    gw_tunnel_end_read_stop(src->end);
    if (!src->notified) {
        src->notified = 1;
        h2o_socket_notify_write(tunnel->side[1 - from].end->sock, on_splice_writable);
    }
    if (from == SIDE_UPSTREAM && tunnel->stall_timeout != NULL && !gw_timer_is_linked(&tunnel->stall_entry))
        gw_timer_link(tunnel->loop, tunnel->stall_timeout, &tunnel->stall_entry);
}

/* n bytes from side `from` are in the other side's socket: counted and
 * billed as written (the socket's stream position is what delivery.c bills
 * acknowledged bytes against). */
static void spliced(gw_tunnel_t *tunnel, int from, size_t n)
{
    h2o_socket_t *dst = tunnel->side[1 - from].end->sock;

    dst->bytes_written += n;
    if (from == SIDE_UPSTREAM && gw_timer_is_linked(&tunnel->stall_entry))
        gw_timer_unlink(&tunnel->stall_entry);
    if (tunnel->callbacks->on_spliced != NULL)
        tunnel->callbacks->on_spliced(tunnel->data, n);
    if (tunnel->callbacks->on_bytes != NULL)
        tunnel->callbacks->on_bytes(tunnel->data, from == SIDE_UPSTREAM ? n : 0, from == SIDE_CLIENT ? n : 0, 0);
    reset_timeout(tunnel);
}

/* Moves what can move now from side `from` to the other through its pipe,
 * then waits for what stops it. Closes the tunnel once that side is over
 * and its pipe empty, or on an error: then it was the last use of tunnel. */
static void splice_pump(gw_tunnel_t *tunnel, int from)
{
    tunnel_side_t *src = &tunnel->side[from];
    int dst_fd = h2o_socket_get_fd(tunnel->side[1 - from].end->sock);
    size_t moved = 0;
    ssize_t n;

    for (;;) {
        if (src->in_pipe != 0) {
            if ((n = splice_fds(src->pipe_fds[0], dst_fd, src->in_pipe)) < 0 && errno == EAGAIN) {
                wait_writable(tunnel, from);
                return;
            }
            if (n <= 0) {
                gw_tunnel_close(tunnel);
                return;
            }
            src->in_pipe -= (size_t)n;
            spliced(tunnel, from, (size_t)n);
            if ((moved += (size_t)n) >= SPLICE_BATCH_BYTES && src->in_pipe != 0) {
                wait_writable(tunnel, from);
                return;
            }
            continue;
        }
        if (src->eof) {
            /* what this side said before it closed is delivered */
            gw_tunnel_close(tunnel);
            return;
        }
        if (moved >= SPLICE_BATCH_BYTES) {
            gw_tunnel_end_read_start(src->end, on_splice_readable);
            return;
        }
        if ((n = splice_fds(h2o_socket_get_fd(src->end->sock), src->pipe_fds[1], src->pipe_size)) < 0 && errno == EAGAIN) {
            gw_tunnel_end_read_start(src->end, on_splice_readable);
            return;
        }
        if (n <= 0) {
            src->eof = 1;
            gw_tunnel_end_read_stop(src->end);
            continue;
        }
        src->in_pipe += (size_t)n;
    }
}

/* The pipe of src's bytes: 0, or -1 when none can be had (descriptors
 * exhausted): they go the buffered way then. */
static int open_pipe(tunnel_side_t *src)
{
    int size;

    if (pipe2(src->pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) {
        src->pipe_fds[0] = src->pipe_fds[1] = -1;
        return -1;
    }
    (void)fcntl(src->pipe_fds[1], F_SETPIPE_SZ, SPLICE_PIPE_BYTES);
    size = fcntl(src->pipe_fds[1], F_GETPIPE_SZ);
    src->pipe_size = size > 0 ? (size_t)size : 4096;
    return 0;
}

/* Side `from` has nothing buffered nor in flight: it is read again, or,
 * in a spliced tunnel, polled for its pipe from now on. */
static void start_reading(gw_tunnel_t *tunnel, int from)
{
    tunnel_side_t *src = &tunnel->side[from];

    if (tunnel->splice && !tunnel->tracked[from] && !src->spliced && (*src->end->input)->size == 0 && open_pipe(src) == 0) {
        src->spliced = 1;
        h2o_socket_dont_read(src->end->sock, 1);
    }
    gw_tunnel_end_read_start(src->end, src->spliced ? on_splice_readable : on_read);
}

static void on_read(gw_tunnel_end_t *end, const char *err)
{
    gw_tunnel_t *tunnel = end->data;
    int from = side_of(tunnel, end);

    if (err != NULL) {
        /* deliver what this side said before closing (e.g. a close frame) */
        tunnel->side[from].eof = 1;
        gw_tunnel_end_read_stop(end);
        if (tunnel->side[from].writing == 0)
            gw_tunnel_close(tunnel);
        return;
    }
    if ((*end->input)->size != 0)
        relay(tunnel, from);
}

gw_tunnel_t *gw_tunnel_new(h2o_loop_t *loop, h2o_socket_t *upstream_sock, gw_timeout_t *idle_timeout,
                           const gw_tunnel_callbacks_t *callbacks, void *data)
{
    gw_tunnel_t *tunnel = h2o_mem_alloc(sizeof(*tunnel));
    gw_tunnel_end_t *upstream = gw_tunnel_end_socket(upstream_sock);
    int i;

    memset(tunnel, 0, sizeof(*tunnel));
    tunnel->loop = loop;
    tunnel->idle_timeout = idle_timeout;
    tunnel->timeout_entry.cb = on_timeout;
    tunnel->stall_entry.cb = on_stall_timeout;
    tunnel->callbacks = callbacks;
    tunnel->data = data;
    tunnel->side[SIDE_UPSTREAM].end = upstream;
    for (i = 0; i != 2; ++i)
        tunnel->side[i].pipe_fds[0] = tunnel->side[i].pipe_fds[1] = -1;
    upstream->data = tunnel;
    gw_tunnel_end_read_stop(upstream);
    return tunnel;
}

void gw_tunnel_set_stall_timeout(gw_tunnel_t *tunnel, gw_timeout_t *stall_timeout)
{
    tunnel->stall_timeout = stall_timeout;
}

void gw_tunnel_set_pings(gw_tunnel_t *tunnel, gw_timeout_t *interval)
{
    tunnel->ping_timeout = interval;
    tunnel->ping_entry.cb = on_ping_due;
}

void gw_tunnel_set_bounds(gw_tunnel_t *tunnel, const gw_ws_budget_conf_t *conf, gw_timeout_t *close_wait)
{
    tunnel->bounds = conf;
    tunnel->close_wait = close_wait;
}

/* What is walked: with Pings both ways; with bounds the client's frames,
 * and the upstream's unless they are spliced (only so that a refusal's
 * Close can fall between two of them). */
static void start_tracking(gw_tunnel_t *tunnel)
{
    int pings = tunnel->ping_timeout != NULL;

    tunnel->tracked[SIDE_CLIENT] = pings || tunnel->bounds != NULL;
    tunnel->tracked[SIDE_UPSTREAM] = pings || (tunnel->bounds != NULL && !tunnel->splice);
    tunnel->at_boundary = 1;
    gw_ws_track_init(&tunnel->track[SIDE_CLIENT], GW_WS_FROM_CLIENT);
    gw_ws_track_init(&tunnel->track[SIDE_UPSTREAM], GW_WS_FROM_SERVER);
    tunnel->track[SIDE_CLIENT].drop_pongs = pings;
    if (tunnel->bounds != NULL)
        gw_ws_budget_init(&tunnel->track[SIDE_CLIENT].budget, tunnel->bounds, h2o_now(tunnel->loop));
}

void gw_tunnel_set_splice(gw_tunnel_t *tunnel)
{
    tunnel->splice = tunnel->ping_timeout == NULL;
}

void gw_tunnel_start(gw_tunnel_t *tunnel, gw_tunnel_end_t *client)
{
    int i;

    tunnel->side[SIDE_CLIENT].end = client;
    client->data = tunnel;
    /* a TLS side's bytes are not the socket's */
    if (client->sock == NULL || client->sock->ssl != NULL || tunnel->side[SIDE_UPSTREAM].end->sock->ssl != NULL)
        tunnel->splice = 0;
    start_tracking(tunnel);
    reset_timeout(tunnel);
    reset_ping(tunnel);
    /* the client's early bytes may already be past its bounds: then the refusal has both sides */
    for (i = 0; i != 2 && !tunnel->refused; ++i) {
        gw_tunnel_end_t *end = tunnel->side[i].end;
        if ((*end->input)->size != 0) {
            relay(tunnel, i);
        } else {
            start_reading(tunnel, i);
        }
    }
}

void gw_tunnel_close(gw_tunnel_t *tunnel)
{
    int i;

    if (gw_timer_is_linked(&tunnel->timeout_entry))
        gw_timer_unlink(&tunnel->timeout_entry);
    if (gw_timer_is_linked(&tunnel->stall_entry))
        gw_timer_unlink(&tunnel->stall_entry);
    if (gw_timer_is_linked(&tunnel->ping_entry))
        gw_timer_unlink(&tunnel->ping_entry);
    for (i = 0; i != 2; ++i) {
        if (tunnel->side[i].end != NULL)
            gw_tunnel_end_close(tunnel->side[i].end);
        if (tunnel->side[i].pipe_fds[0] != -1) {
            close(tunnel->side[i].pipe_fds[0]);
            close(tunnel->side[i].pipe_fds[1]);
        }
    }
    free(tunnel->refusal);
    if (tunnel->callbacks->on_close != NULL)
        tunnel->callbacks->on_close(tunnel->data);
    free(tunnel);
}
