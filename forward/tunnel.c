/*
 * The relay of one tunnel: a poll() loop over the local socket and the TLS
 * connection. Local bytes become masked binary frames; the gateway's frames
 * are parsed with common/ws_frame (any split), their payloads written to the
 * local socket. Each direction has one bounded buffer, and a side is read
 * only while the other side's buffer has room: a slow local reader slows
 * the reads from the gateway, a slow gateway the reads from the local app.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include "common/ws_frame.h"
#include "forward/tunnel.h"
#include "forward/wss_dial.h"

/* Payload of one frame to the gateway: one read of the local socket. */
#define CHUNK 16384
/* Room kept in `up` for the control frames we answer with (Pong, Close). */
#define CONTROL_RESERVE (2 * (GW_WS_MAX_HEADER + GW_WS_MAX_CONTROL_PAYLOAD))
#define UP_CAP (4 * (CHUNK + GW_WS_MAX_HEADER) + CONTROL_RESERVE)
#define IN_CAP GW_TUNNEL_FIRST_BYTES_MAX
#define DOWN_CAP 65536
/* How long the closing handshake and the last bytes to the local app may take. */
#define CLOSE_WAIT_MS 5000

typedef struct st_tunnel_t {
    int local_fd, gw_fd;
    SSL *ssl;
    /* local -> gateway: whole encoded frames, sent from up_off */
    uint8_t up[UP_CAP];
    size_t up_off, up_len;
    /* gateway -> here: TLS plaintext not parsed yet, from in_off */
    uint8_t in[IN_CAP];
    size_t in_off, in_len;
    /* here -> local: payload bytes, written from down_off */
    uint8_t down[DOWN_CAP];
    size_t down_off, down_len;
    gw_ws_parser_t parser;
    int in_frame, in_message;
    gw_ws_header_t frame; /* the frame being read, when in_frame */
    uint64_t frame_done;  /* bytes of its payload taken */
    uint8_t control[GW_WS_MAX_CONTROL_PAYLOAD];
    short gw_read_wait, gw_write_wait; /* poll events an SSL call waits for; 0: it may be called now */
    int local_eof, local_dead, gw_dead, close_sent, close_received;
    uint64_t close_deadline; /* set once a close is under way */
    gw_tunnel_end_t *end;
} tunnel_t;

static void set_end(tunnel_t *t, const char *why)
{
    if (t->end->why[0] == '\0')
        snprintf(t->end->why, sizeof(t->end->why), "%s", why);
}

static void closing(tunnel_t *t)
{
    if (t->close_deadline == 0)
        t->close_deadline = gw_wss_now_ms() + CLOSE_WAIT_MS;
}

/* Appends one masked frame to `up`; the caller made sure it fits. */
static void queue_frame(tunnel_t *t, int opcode, const uint8_t *payload, size_t len)
{
    uint8_t mask[4];

    if (UP_CAP - t->up_len < GW_WS_MAX_HEADER + len) {
        memmove(t->up, t->up + t->up_off, t->up_len - t->up_off);
        t->up_len -= t->up_off;
        t->up_off = 0;
    }
    RAND_bytes(mask, sizeof(mask));
    t->up_len += gw_ws_header_encode(t->up + t->up_len, 1, opcode, len, mask);
    memcpy(t->up + t->up_len, payload, len);
    gw_ws_mask(t->up + t->up_len, len, mask, 0);
    t->up_len += len;
}

static size_t up_room(const tunnel_t *t)
{
    return UP_CAP - (t->up_len - t->up_off);
}

static void queue_close(tunnel_t *t, uint16_t code, const char *reason)
{
    uint8_t payload[GW_WS_MAX_CONTROL_PAYLOAD];

    if (t->close_sent)
        return;
    queue_frame(t, GW_WS_OP_CLOSE, payload, gw_ws_close_encode(payload, code, reason, strlen(reason)));
    t->close_sent = 1;
    closing(t);
}

/* A protocol error of the gateway's: close 1002 (or what the parser says) and stop reading. */
static void protocol_error(tunnel_t *t, uint16_t code, const char *what)
{
    char why[200];

    snprintf(why, sizeof(why), "the gateway broke the WebSocket protocol (%s): tunnel closed", what);
    set_end(t, why);
    queue_close(t, code, what);
    t->close_received = 1; /* nothing more is read from it */
    t->in_len = t->in_off = 0;
}

static void on_close_frame(tunnel_t *t, size_t len)
{
    uint16_t code;
    const uint8_t *reason;
    size_t reason_len;

    if (gw_ws_close_parse(t->control, len, &code, &reason, &reason_len) != 0) {
        protocol_error(t, GW_WS_CLOSE_PROTOCOL_ERROR, "invalid close payload");
        return;
    }
    t->close_received = 1;
    t->end->close_code = code == GW_WS_CLOSE_NO_STATUS ? 0 : code;
    /* the echo (RFC 6455 5.5.1): the same code, or 1000 for none */
    queue_close(t, code == GW_WS_CLOSE_NO_STATUS ? GW_WS_CLOSE_NORMAL : code, "");
}

/* A whole control frame is in t->control. */
static void on_control(tunnel_t *t, size_t len)
{
    if (t->frame.opcode == GW_WS_OP_PING && !t->close_sent)
        queue_frame(t, GW_WS_OP_PONG, t->control, len);
    else if (t->frame.opcode == GW_WS_OP_CLOSE)
        on_close_frame(t, len);
    /* a Pong: nothing asked for it, nothing to do */
}

/* Takes what it can of the current frame's payload from `in`. 0 when it
 * has to wait (the local side or `up` is full), 1 on progress. */
static int take_payload(tunnel_t *t)
{
    size_t avail = t->in_len - t->in_off, n;
    uint64_t left = t->frame.payload_len - t->frame_done;

    if (t->frame.opcode >= GW_WS_OP_CLOSE) {
        /* control frames are taken whole: at most 125 bytes, answered into the reserve of `up`,
         * which keeps room for a Close after the answer (protocol_error queues one unchecked) */
        if (up_room(t) < CONTROL_RESERVE)
            return 0;
        n = avail < left ? avail : (size_t)left;
        memcpy(t->control + t->frame_done, t->in + t->in_off, n);
    } else {
        if (t->local_dead)
            n = avail < left ? avail : (size_t)left; /* nobody to give it to: dropped */
        else if ((n = DOWN_CAP - t->down_len) == 0 && t->down_off != 0) {
            memmove(t->down, t->down + t->down_off, t->down_len - t->down_off);
            t->down_len -= t->down_off;
            t->down_off = 0;
            n = DOWN_CAP - t->down_len;
        }
        n = n < avail ? n : avail;
        n = n < left ? n : (size_t)left;
        if (!t->local_dead)
            memcpy(t->down + t->down_len, t->in + t->in_off, n), t->down_len += n;
    }
    if (n == 0 && left != 0)
        return 0;
    t->in_off += n;
    t->frame_done += n;
    if (t->frame_done == t->frame.payload_len) {
        t->in_frame = 0;
        if (t->frame.opcode >= GW_WS_OP_CLOSE)
            on_control(t, t->frame.payload_len);
    }
    return 1;
}

/* A frame header was parsed: is it one the tunnel accepts here? */
static void on_header(tunnel_t *t)
{
    t->frame = t->parser.header;
    t->frame_done = 0;
    t->in_frame = 1;
    if (gw_ws_sequence_check(&t->in_message, &t->frame) != 0)
        protocol_error(t, GW_WS_CLOSE_PROTOCOL_ERROR, "bad fragmentation");
    else if (t->frame.opcode == GW_WS_OP_TEXT)
        protocol_error(t, GW_WS_CLOSE_UNSUPPORTED, "text message in a tcp tunnel");
}

/* Parses what `in` holds. 1 on progress. */
static int parse_gw(tunnel_t *t)
{
    int progress = 0;

    while (t->in_off < t->in_len && !t->close_received) {
        if (t->in_frame) {
            if (!take_payload(t))
                break;
        } else {
            size_t used;
            gw_ws_parse_t r = gw_ws_parse(&t->parser, t->in + t->in_off, t->in_len - t->in_off, &used);
            if (r == GW_WS_PARSE_ERROR) {
                protocol_error(t, t->parser.close_code, t->parser.error);
                return 1;
            }
            t->in_off += used;
            if (r == GW_WS_PARSE_DONE)
                on_header(t);
        }
        progress = 1;
    }
    /* a zero-length frame completes without payload bytes */
    if (t->in_frame && t->frame.payload_len == 0 && !t->close_received)
        progress |= take_payload(t);
    if (t->in_off == t->in_len)
        t->in_off = t->in_len = 0;
    return progress;
}

/* The SSL call failed: wait for what it wants, or the connection is gone. */
static void ssl_failed(tunnel_t *t, int ret, short *wait)
{
    int e = SSL_get_error(t->ssl, ret);

    if (e == SSL_ERROR_WANT_READ) {
        *wait = POLLIN;
    } else if (e == SSL_ERROR_WANT_WRITE) {
        *wait = POLLOUT;
    } else {
        t->gw_dead = 1;
        closing(t);
        if (!t->close_received)
            set_end(t, e == SSL_ERROR_ZERO_RETURN || e == SSL_ERROR_SYSCALL
                           ? "the connection to the gateway ended without a WebSocket close (1006)"
                           : "the TLS connection to the gateway failed (1006)");
    }
}

static int read_gw(tunnel_t *t)
{
    int ret;

    if (t->gw_dead || t->close_received || t->gw_read_wait != 0 || t->in_len == IN_CAP)
        return 0;
    ERR_clear_error();
    if ((ret = SSL_read(t->ssl, t->in + t->in_len, (int)(IN_CAP - t->in_len))) > 0) {
        t->in_len += ret;
        return 1;
    }
    ssl_failed(t, ret, &t->gw_read_wait);
    return t->gw_dead;
}

static int write_gw(tunnel_t *t)
{
    int ret;

    if (t->gw_dead || t->gw_write_wait != 0 || t->up_off == t->up_len)
        return 0;
    ERR_clear_error();
    if ((ret = SSL_write(t->ssl, t->up + t->up_off, (int)(t->up_len - t->up_off))) > 0) {
        if ((t->up_off += ret) == t->up_len)
            t->up_off = t->up_len = 0;
        return 1;
    }
    ssl_failed(t, ret, &t->gw_write_wait);
    return t->gw_dead;
}

/* The local app's connection failed: the gateway hears 1011, what it still sends is dropped. */
static void local_failed(tunnel_t *t, const char *what)
{
    char why[200];

    snprintf(why, sizeof(why), "the local connection failed (%s): tunnel closed", what);
    set_end(t, why);
    t->local_dead = 1;
    t->down_off = t->down_len = 0;
    if (!t->close_sent && up_room(t) >= CONTROL_RESERVE / 2)
        queue_close(t, GW_WS_CLOSE_INTERNAL_ERROR, "local connection failed");
}

static int read_local(tunnel_t *t)
{
    uint8_t chunk[CHUNK];
    ssize_t n;

    if (t->local_eof || t->local_dead || t->close_sent || up_room(t) < CHUNK + GW_WS_MAX_HEADER + CONTROL_RESERVE)
        return 0;
    if ((n = recv(t->local_fd, chunk, sizeof(chunk), 0)) > 0) {
        queue_frame(t, GW_WS_OP_BINARY, chunk, n);
        return 1;
    }
    if (n == 0) {
        /* the app's FIN: close 1000 after the bytes before it */
        t->local_eof = 1;
        t->end->local_closed = !t->close_received;
        queue_close(t, GW_WS_CLOSE_NORMAL, "");
        return 1;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    local_failed(t, strerror(errno));
    return 1;
}

static int write_local(tunnel_t *t)
{
    ssize_t n;

    if (t->local_dead || t->down_off == t->down_len)
        return 0;
    if ((n = send(t->local_fd, t->down + t->down_off, t->down_len - t->down_off, MSG_NOSIGNAL)) > 0) {
        if ((t->down_off += n) == t->down_len)
            t->down_off = t->down_len = 0;
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    local_failed(t, n < 0 ? strerror(errno) : "closed");
    return 1;
}

/* Done: both closes exchanged (or the gateway gone) and the local side has every byte it will get. */
static int finished(tunnel_t *t)
{
    int gw_done = t->gw_dead || (t->close_received && t->close_sent && t->up_off == t->up_len);
    int local_done = t->local_dead || t->down_off == t->down_len;

    if (t->close_deadline != 0 && gw_wss_now_ms() >= t->close_deadline) {
        set_end(t, "the closing handshake with the gateway timed out");
        return 1;
    }
    return gw_done && local_done && (t->in_off == t->in_len || t->close_received || t->gw_dead);
}

/* One poll(): what each side waits for; the SSL calls' wants decide the TLS socket's events. */
static void wait_events(tunnel_t *t)
{
    struct pollfd p[2] = {{.fd = t->local_fd}, {.fd = t->gw_fd}};
    int timeout = -1;

    if (!t->local_eof && !t->local_dead && !t->close_sent && up_room(t) >= CHUNK + GW_WS_MAX_HEADER + CONTROL_RESERVE)
        p[0].events |= POLLIN;
    if (!t->local_dead && t->down_off != t->down_len)
        p[0].events |= POLLOUT;
    if (t->local_dead)
        p[0].fd = -1;
    if (!t->gw_dead) {
        if (t->gw_read_wait != 0 && !t->close_received && t->in_len != IN_CAP)
            p[1].events |= t->gw_read_wait;
        if (t->gw_write_wait != 0 && t->up_off != t->up_len)
            p[1].events |= t->gw_write_wait;
    } else {
        p[1].fd = -1;
    }
    if (t->close_deadline != 0) {
        uint64_t now = gw_wss_now_ms();
        timeout = now >= t->close_deadline ? 0 : (int)(t->close_deadline - now);
    }
    if (poll(p, 2, timeout) <= 0)
        return;
    if (p[1].revents & (POLLERR | POLLHUP | POLLNVAL))
        t->gw_read_wait = t->gw_write_wait = 0; /* let the next call say what happened */
    if (p[1].revents & t->gw_read_wait)
        t->gw_read_wait = 0;
    if (p[1].revents & t->gw_write_wait)
        t->gw_write_wait = 0;
}

void gw_tunnel_run(int local_fd, SSL *ssl, int gw_fd, const void *first, size_t first_len, gw_tunnel_end_t *end)
{
    tunnel_t *t = OPENSSL_zalloc(sizeof(*t));

    memset(end, 0, sizeof(*end));
    if (t == NULL) {
        snprintf(end->why, sizeof(end->why), "out of memory");
        return;
    }
    t->local_fd = local_fd;
    t->gw_fd = gw_fd;
    t->ssl = ssl;
    t->end = end;
    gw_ws_parser_init(&t->parser, GW_WS_FROM_SERVER);
    fcntl(local_fd, F_SETFL, fcntl(local_fd, F_GETFL) | O_NONBLOCK);
    fcntl(gw_fd, F_SETFL, fcntl(gw_fd, F_GETFL) | O_NONBLOCK);
    memcpy(t->in, first, first_len < IN_CAP ? first_len : IN_CAP);
    t->in_len = first_len < IN_CAP ? first_len : IN_CAP;
    while (!finished(t)) {
        int progress;
        do {
            progress = parse_gw(t) | write_local(t) | read_local(t) | write_gw(t) | read_gw(t);
        } while (progress && !finished(t));
        if (!finished(t))
            wait_events(t);
    }
    OPENSSL_free(t);
}
