/*
 * HTTP/2 with prior knowledge to a sandbox port whose record says
 * proto:<n> = h2c (gRPC, and any other HTTP/2 app): the request goes over
 * h2o's HTTP/2 client (h2o_httpclient, force_cleartext_http2), one
 * multiplexed connection per (sandbox, lifecycle, port, addr) per worker,
 * a new one after the app's GOAWAY. The response streams back as it
 * arrives (the client's reading paces the app through the stream's flow
 * control window, limits.response_buffer_bytes), its trailers
 * (grpc-status, grpc-message) included. The same rules as the HTTP/1.1 leg
 * (upstream/proxy.h): allowed networks, X-Forwarded-*, X-Lizard-* dropped,
 * host modes, slots, metering by acknowledgement, revocation, the silence
 * limits (a gRPC response is a streamed media type: docs/long-calls.md),
 * drain cuts. docs/grpc.md says what a user sees.
 */
#ifndef GW_UPSTREAM_H2C_H
#define GW_UPSTREAM_H2C_H

#include <h2o.h>
#include "upstream/proxy.h"

typedef struct st_gw_h2c_t gw_h2c_t;

/* The HTTP/2 leg of proxy `p` (its worker's loop, configuration, meter,
 * revocation and counters are read through p when used). */
gw_h2c_t *gw_h2c_new(gw_proxy_t *p);
/* Cancels the calls still open (there should be none: requests are
 * disposed first), closes the connections, frees. NULL is a no-op. */
void gw_h2c_free(gw_h2c_t *h);

/* For a target with h2c set, any request but a WebSocket's or a TCP tunnel's handshake (those stay HTTP/1.1): forwards
 * it over p's HTTP/2 leg (gw_h2c_forward) and returns 1; else 0 (then gw_proxy_forward's). */
int gw_h2c_take(gw_proxy_t *p, h2o_req_t *req, const gw_proxy_target_t *target);

/* Forwards req to an h2c port and answers it (gw_proxy_forward's contract:
 * the target's strings are copied, its slots are the call's and given back
 * when the request is disposed). The callback contracts: the request may be
 * disposed at any time (HTTP/2 client reset, connection closed), which
 * cancels the upstream stream (RST_STREAM CANCEL: the app sees the call
 * cancelled) at once. */
void gw_h2c_forward(gw_h2c_t *h, h2o_req_t *req, const gw_proxy_target_t *target);

/* Closes the connections of sandbox_id whose lifecycle is not
 * current_lifecycle (NULL: all of the sandbox's; sandbox_id NULL: every
 * one), cancelling their calls still open (those end as after an upstream
 * failure: a cut, RST_STREAM to an HTTP/2 client). */
void gw_h2c_drop(gw_h2c_t *h, const char *sandbox_id, const char *current_lifecycle);

/* The drain's end: every call still going is cut (access log "cut":
 * "shutdown"), as gw_proxy_cut_all does the HTTP/1.1 exchanges. */
void gw_h2c_cut_all(gw_h2c_t *h);

/* Non-zero when bytes (the first of an answer on a fresh h2c connection)
 * begin as an HTTP/1.x response does ("HTTP/1."): the app does not speak
 * HTTP/2. Pure; for tests. */
int gw_h2c_is_http1_answer(const char *bytes, size_t len);

#endif
