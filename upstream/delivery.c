/*
 * Egress held per client connection until the client's TCP acknowledged it.
 * A connection's held bytes are a short list of (sandbox, bytes, end)
 * segments, oldest first, where `end` is the position in the connection's
 * plaintext stream (h2o's sock->bytes_written) at which they end; what the
 * kernel says the client acknowledged (TCP_INFO tcpi_bytes_acked, mapped to
 * that stream) bills the segments that lie before it.
 */
#include <linux/sockios.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_acked (glibc's has none) */
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "common/engine.h"
#include "khash.h"
#include "common/loop_timeout.h"
#include "routing/host.h"
#include "upstream/delivery.h"

/* Sandboxes one connection holds bytes for at once (HTTP/2 can carry
 * several); past it the connection is checked, then its oldest segment is
 * billed whole. */
#define MAX_SEGMENTS 8
/* TLS: the largest record payload, and the least overhead of one (TLS 1.3
 * AEAD: 5 header + 1 content type + 16 tag bytes). */
#define TLS_RECORD_PAYLOAD 16384
#define TLS_MIN_RECORD_OVERHEAD 22
/* tcpi_state of a connection that is over (the kernel's TCP_CLOSE, include/net/tcp_states.h) */
#define TCP_STATE_CLOSE 7
/* A connection closed with bytes not yet acknowledged and no reset is
 * followed this many checks (seconds) on a duplicate of its descriptor
 * (the kernel goes on sending them); what the client has not acknowledged
 * by then is not billed. At most MAX_LINGERING such connections per worker;
 * past it a closing connection is billed what was written. */
#define LINGER_CHECKS 10
#define MAX_LINGERING 4096

typedef struct st_segment_t {
    char sandbox_id[GW_SANDBOX_ID_MAX + 1];
    int no_activity;
    uint64_t bytes;
    uint64_t end; /* plaintext stream position at which the bytes end */
} segment_t;

typedef struct st_delivery_t {
    gw_deliveries_t *owner;
    h2o_socket_t *sock; /* NULL once lingering: h2o disposed it */
    int fd;             /* h2o's, or the duplicate a lingering connection holds */
    int tls;
    /* TLS: the wire bytes that are not records of the plaintext stream (the
     * handshake, estimated when the connection is first seen), to map
     * acknowledged wire bytes to plaintext positions */
    uint64_t handshake;
    unsigned linger_checks;   /* checks left while lingering */
    h2o_linklist_t lingering; /* in owner->lingering while lingering */
    gw_timer_t check;
    size_t num_segments;
    segment_t segments[MAX_SEGMENTS];
    uint64_t held;
} delivery_t;

KHASH_MAP_INIT_INT64(gw_delivery, delivery_t *)

struct st_gw_deliveries_t {
    h2o_loop_t *loop;
    int check_enabled;
    gw_timeout_t *check_timeout; /* the loop's (common/loop_timeout.h) */
    gw_delivery_bill_cb bill;
    void *bill_data;
    khash_t(gw_delivery) * by_sock;
    h2o_linklist_t lingering; /* of delivery_t: closed by h2o, bytes still in flight */
    size_t num_lingering;
    uint64_t held;
};

uint64_t gw_delivery_plaintext(uint64_t wire, int tls)
{
    if (!tls)
        return wire;
    return wire - wire / (TLS_RECORD_PAYLOAD + TLS_MIN_RECORD_OVERHEAD) * TLS_MIN_RECORD_OVERHEAD;
}

/* What the kernel says of a connection. */
typedef struct st_tcp_state_t {
    int known;        /* 0: the kernel did not say (then all counts as delivered) */
    uint64_t acked;   /* wire bytes the client acknowledged */
    uint64_t unacked; /* wire bytes written and not acknowledged (SIOCOUTQ) */
    int reset;        /* the connection is over (a reset, or a close whose bytes are all acknowledged) */
} tcp_state_t;

/* One TCP_INFO, and SIOCOUTQ only when it cannot be told from it: on a live
 * connection with no segment in flight (tcpi_unacked, the kernel's
 * packets_out) and nothing unsent (tcpi_notsent_bytes) every byte written is
 * acknowledged. A connection that is over (a reset purges the segments in
 * flight) always asks SIOCOUTQ, so bytes a reset lost are never taken for
 * delivered. A connection's first and last look are usually of the first
 * kind: one system call each instead of two. */
static tcp_state_t tcp_state(int fd)
{
    tcp_state_t st;
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int q = 0;

    memset(&st, 0, sizeof(st));
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
        return st;
    st.reset = ti.tcpi_state == TCP_STATE_CLOSE;
    if (st.reset || len < offsetof(struct tcp_info, tcpi_notsent_bytes) + sizeof(ti.tcpi_notsent_bytes) || ti.tcpi_unacked != 0 ||
        ti.tcpi_notsent_bytes != 0) {
        if (ioctl(fd, SIOCOUTQ, &q) != 0 || q < 0)
            return st;
    }
    st.known = 1;
    st.acked = ti.tcpi_bytes_acked;
    st.unacked = (uint64_t)q;
    return st;
}

/* SO_LINGER 0 on fd: its close sends RST (what it had not delivered never will be) */
static int closes_abortively(int fd)
{
    struct linger lg;
    socklen_t len = sizeof(lg);

    return getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &len) == 0 && lg.l_onoff && lg.l_linger == 0;
}

/* The plaintext stream position up to which the client acknowledged. */
static uint64_t acked_position(const delivery_t *dl, const tcp_state_t *st)
{
    if (!dl->tls)
        return st->acked;
    return st->acked > dl->handshake ? gw_delivery_plaintext(st->acked - dl->handshake, 1) : 0;
}

/* Bills the held bytes that lie before plaintext position `pos`, oldest
 * first (SIZE_MAX-like UINT64_MAX: all of them). */
static void bill_until(delivery_t *dl, uint64_t pos)
{
    gw_deliveries_t *d = dl->owner;
    size_t done = 0;

    for (; done != dl->num_segments; ++done) {
        segment_t *seg = dl->segments + done;
        uint64_t start = seg->end > seg->bytes ? seg->end - seg->bytes : 0, take;
        if (pos <= start)
            break;
        take = seg->end <= pos ? seg->bytes : pos - start;
        d->bill(d->bill_data, seg->sandbox_id, seg->no_activity, take);
        seg->bytes -= take;
        dl->held -= take;
        d->held -= take;
        if (seg->bytes != 0)
            break;
    }
    if (done != 0) {
        memmove(dl->segments, dl->segments + done, (dl->num_segments - done) * sizeof(dl->segments[0]));
        dl->num_segments -= done;
    }
}

/* Bills what the client has acknowledged. */
static void settle(delivery_t *dl)
{
    tcp_state_t st = tcp_state(dl->fd);
    bill_until(dl, st.known ? acked_position(dl, &st) : UINT64_MAX);
}

static void free_delivery(gw_deliveries_t *d, delivery_t *dl)
{
    if (dl->sock != NULL) {
        khiter_t it = kh_get(gw_delivery, d->by_sock, (uint64_t)(uintptr_t)dl->sock);
        if (it != kh_end(d->by_sock))
            kh_del(gw_delivery, d->by_sock, it);
    } else {
        h2o_linklist_unlink(&dl->lingering);
        --d->num_lingering;
        close(dl->fd);
    }
    if (gw_timer_is_linked(&dl->check))
        gw_timer_unlink(&dl->check);
    d->held -= dl->held;
    free(dl);
}

/* Settles a closing or lingering connection. Returns 1 when it is over
 * (what is still held is then never billed), 0 when bytes are still in
 * flight toward a client that may yet take them. */
static int settle_end(delivery_t *dl, int last_chance)
{
    tcp_state_t st = tcp_state(dl->fd);

    if (!st.known || st.unacked == 0) {
        bill_until(dl, UINT64_MAX);
        return 1;
    }
    bill_until(dl, acked_position(dl, &st));
    return st.reset || last_chance || closes_abortively(dl->fd);
}

static void on_check(gw_timer_t *entry)
{
    delivery_t *dl = H2O_STRUCT_FROM_MEMBER(delivery_t, check, entry);
    gw_deliveries_t *d = dl->owner;

    if (dl->sock == NULL) {
        if (settle_end(dl, --dl->linger_checks == 0)) {
            free_delivery(d, dl);
            return;
        }
    } else {
        settle(dl);
        if (dl->held == 0)
            return;
    }
    gw_timer_link(d->loop, d->check_timeout, &dl->check);
}

gw_deliveries_t *gw_deliveries_new(h2o_loop_t *loop, uint64_t check_ms, gw_delivery_bill_cb cb, void *data)
{
    gw_deliveries_t *d = h2o_mem_alloc(sizeof(*d));

    memset(d, 0, sizeof(*d));
    d->loop = loop;
    d->bill = cb;
    d->bill_data = data;
    if ((d->check_enabled = check_ms != 0))
        d->check_timeout = gw_loop_timeout_acquire(loop, check_ms);
    if ((d->by_sock = kh_init(gw_delivery)) == NULL)
        h2o_fatal("no memory");
    h2o_linklist_init_anchor(&d->lingering);
    return d;
}

void gw_deliveries_free(gw_deliveries_t *d)
{
    delivery_t *dl;

    if (d == NULL)
        return;
    gw_deliveries_settle_all(d);
    kh_foreach_value(d->by_sock, dl, {
        if (gw_timer_is_linked(&dl->check))
            gw_timer_unlink(&dl->check);
        free(dl);
    });
    kh_destroy(gw_delivery, d->by_sock);
    while (!h2o_linklist_is_empty(&d->lingering))
        free_delivery(d, H2O_STRUCT_FROM_MEMBER(delivery_t, lingering, d->lingering.next));
    if (d->check_enabled)
        gw_loop_timeout_release(d->loop, d->check_timeout);
    free(d);
}

static delivery_t *new_delivery(gw_deliveries_t *d, h2o_socket_t *sock)
{
    delivery_t *dl = h2o_mem_alloc(sizeof(*dl));

    memset(dl, 0, sizeof(*dl));
    dl->owner = d;
    dl->sock = sock;
    dl->fd = h2o_socket_get_fd(sock);
    dl->tls = sock->ssl != NULL;
    dl->check.cb = on_check;
    if (dl->tls) {
        /* no write is in flight here (a send was just written, or is about
         * to be handed over): the wire bytes written so far are the
         * handshake and the plaintext so far in records, counted with the
         * least overhead (so the handshake is never under-estimated, and
         * acknowledged plaintext never over-estimated) */
        tcp_state_t st = tcp_state(dl->fd);
        uint64_t wire = st.acked + st.unacked,
                 records = sock->bytes_written + sock->bytes_written / TLS_RECORD_PAYLOAD * TLS_MIN_RECORD_OVERHEAD;
        dl->handshake = wire > records ? wire - records : 0;
    }
    return dl;
}

void gw_deliveries_hold(gw_deliveries_t *d, h2o_socket_t *sock, const char *sandbox_id, int no_activity, uint64_t bytes,
                        int written)
{
    khiter_t it;
    delivery_t *dl;
    segment_t *last;
    uint64_t end;
    int ret;

    if (bytes == 0)
        return;
    it = kh_put(gw_delivery, d->by_sock, (uint64_t)(uintptr_t)sock, &ret);
    /* khash reports out of memory; h2o's policy is to abort */
    if (ret < 0)
        h2o_fatal("no memory");
    if (ret != 0)
        kh_val(d->by_sock, it) = new_delivery(d, sock);
    dl = kh_val(d->by_sock, it);
    /* written: everything handed to the socket so far ends no later than
     * bytes_written; else the bytes are about to be handed over */
    end = sock->bytes_written + (written ? 0 : bytes);

    no_activity = no_activity != 0;
    last = dl->num_segments != 0 ? dl->segments + dl->num_segments - 1 : NULL;
    if (last == NULL || last->no_activity != no_activity || strcmp(last->sandbox_id, sandbox_id) != 0) {
        if (dl->num_segments == MAX_SEGMENTS) {
            settle(dl);
            if (dl->num_segments == MAX_SEGMENTS)
                bill_until(dl, dl->segments[0].end);
        }
        last = dl->segments + dl->num_segments++;
        /* sandbox ids are at most GW_SANDBOX_ID_MAX characters (routing/host.h) */
        size_t id_len = strnlen(sandbox_id, GW_SANDBOX_ID_MAX);
        memcpy(last->sandbox_id, sandbox_id, id_len);
        last->sandbox_id[id_len] = '\0';
        last->no_activity = no_activity;
        last->bytes = 0;
    }
    last->bytes += bytes;
    if (end > last->end)
        last->end = end;
    dl->held += bytes;
    d->held += bytes;
    if (d->check_enabled && !gw_timer_is_linked(&dl->check))
        gw_timer_link(d->loop, d->check_timeout, &dl->check);
}

void gw_deliveries_close(gw_deliveries_t *d, h2o_socket_t *sock)
{
    khiter_t it = kh_get(gw_delivery, d->by_sock, (uint64_t)(uintptr_t)sock);
    delivery_t *dl;
    int dup_fd;

    if (it == kh_end(d->by_sock))
        return;
    dl = kh_val(d->by_sock, it);
    if (settle_end(dl, 0) || !d->check_enabled) {
        free_delivery(d, dl);
        return;
    }
    /* A graceful close with bytes in flight: whether they arrive is not
     * known yet. The kernel keeps the connection while a duplicate of the
     * descriptor is open; the FIN that h2o's close would send goes after the
     * data now, as it would have. */
    if (d->num_lingering == MAX_LINGERING || (dup_fd = dup(dl->fd)) == -1) {
        bill_until(dl, UINT64_MAX);
        free_delivery(d, dl);
        return;
    }
    shutdown(dup_fd, SHUT_WR);
    kh_del(gw_delivery, d->by_sock, it);
    dl->sock = NULL;
    dl->fd = dup_fd;
    dl->linger_checks = LINGER_CHECKS;
    h2o_linklist_insert(&d->lingering, &dl->lingering);
    ++d->num_lingering;
    if (!gw_timer_is_linked(&dl->check))
        gw_timer_link(d->loop, d->check_timeout, &dl->check);
}

void gw_deliveries_settle_all(gw_deliveries_t *d)
{
    delivery_t *dl;
    h2o_linklist_t *node;

    kh_foreach_value(d->by_sock, dl, { settle(dl); });
    for (node = d->lingering.next; node != &d->lingering; node = node->next)
        settle(H2O_STRUCT_FROM_MEMBER(delivery_t, lingering, node));
}

uint64_t gw_deliveries_held(const gw_deliveries_t *d)
{
    return d->held;
}
