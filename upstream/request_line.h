/*
 * The request line the gateway sends to a sandbox: which methods and
 * request-targets may go upstream (token methods; origin-form, or "*" for
 * OPTIONS), and the absolute-form a client may send (RFC 9112 3.2.2) turned
 * into the origin-form the app gets. Pure functions, for the pipeline (early
 * refusals) and the proxy (the last check before the line is written).
 */
#ifndef GW_UPSTREAM_REQUEST_LINE_H
#define GW_UPSTREAM_REQUEST_LINE_H

#include <h2o.h>

/* What the gateway answers a CONNECT with, in its 405's Allow header. */
#define GW_REQUEST_ALLOWED_METHODS "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

typedef enum {
    GW_TARGET_ORIGIN = 0, /* "/path?query" */
    GW_TARGET_ASTERISK,   /* "*" with OPTIONS (a server-wide OPTIONS) */
    GW_TARGET_ABSOLUTE,   /* "http://authority/path?query" or https */
    GW_TARGET_INVALID     /* anything else: empty, "*" with another method, authority-form, other schemes, userinfo */
} gw_target_form_t;

/* 1 when method is a non-empty token (RFC 9110 5.6.2: no space, control,
 * delimiter or non-ASCII byte), 0 otherwise. */
int gw_request_method_is_token(h2o_iovec_t method);

/* 1 when a request with this method may be sent again (RFC 9110 9.2.2: GET, HEAD, OPTIONS, PUT, DELETE,
 * TRACE): the one retry of a request a pooled connection lost before any answer. */
int gw_request_method_is_idempotent(h2o_iovec_t method);

/* Classifies a request-target. For GW_TARGET_ABSOLUTE, *authority is the
 * target's authority (pointing into target) and *origin the origin-form to
 * forward: the target's path and query, "/" first when the target has no
 * path (then allocated from pool); for the other forms *origin is target and
 * *authority {NULL, 0}. */
gw_target_form_t gw_request_target_parse(h2o_mem_pool_t *pool, h2o_iovec_t method, h2o_iovec_t target, h2o_iovec_t *authority,
                                         h2o_iovec_t *origin);

/* 0 when "<method> <target> HTTP/1.1" is one well-formed request line: the
 * method a token other than CONNECT, the target origin-form (or "*" with
 * OPTIONS) of visible ASCII only (no space, control or byte above 0x7e);
 * -1 otherwise. */
int gw_request_line_check(h2o_iovec_t method, h2o_iovec_t target);

/* Answers a request whose line the gateway will not forward (CONNECT: 405;
 * a method that is not a token or a target that is not a path: 400) the way
 * libh2o answers the malformed heads it refuses itself: status, reason and a
 * one-line plain-text `why`, the connection not kept alive, and no contract
 * error code (the contract's table has none for these; they are HTTP-level
 * refusals, like libh2o's). Headers already set (Allow) are kept. */
void gw_request_line_refuse(h2o_req_t *req, int status, const char *reason, const char *why);

#endif
