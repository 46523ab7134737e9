/*
 * Every response the gateway itself produces (../shared/CONTRACT.md, Errors):
 * a code from the contract's table, rendered as a small HTML page for a
 * browser navigation and as JSON otherwise, never cached, readable by
 * cross-origin browser code.
 */
#ifndef GW_ERRORS_ERRORS_H
#define GW_ERRORS_ERRORS_H

#include <stdint.h>
#include <h2o.h>

typedef enum {
    GW_ERR_BAD_HOST = 0,
    GW_ERR_UNKNOWN_HOST,
    GW_ERR_SANDBOX_NOT_FOUND,
    GW_ERR_PORT_NOT_EXPOSED,
    GW_ERR_MISSING_TOKEN,
    GW_ERR_INVALID_TOKEN,
    GW_ERR_SANDBOX_NOT_RUNNING,
    GW_ERR_PORT_NOT_OPEN,
    GW_ERR_UPSTREAM_FORBIDDEN,
    GW_ERR_UPSTREAM_TIMEOUT,
    GW_ERR_TOO_MANY_CONNECTIONS,
    GW_ERR_ROUTING_UNAVAILABLE,
    GW_ERR_BODY_TOO_LARGE,
    GW_ERR_BAD_UPSTREAM_RESPONSE,
    GW_ERR_HEADERS_TOO_LARGE,
    GW_ERR_NOT_HTTP_PORT,
    GW_ERR_IP_NOT_ALLOWED,
    GW_ERR_RATE_LIMITED,
    GW_ERR_EGRESS_QUOTA_EXCEEDED,
    GW_ERR_ORIGIN_NOT_ALLOWED,
    /* not in the contract's table (docs/errors.md, Errors): requests HTTP itself rules out */
    GW_ERR_NUM_CODES
} gw_error_code_t;

/* A finer cause of some codes: the same code and status, with a page and a
 * message that say more exactly what happened and what to do. A cause that
 * does not belong to the code it is sent with is ignored. */
typedef enum {
    GW_WHY_DEFAULT = 0,
    GW_WHY_WRONG_TOKEN_HEADER, /* invalid_token: the X-Lizard-Access-Token header */
    GW_WHY_WRONG_LINK,         /* invalid_token: the lizard_token parameter (a preview link) */
    GW_WHY_COOKIE_EXPIRED,     /* invalid_token: the gateway's cookie expired */
    GW_WHY_COOKIE_REVOKED,     /* invalid_token: the cookie is for the sandbox's previous token */
    GW_WHY_COOKIE_NOT_VALID,   /* invalid_token: the cookie was altered, or is another preview's */
    GW_WHY_EMBEDDED_SAME_SITE, /* missing_token: a frame in another site, with a SameSite=Lax/Strict cookie */
    /* invalid_token: a share link (or the cookie it became), by auth/share_link.h's result */
    GW_WHY_LINK_SIGNATURE,   /* altered, malformed, or signed with another secret */
    GW_WHY_LINK_UNKNOWN_KEY, /* signed with a key id this gateway does not have */
    GW_WHY_LINK_EXPIRED,
    GW_WHY_LINK_TOO_LONG, /* expires further away than auth.link_max_ttl_s */
    GW_WHY_LINK_REVOKED,  /* link_epoch changed */
    GW_WHY_LINK_OTHER_PORT,
    GW_WHY_LINK_OTHER_SANDBOX,
    GW_WHY_CONSENT_NOT_VALID, /* invalid_token: a warning page's consent form without a valid CSRF token */
    GW_WHY_ADDR_MISSING,      /* upstream_forbidden: the record has no addr */
    GW_WHY_ADDR_NOT_IP,       /* upstream_forbidden: the record's addr is not an IP literal (never resolved) */
    GW_WHY_LOOPBACK_UPSTREAM, /* port_not_open: the gateway reaches this sandbox over loopback (0.0.0.0 is no fix) */
    GW_WHY_SILENCE_LIMIT,     /* upstream_timeout: the app was silent for the gateway's limit (the detail says which) */
    GW_WHY_NOT_H2C,           /* not_http_port: a gRPC request to a port that is not proto:<n> = h2c */
    GW_WHY_H2C_HTTP1,         /* bad_upstream_response: an h2c port's app answered HTTP/1.x, not HTTP/2 */
    GW_WHY_H2C_NOT_HTTP2,     /* bad_upstream_response: an h2c port's app answered something else that is not HTTP/2 */
    GW_WHY_STREAM_ERRORS,     /* too_many_connections: the address spent limits.max_stream_errors_per_client */
    GW_WHY_WRONG_BEARER,      /* invalid_token: an Authorization: Bearer the gateway took as the access token */
    GW_WHY_LINK_VIEW_ONLY,    /* invalid_token: a view-only link (lzv1) for a port that is not a desktop (rfb) */
    GW_WHY_NOT_DESKTOP_PATH,  /* not_http_port: an rfb port takes only its viewer and its WebSocket */
    GW_WHY_DESKTOP_VIEWERS,   /* too_many_connections: limits.max_desktop_viewers of the sandbox are open */
    GW_WHY_NUM
} gw_error_why_t;

/* "bad_host", ...: a static string. */
const char *gw_error_code_name(gw_error_code_t code);

/* Records on req that `code` answered it (gw_error_send does this), for the
 * access log and the metrics; the record lives in req->pool. Marks req
 * refused_early (it does not refill HTTP/2's reset budget) unless the code
 * says a sandbox was tried (port_not_open, upstream_timeout). */
void gw_error_note(h2o_req_t *req, gw_error_code_t code);

/* The code recorded on req by gw_error_note, or -1 when none was. */
int gw_error_code_of(h2o_req_t *req);
int gw_error_status(gw_error_code_t code);

/* 1 when the request is a browser navigation that should get HTML:
 * Sec-Fetch-Mode: navigate, or (no Sec-Fetch-Mode) an Accept header that
 * prefers text/html over application/json. Pure; for tests. */
int gw_error_prefers_html(h2o_iovec_t sec_fetch_mode, h2o_iovec_t accept);

/* Renders the body (from pool). sandbox_id may be NULL, port 0 = none,
 * detail may be NULL (an extra sentence, e.g. which state). Every reflected
 * value is escaped for the format. */
h2o_iovec_t gw_error_render(h2o_mem_pool_t *pool, gw_error_code_t code, int html, const char *sandbox_id, uint16_t port,
                            const char *detail);

/* gw_error_render with a finer cause. */
h2o_iovec_t gw_error_render_why(h2o_mem_pool_t *pool, gw_error_code_t code, gw_error_why_t why, int html, const char *sandbox_id,
                                uint16_t port, const char *detail);

/* 1 when req is a browser navigation (gw_error_prefers_html of its
 * Sec-Fetch-Mode and Accept headers). */
int gw_error_is_navigation(h2o_req_t *req);

/* Sends the error as the response to req, keeping headers already put in
 * req->res.headers (e.g. a Set-Cookie that clears a bad cookie). Adds
 * Content-Type, Cache-Control: no-store, Retry-After where the code calls for
 * it, and Access-Control-Allow-Origin + Vary: Origin when the request had an
 * Origin. */
void gw_error_send(h2o_req_t *req, gw_error_code_t code, const char *sandbox_id, uint16_t port, const char *detail);

/* gw_error_send with a finer cause. A 401 carries WWW-Authenticate: Lizard-Token.
 * A gRPC request (gw_error_is_grpc) gets a gRPC answer (gw_error_send_grpc)
 * with the message JSON would carry. */
void gw_error_send_why(h2o_req_t *req, gw_error_code_t code, gw_error_why_t why, const char *sandbox_id, uint16_t port,
                       const char *detail);

/* grpc.c */
/* 1 when req's content-type is application/grpc or application/grpc+<x>
 * (parameters and case aside): its errors are gRPC answers. */
int gw_error_is_grpc(h2o_req_t *req);
/* The gRPC status of an HTTP status (CONTRACT.md, Long calls): 401 16,
 * 403 7, 404 5, 429 8, 504 4, any other 14. */
int gw_error_grpc_status(int http_status);
/* `s` percent-encoded as grpc-message wants it (bytes outside 0x20-0x7E,
 * and '%', as %XX), NUL-terminated, from pool; cut at 2 KiB of input. */
h2o_iovec_t gw_error_grpc_percent_encode(h2o_mem_pool_t *pool, const char *s, size_t len);
/* Answers req with a gRPC Trailers-Only response: HTTP 200, content-type
 * application/grpc, grpc-status (gw_error_grpc_status of http_status),
 * grpc-message (the message, percent-encoded), no body. Headers already in
 * req->res.headers stay. */
void gw_error_send_grpc(h2o_req_t *req, int http_status, const char *message, size_t len);

#endif
