/*
 * Inside the HTTP/2 leg (upstream/h2c.h; not for other modules): the
 * per-worker state, the pools and the calls, shared by h2c.c (pools, a
 * call's start and end, revocation), h2c_request.c (the request into h2o's
 * HTTP/2 client) and h2c_response.c (the response to the client).
 */
#ifndef GW_UPSTREAM_H2C_CALL_H
#define GW_UPSTREAM_H2C_CALL_H

#include <h2o.h>
#include <h2o/httpclient.h>
#include "common/engine.h"
#include "common/hashtab.h"
#include "errors/cut.h"
#include "errors/errors.h"
#include "upstream/exchange.h"
#include "upstream/h2c.h"
#include "upstream/request_body.h"

#define DETAIL_CLOSED "It accepted the connection but closed it without answering."
#define DETAIL_CONNECT_TIMEOUT "Connecting to it timed out."

typedef struct st_h2c_pool_t h2c_pool_t;

struct st_gw_h2c_t {
    gw_proxy_t *proxy;
    h2o_httpclient_ctx_t ctx;
    gw_hashtab_t pools;     /* of h2c_pool_t by key */
    size_t sweep_at;        /* pools at which those without a connection or a call are freed (pool_get) */
    h2o_linklist_t waiting; /* of call_t.waiting: calls with a send toward their client in flight, the longest first */
    h2o_linklist_t calls;   /* of call_t.link: every call not yet disposed */
};

/* One (sandbox, lifecycle, port, addr): its connections, and the calls that
 * wait for the first one to be up (so that a burst shares it). */
struct st_h2c_pool_t {
    gw_hashtab_node_t node;
    gw_h2c_t *h2c;
    char *sandbox_id;
    char *lifecycle;
    h2o_socketpool_t sockpool;
    h2o_httpclient_connection_pool_t connpool;
    int connecting;          /* a call is connecting the pool's first connection */
    size_t num_connecting;   /* calls whose connection is being made (h2o's connect request uses sockpool) */
    h2o_linklist_t pending;  /* of call_t.pending: waiting for that connection */
    gw_delay_timer_t wakeup; /* starts the pending calls, out of the client's callback */
    size_t key_len;
    char key[];
};

typedef enum en_call_state_t { CALL_CONNECTING = 0, CALL_AWAIT_HEAD, CALL_BODY, CALL_OVER } call_state_t;

typedef struct st_call_t {
    h2o_generator_t super; /* first */
    gw_h2c_t *h2c;
    h2o_req_t *req;
    h2c_pool_t *pool; /* while the call waits in pool->pending or its connection is made; then NULL */
    h2o_linklist_t pending;
    h2o_linklist_t link;
    h2o_httpclient_t *client; /* NULL once detached (h2o ends the stream itself, or it was cancelled) */
    call_state_t state;
    char *sandbox_id;
    uint16_t port;
    uint16_t client_port;
    h2o_iovec_t path;
    h2o_iovec_t authority; /* :authority sent: the client's, or localhost:<port> */
    gw_netaddr_t addr;
    h2o_iovec_t lifecycle; /* with the sandbox, port and addr: the pool's key */
    char *client_addr;
    uint32_t timeout_ms;
    gw_conn_limit_t *slot;
    gw_conn_limit_t *client_slot;
    size_t slot_worker;
    gw_revocable_t revocable;
    gw_address_view_t view;
    gw_delay_timer_t silence;
    gw_timer_t stall;            /* linked while a send waits for the client (limits.client_stall_timeout_ms) */
    gw_delay_timer_t over_limit; /* a streaming body passed limits.max_request_body_bytes: answered out of write_req */
    uint64_t body_sent;          /* bytes of a streaming body handed to the HTTP/2 client */
    gw_timer_t watch_timer;      /* linked until an HTTP/1 client is watched for leaving (the proxy's watch_delay) */
    gw_hangup_watch_t hangup;    /* that watch: a client that leaves cancels the call at once */
    h2o_doublebuffer_t sending;
    h2o_buffer_t *last;     /* the body's rest once the upstream is done */
    size_t unbilled;        /* bytes of the send in flight, billed at proceed */
    size_t held;            /* response bytes of this call counted in the proxy's ledger (upstream/held.h) */
    h2o_linklist_t waiting; /* in h2c->waiting while a send toward the client is in flight */
    unsigned no_activity : 1;
    unsigned localhost : 1;
    unsigned opener : 1;   /* connects its pool's first connection */
    unsigned streamed : 1; /* a streamed media type: silences are event_stream_idle_timeout_ms's */
    unsigned sse : 1;      /* text/event-stream: a silence ends it cleanly */
    unsigned in_send : 1;  /* an h2o_send is in flight */
    unsigned started : 1;  /* the head is out */
    unsigned res_done : 1; /* the app ended its response */
    unsigned req_done : 1; /* the request went out whole */
    unsigned body_error : 1;
    unsigned in_hand : 1;      /* h2o handed body bytes (or had them at on_req) that were not proceeded yet */
    unsigned body_streams : 1; /* the body was still arriving at forward: its bytes are counted as they go */
    unsigned retried : 1;      /* started again after the app refused its stream (REFUSED_STREAM, GOAWAY) */
} call_t;

/* h2c.c */
/* The call's connection is made, failed, or its connect cancelled: it leaves its pool (c->pool NULL), and an opener
 * lets the calls waiting for it start. */
void gw_h2c_connect_done(call_t *c);
/* Forgets the client (its callbacks find no call any more): h2o ends the stream itself. */
void gw_h2c_detach_client(call_t *c);
/* Cancels the upstream stream (RST_STREAM CANCEL: the app sees the call cancelled), stops the silence timer, leaves
 * the pool's waiting list. Idempotent. */
void gw_h2c_close_upstream(call_t *c);
/* The app refused the call's stream before it processed it (REFUSED_STREAM, or past a GOAWAY's last stream id: RFC 9113
 * 8.7, safe to retry): the call starts again once, on a connection of its pool other than the one going away, when its
 * request went whole. Returns 0 when it does (the client detached before), -1 when it may not. */
int gw_h2c_retry(call_t *c);
/* Gives the sandbox's and the client address's slots back, once. */
void gw_h2c_release_slots(call_t *c);
/* Answers with a gateway error (gRPC-shaped for a gRPC request); addr not NULL: a port_not_open over loopback says so.
 * Last use of c. */
void gw_h2c_fail_why(call_t *c, gw_error_code_t code, gw_error_why_t why, const char *detail, const gw_netaddr_t *addr);
void gw_h2c_fail(call_t *c, gw_error_code_t code, const char *detail);
/* The response has started: the client's stream is reset (HTTP/2 RST_STREAM INTERNAL_ERROR; HTTP/1 the connection),
 * the upstream stream cancelled, the slots given back, `reason` noted. Last use of c. */
void gw_h2c_cut(call_t *c, gw_cut_reason_t reason);
/* Before the head: HTTP/2 resets the stream, HTTP/1 gets an empty answer on a socket shut first. Last use of c. */
void gw_h2c_end_before_head(call_t *c, int status, const char *reason);

/* h2c_request.c */
/* The timer callback of c->over_limit: 413 body_too_large before the response head, the cut body_too_large after. */
void gw_h2c_on_over_limit(gw_timer_t *entry);
/* h2o_httpclient_connect's callback: the request's head and body (whole, or streamed through req->write_req). */
h2o_httpclient_head_cb gw_h2c_on_connect(h2o_httpclient_t *client, const char *errstr, h2o_iovec_t *method, h2o_url_t *url,
                                         const h2o_header_t **headers, size_t *num_headers, h2o_iovec_t *body,
                                         h2o_httpclient_proceed_req_cb *proceed_req_cb, h2o_httpclient_properties_t *props,
                                         h2o_url_t *origin);

/* h2c_response.c */
/* Bytes of headers as HTTP/1.1 would write them (metering). */
size_t gw_h2c_headers_size(const h2o_header_t *h, size_t n);
/* Hands what is buffered to h2o; once the upstream is done and nothing is left, the final send, which may dispose the
 * request: then it is the caller's last use of c. */
void gw_h2c_send(call_t *c);
/* The app said something (or is about to be asked): its next silence ends at the phase's limit. */
void gw_h2c_arm_silence(call_t *c);
/* The silence timer's callback (c->silence): a 504 before the head, a cut (or an event stream's clean end) after. */
void gw_h2c_on_silence(gw_timer_t *entry);
/* Brings c->held (and the worker's and the client connection's sums in the proxy's ledger) up to date with what the
 * call holds now: its stream's buffer, the send in flight, the rest after the app's end. */
void gw_h2c_account(call_t *c);
/* The client took nothing of the send in flight for limits.client_stall_timeout_ms: the call is cut. */
void gw_h2c_on_client_stall(gw_timer_t *entry);
void gw_h2c_on_proceed(h2o_generator_t *generator, h2o_req_t *req);
void gw_h2c_on_stop(h2o_generator_t *generator, h2o_req_t *req);
/* The response head (or the error that came instead). */
h2o_httpclient_body_cb gw_h2c_on_head(h2o_httpclient_t *client, const char *errstr, h2o_httpclient_on_head_t *args);

#endif
