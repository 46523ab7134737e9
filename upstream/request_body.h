/*
 * A request body that streams to the sandbox (CONTRACT.md, Forwarding):
 * the preview handler takes requests before their body is complete
 * (h2o_handler_t.supports_request_streaming), and each chunk h2o hands over
 * goes to the sandbox's socket before the next one is asked for. See
 * docs/uploads.md.
 *
 * The contract with h2o (include/h2o.h, write_req / proceed_req):
 * - h2o calls req->write_req.cb(ctx, is_end_stream) with the chunk in
 *   req->entity; the gateway copies it into the exchange (one chunk per
 *   request), writes it, and calls req->proceed_req(req, NULL) only once
 *   that write completed: h2o reads no more of the client meanwhile
 *   (HTTP/1: the socket is not read; HTTP/2: the stream window is not
 *   credited). A slow app slows its client; the gateway holds one chunk.
 * - after is_end_stream h2o sets proceed_req to NULL: it is not called.
 * - proceed_req(req, h2o_httpclient_error_is_eos) ends a body early, at any
 *   moment after the request was answered (gw_request_body_end).
 *
 * Bytes in req->entity at forward time (what h2o read before on_req) go
 * first, after the head. The body goes with the client's Content-Length
 * when it declared one, chunked otherwise. It is counted as it is taken:
 * past limits.max_request_body_bytes (h2o's max_request_entity_size; patch
 * 0500 leaves a streamed body's count to the gateway) the chunk is not
 * written, and the request is answered 413 body_too_large, or its response
 * cut (reason body_too_large) when the app answered already. Ingress is
 * billed per chunk written.
 */
#ifndef GW_UPSTREAM_REQUEST_BODY_H
#define GW_UPSTREAM_REQUEST_BODY_H

#include <h2o.h>

struct st_gw_exchange_t;

/* 1 when req's body is still arriving (h2o processed it before its end); a
 * tunnel's (WebSocket, CONNECT) bytes are the tunnel's, not a body. */
static inline int gw_request_body_streams(const h2o_req_t *req)
{
    return req->proceed_req != NULL && !req->is_tunnel_req;
}

/* HTTP/1.1: what of a body ended early is still read and dropped, so that
 * the client, which may still be sending, reads the answer (a close with
 * its bytes unread would reset the connection under the answer), and the
 * connection may serve the next request. Past it the connection is closed. */
#define GW_REQUEST_BODY_DRAIN_BYTES (4 * 1024 * 1024)

/* What one read of an HTTP/1.1 client takes at most while its body streams
 * (h2o's default is 1 MiB): the chunk the gateway holds per upload. */
#define GW_REQUEST_BODY_READ_BYTES (64 * 1024)

/* Ends a body still arriving once req has been answered (a no-op for a
 * body that is complete): HTTP/1.1 reads and drops the rest, up to
 * GW_REQUEST_BODY_DRAIN_BYTES, then closes; HTTP/2 drops the rest with the
 * connection window credited and resets the stream with NO_ERROR once the
 * response is sent (patch 0500). in_hand: h2o handed a chunk (or the bytes
 * at on_req) that was not proceeded yet. Must come after the answer was
 * handed to h2o (before it, HTTP/1 would answer 502 itself). */
void gw_request_body_end(h2o_req_t *req, int in_hand);
/* Ends a body still arriving on a response that was cut: HTTP/1.1 closes
 * the connection once the response is over (HTTP/2's reset ends it). */
void gw_request_body_close(h2o_req_t *req);

/* At forward, for a streaming body: takes req->write_req for the exchange. */
void gw_request_body_take(struct st_gw_exchange_t *ex);
/* The connection is up: writes the head and the bytes in hand, then each
 * chunk as h2o hands it over. */
void gw_request_body_start(struct st_gw_exchange_t *ex);

#endif
