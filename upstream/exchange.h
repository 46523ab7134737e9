/*
 * Inside the proxy (not for other modules): the per-worker proxy and the
 * per-request exchange, shared by proxy.c (connecting, the request, the
 * response head), response.c (streaming the body to the client) and
 * websocket.c (the hand-over to a tunnel).
 */
#ifndef GW_UPSTREAM_EXCHANGE_H
#define GW_UPSTREAM_EXCHANGE_H

#include <stdatomic.h>
#include <h2o.h>
#include "common/engine.h"
#include "common/counter.h"
#include "errors/cut.h"
#include "errors/errors.h"
#include "upstream/delivery.h"
#include "upstream/h2c.h"
#include "upstream/held.h"
#include "upstream/http1_head.h"
#include "upstream/opt_timeout.h"
#include "upstream/request_body.h"
#include "upstream/splice.h"
#include "upstream/sse_watch.h"
#include "upstream/proxy.h"
#include "upstream/upstream_pool.h"

struct st_gw_proxy_t {
    h2o_context_t *ctx;
    gw_proxy_conf_t conf;
    gw_upstream_pool_t *pool;
    gw_opt_timeout_t connect_timeout;
    gw_opt_timeout_t first_byte_timeout;
    gw_opt_timeout_t io_timeout; /* upstream.idle_timeout_ms, while a body is read */
    gw_opt_timeout_t websocket_timeout;
    gw_opt_timeout_t websocket_ping;       /* upstream.websocket_ping_interval_ms: a tunnel silent this long pings its client */
    gw_opt_timeout_t client_stall_timeout; /* limits.client_stall_timeout_ms, while an h2o_send waits for proceed */
    gw_opt_timeout_t event_stream_timeout; /* upstream.event_stream_idle_timeout_ms: io_timeout of streamed media types */
    gw_opt_timeout_t port_tick;            /* 1 s: checks the silence of exchanges with a timeout:<n> (deadline.c) */
    gw_opt_timeout_t watch_delay;          /* an HTTP/1 exchange still going after this is watched for its client leaving */
    gw_hangup_t *hangup;                   /* NULL: clients are not watched */
    gw_opt_timeout_t tunnel_close_wait;    /* GW_TUNNEL_CLOSE_WAIT_MS: a closing tunnel's wait for its peers (never a
                                              tunnel's own gw_timeout_t: the callback that frees it runs inside it) */
    int rcvbuf;                            /* SO_RCVBUF of upstream sockets */
    size_t read_pause_at;                  /* response bytes held at which the upstream is no longer read */
    h2o_linklist_t websockets;             /* of websocket_t (websocket.c) */
    h2o_linklist_t tcp_tunnels;            /* of tcp_tunnel_t (tcp_tunnel.c) */
    h2o_linklist_t orphans;                /* of orphan_t (orphan.c): requests their clients left, still at the app */
    /* memory budgets: what every response of this worker holds, and per
     * client connection; the exchanges with a send in flight toward the
     * client, the longest-waiting first (the first reset over a budget) */
    gw_held_t *held;             /* per client connection keyed by its h2o_conn_t * */
    h2o_linklist_t waiting;      /* of exchange_t.waiting */
    h2o_linklist_t exchanges;    /* of exchange_t.link: every exchange not yet disposed (the drain's end cuts them) */
    gw_deliveries_t *deliveries; /* egress held per client connection until delivered */
    gw_proxy_bytes_t total;
    gw_worker_meter_t *meter;      /* NULL: bytes are not billed */
    gw_proxy_counters_t *counters; /* NULL: not counted */
    gw_revocation_t *revocation;   /* NULL: exchanges and tunnels are not revocable */
    gw_h2c_t *h2c;                 /* the HTTP/2 leg to proto:<n> = h2c ports (upstream/h2c.h) */
};

/* How long a tunnel that sent its Close waits for its peers to close. */
#define GW_TUNNEL_CLOSE_WAIT_MS 2000

#define GW_PROXY_COUNT(p, field, n)                                                                                                \
    do {                                                                                                                           \
        if ((p)->counters != NULL)                                                                                                 \
            GW_COUNTER_ADD(&(p)->counters->field, (n));                                                                            \
    } while (0)

typedef enum en_gw_exchange_state_t {
    GW_EX_CONNECTING = 0, /* a fresh connection is being established */
    GW_EX_AWAIT_HEAD,     /* the request is being written and/or the response head read */
    GW_EX_BODY,           /* the response has started; the body streams */
    GW_EX_OVER            /* answered, failed, upgraded, or the client went away */
} gw_exchange_state_t;

/* Per-request state, in req->pool (h2o_mem_alloc_shared): under HTTP/2 the
 * request may be disposed at any moment, and dispose detaches everything. */
typedef struct st_gw_exchange_t {
    h2o_generator_t super; /* first: h2o hands it back to proceed/stop */
    gw_proxy_t *proxy;
    h2o_req_t *req;
    gw_exchange_state_t state;

    /* the target, copied into req->pool */
    char *sandbox_id;
    h2o_iovec_t lifecycle;
    uint16_t port;
    gw_netaddr_t addr;
    h2o_iovec_t path;
    uint16_t client_port;   /* 0: unknown, ask the socket */
    gw_address_view_t view; /* the app's view of its address (localhost mode), and the Set-Cookie rules */

    unsigned is_head : 1;
    unsigned is_idempotent : 1;
    unsigned is_websocket : 1;
    unsigned is_tcp : 1;  /* a TCP tunnel's handshake: connect, then 101 (tcp_tunnel.c) */
    unsigned rfb : 2;     /* with is_tcp: a desktop's WebSocket (gw_proxy_target_t.rfb) */
    unsigned reused : 1;  /* sock came from the pool */
    unsigned retried : 1; /* one retry on a fresh connection has been made */
    unsigned cors_preflight : 1;
    unsigned localhost : 1;       /* the app sees itself at http://localhost:<port> */
    unsigned no_activity : 1;     /* X-Lizard-No-Activity: reported with its bytes */
    unsigned cut : 1;             /* gw_exchange_reset ran: what it still holds goes when h2o closes the connection */
    unsigned event_stream : 1;    /* the response is of a streamed media type: its silences are event_stream_timeout's */
    unsigned sse_watched : 1;     /* its events make the sandbox active, its comments do not (sse_watch.h) */
    gw_conn_limit_t *slot;        /* the sandbox's connection slot, given back at dispose; NULL: none */
    gw_conn_limit_t *client_slot; /* the client address's slot (client_addr), given back with slot; NULL: none */
    gw_conn_limit_t *viewer_slot; /* a desktop viewer's slot of the sandbox, given back with slot; NULL: none */
    char *client_addr;
    size_t slot_worker;       /* the worker index slot and client_slot were taken with */
    gw_revocable_t revocable; /* grant.record retained; NULL: not revocable */

    h2o_socket_t *sock; /* NULL once released, closed or handed over */
    gw_timer_t timer;
    /* the port's timeout:<n> (0: the proxy's timeouts): ex->timer ticks
     * every second (deadline.c) and compares the silence with it */
    uint32_t timeout_ms;
    uint64_t silent_since;    /* when the app last said something (h2o_now) */
    gw_timer_cb silence_cb;   /* what the silence limit calls, with &ex->timer */
    gw_timer_t watch_timer;   /* linked until the HTTP/1 client is watched (deadline.c) */
    gw_hangup_watch_t hangup; /* the HTTP/1 client watched for leaving */
    gw_timer_t stall_timer;   /* linked while a send toward the client is in flight */
    h2o_linklist_t waiting;   /* in proxy->waiting while a send toward the client is in flight */
    h2o_linklist_t link;      /* in proxy->exchanges until disposed */
    size_t held;              /* response bytes of this exchange counted in proxy->held */

    struct {
        h2o_iovec_t head;
        size_t body_written;
        size_t body_inflight;
        unsigned head_written : 1;
        unsigned done : 1;      /* everything written, or the write failed */
        unsigned failed : 1;    /* a write failed: the connection is not reusable */
        unsigned streaming : 1; /* the body streams (request_body.c): body_written counts what the app has */
        unsigned chunked : 1;   /* streaming without a declared length: chunked to the app */
        unsigned body_end : 1;  /* h2o handed over the body's last chunk */
        unsigned writing : 1;   /* a chunk is being written */
        unsigned in_hand : 1;   /* h2o handed a chunk not proceeded yet (request_body.h) */
        h2o_buffer_t *chunk;    /* streaming HTTP/2: a copy of the chunk being written (h2o's buffer may move meanwhile) */
        char size_line[sizeof("ffffffffffffffff\r\n")]; /* chunked: the size line of the chunk being written */
    } up_req;

    struct {
        unsigned got_byte : 1; /* any byte of a response arrived on this connection */
        unsigned read_paused : 1;
        unsigned body_error : 1;
        unsigned sending : 1; /* an h2o_send is in flight; waiting for proceed */
        unsigned started : 1; /* h2o_send has been called once (the head is out) */
        int first_decoded;    /* gw_exchange_decode_first's gw_http1_body_decode result */
        size_t unbilled;      /* bytes of the h2o_send in flight: billed when h2o reports them written (proceed) */
        gw_http1_body_t body; /* framing, and whether the connection may serve another request afterwards */
    } res;

    /* body bytes not yet handed to h2o once the upstream is released */
    h2o_buffer_t *rest;
    h2o_doublebuffer_t sending;
    gw_splice_t splice; /* splice.c: the body moved without copies */
    gw_sse_watch_t sse; /* sse_watched: where the event stream's last bytes left its lines */
} gw_exchange_t;

/* proxy.c */
void gw_exchange_clear_timer(gw_exchange_t *ex);
void gw_exchange_set_timer(gw_exchange_t *ex, gw_opt_timeout_t *t, gw_timer_cb cb);
/* Bills bytes to the exchange's sandbox (metering, /metrics). */
void gw_proxy_add_bytes(gw_proxy_t *p, const char *sandbox_id, int no_activity, uint64_t egress, uint64_t ingress);
/* Egress written (`written`) or about to be handed to h2o toward the client
 * socket `client`: billed once the client has it (delivery.h); client NULL:
 * billed now. */
void gw_proxy_add_egress(gw_proxy_t *p, h2o_socket_t *client, const char *sandbox_id, int no_activity, uint64_t egress,
                         int written);
/* The client connection's socket, or NULL. */
h2o_socket_t *gw_exchange_client_socket(gw_exchange_t *ex);
/* Upper bound of the HTTP/1 head h2o writes for the response (metering). */
size_t gw_exchange_response_head_size(h2o_req_t *req);
/* Gives back the sandbox's, the client address's and the viewer's slots, once (tunnel_hold.c). */
void gw_exchange_release_slots(gw_exchange_t *ex);
/* Closes the upstream connection, if any, and stops the timer. */
void gw_exchange_detach_upstream(gw_exchange_t *ex);
/* Answers with a gateway error (and ends a body still streaming). Last use of ex. */
void gw_exchange_fail(gw_exchange_t *ex, gw_error_code_t code, const char *detail);
/* No response head within the silence limit: 504 upstream_timeout. */
void gw_exchange_on_first_byte_timeout(gw_timer_t *entry);

/* deadline.c */
typedef enum en_gw_silence_t {
    GW_SILENCE_FIRST_BYTE = 0, /* before the response head */
    GW_SILENCE_BODY            /* between body bytes */
} gw_silence_t;
/* The app said something (or is about to be asked): its next silence ends
 * at the limit of `which` (the port's timeout:<n>, else the proxy's; the
 * event-stream limit for a streamed body), which calls cb with &ex->timer.
 * Replaces what ex->timer was set to. */
static inline void gw_exchange_set_silence(gw_exchange_t *ex, gw_silence_t which, gw_timer_cb cb);
void gw_exchange_set_port_silence(gw_exchange_t *ex, gw_timer_cb cb);
/* The limit of `which` that fires for ex, as a sentence for the 504's
 * message (into buf, NUL-terminated). */
void gw_exchange_silence_detail(gw_exchange_t *ex, gw_silence_t which, char *buf, size_t bufsize);
/* The same for a port with timeout_ms (0: none) on proxy p (the HTTP/2 leg's calls, upstream/h2c.h). */
void gw_proxy_silence_detail(const gw_proxy_t *p, uint32_t timeout_ms, uint16_t port, gw_silence_t which, char *buf,
                             size_t bufsize);
/* Non-zero when the response's Content-Type is a streamed media type
 * (docs/long-calls.md, Long calls): 2 for text/event-stream (server-sent events, whose
 * comment lines are keepalives: sse_watch.h), 1 for the others
 * (application/x-ndjson, ...), 0 otherwise. */
int gw_exchange_is_streamed(h2o_req_t *req);
/* Starts the watch for an HTTP/1 client that leaves (after the proxy's
 * watch_delay; a no-op for HTTP/2, tunnels, or without a hang-up set). */
void gw_exchange_watch_client(gw_exchange_t *ex);
/* Stops that watch (idempotent). */
void gw_exchange_unwatch_client(gw_exchange_t *ex);

static inline void gw_exchange_set_silence(gw_exchange_t *ex, gw_silence_t which, gw_timer_cb cb)
{
    if (which == GW_SILENCE_BODY && ex->event_stream) {
        gw_exchange_set_timer(ex, &ex->proxy->event_stream_timeout, cb);
    } else if (ex->timeout_ms != 0) {
        gw_exchange_set_port_silence(ex, cb);
    } else {
        gw_exchange_set_timer(ex, which == GW_SILENCE_FIRST_BYTE ? &ex->proxy->first_byte_timeout : &ex->proxy->io_timeout, cb);
    }
}

/* response.c */
/* Decodes in place the body bytes that came with the head (the upstream
 * input past its first head_size bytes, which stay as they are), before the
 * response starts. Returns 0, or -1 when their framing is broken. */
int gw_exchange_decode_first(gw_exchange_t *ex, size_t head_size);
/* The head is in req->res and consumed from the upstream input: starts the
 * response and streams the body, whose first bytes (decoded by
 * gw_exchange_decode_first unless no_body) may already be in that input. */
void gw_exchange_start_body(gw_exchange_t *ex, int no_body);
/* Brings ex->held (and the worker's and the connection's sums) up to date
 * with the response bytes the exchange holds now. */
void gw_exchange_account(gw_exchange_t *ex);
/* No send toward the client is in flight any more: unlinks the stall timer and the waiting list. */
void gw_exchange_stop_waiting(gw_exchange_t *ex);
/* A response being streamed is cut for `reason` (a publish revoked it, the
 * drain ended): as after an upstream failure, and what is held of the body
 * is not sent either. */
void gw_exchange_cut(gw_exchange_t *ex, gw_cut_reason_t reason);
/* A response its client does not take, or whose HTTP/1 client left: the
 * upstream connection and the slots are given back now, what is held is
 * dropped, and the response is cut (HTTP/2: RST_STREAM INTERNAL_ERROR;
 * HTTP/1: the connection is reset). `reason` goes to the access log
 * (GW_CUT_NONE: the client left, nothing was cut). Last use of ex. */
void gw_exchange_reset(gw_exchange_t *ex, gw_cut_reason_t reason);
/* The client's side of a cut (CONTRACT.md, Long calls: visible as cut): HTTP/2
 * RST_STREAM(INTERNAL_ERROR); HTTP/1 the connection shut without linger, an
 * error send when none is in flight (no_send) to end the response, and a
 * body still arriving closed (end_body). The HTTP/1.1 exchange and the h2c
 * call (h2c.c) both end this way. */
void gw_response_cut_client(h2o_req_t *req, int no_send, int end_body);
void gw_exchange_on_client_stall(gw_timer_t *entry);
void gw_exchange_on_proceed(h2o_generator_t *generator, h2o_req_t *req);
void gw_exchange_on_stop(h2o_generator_t *generator, h2o_req_t *req);
/* The body is over at the upstream (complete, or not): its connection goes
 * back to the pool when it can serve another request, else it is closed. */
void gw_exchange_release_upstream(gw_exchange_t *ex, int complete);
/* Hands what is buffered to h2o; with the upstream released and nothing
 * left, the final send (FINAL, or ERROR after body_error), which may
 * dispose the request: then it is the caller's last use of ex. */
void gw_exchange_send(gw_exchange_t *ex);

/* splice.c */
/* After h2o_start_response: whether the body may be spliced (an HTTP/1.1
 * client on a plain listener, Content-Length, no ostream filter, at least
 * a few hundred KiB, upstream.splice on). */
int gw_splice_eligible(gw_exchange_t *ex);
/* At proceed, with splice.wanted: when everything buffered has been written
 * to the client, the body moves by splice from now on; returns 1 when it
 * does (the exchange is splice.c's then), 0 to go on the buffered way
 * (splice.wanted is 0 when it never will). */
int gw_splice_try(gw_exchange_t *ex);
/* Response bytes the pipe holds (the buffer budgets count them). */
size_t gw_splice_held(const gw_exchange_t *ex);
/* Closes the pipe and the client watch, if any; the upstream socket is
 * polled the normal way again. Idempotent. */
void gw_splice_stop(gw_exchange_t *ex);

/* websocket.c */
/* The app switched protocols: answer 101 to the client and tunnel. Last use
 * of ex. */
void gw_exchange_upgrade(gw_exchange_t *ex);
/* Closes every WebSocket tunnel of the proxy. */
void gw_proxy_close_websockets(gw_proxy_t *p);

/* orphan.c */
/* The request's pool is being disposed (its client left: an HTTP/2 reset by
 * either side, a closed connection) while the app has the whole request and
 * has not begun to answer: the upstream connection and the client's and the
 * sandbox's slots move to an orphan, which shuts the connection for writing
 * (the app reads EOF, as after a close, and can stop the work) and gives the
 * slots back when the app answers (any byte), closes, or after
 * upstream.first_byte_timeout_ms; never pooled. Returns 1 when it did (ex
 * holds no socket or slot any more), 0 when the exchange is not such a one
 * (the caller closes as before). */
int gw_orphan_adopt(gw_exchange_t *ex);
/* Closes the orphans of sandbox_id whose lifecycle is not current_lifecycle
 * (NULL: any), or every orphan (sandbox_id NULL), giving their slots back. */
void gw_orphans_close(gw_proxy_t *p, const char *sandbox_id, const char *current_lifecycle);

/* tcp_tunnel.c */
/* The sandbox accepted the connection of a TCP tunnel's handshake: answer
 * 101 and relay. Last use of ex. */
void gw_exchange_tcp_open(gw_exchange_t *ex);
/* Closes every TCP tunnel of the proxy. */
void gw_proxy_close_tcp_tunnels(gw_proxy_t *p);

#endif
