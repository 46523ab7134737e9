/*
 * Zero-copy bodies: a response body the gateway does not re-frame (an
 * HTTP/1.1 client on a plain listener, a Content-Length body, no ostream
 * filter) moves with splice(2) from the upstream socket through a pipe to
 * the client socket, on the event loop, never blocking. The state lives in
 * the exchange (upstream/exchange.h); the functions are declared there.
 */
#ifndef GW_UPSTREAM_SPLICE_H
#define GW_UPSTREAM_SPLICE_H

#include <stddef.h>
#include <h2o.h>

typedef struct st_gw_splice_t {
    int pipe_fds[2];       /* [0] read end, [1] write end; -1: no pipe */
    size_t in_pipe;        /* body bytes in the pipe, not yet at the client socket */
    size_t pipe_size;      /* the pipe's capacity */
    h2o_socket_t *client;  /* h2o's socket of the client connection (borrowed) */
    h2o_socket_t *watch;   /* a duplicate of the client's descriptor, for write readiness; NULL: none yet */
    unsigned wanted : 1;   /* the body is to be spliced once what is buffered of it is sent */
    unsigned active : 1;   /* the body moves through the pipe now */
    unsigned watching : 1; /* a write notification is armed on watch (one-shot, cannot be cancelled) */
} gw_splice_t;

#endif
