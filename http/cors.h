/*
 * CORS at the edge (CONTRACT.md, "CORS at the edge"): for a port with
 * cors:<n> = edge the gateway decides, from the port's cors_origins:<n>,
 * whether a request's Origin may read the answer, and writes the CORS
 * headers of every response itself: the app's Access-Control-* are
 * replaced, never repeated. Pure: headers in, headers out.
 */
#ifndef GW_HTTP_CORS_H
#define GW_HTTP_CORS_H

#include <h2o.h>
#include "routing/sandbox.h"

/* What the gateway answers one request's Origin. */
typedef struct st_gw_cors_t {
    h2o_iovec_t origin;       /* the request's Origin when it is allowed (echoed); {NULL, 0}: none, or not allowed */
    unsigned credentials : 1; /* Access-Control-Allow-Credentials: true (exact origins; never with "*") */
} gw_cors_t;

/* The headers every response of an edge port exposes to an allowed origin, before the app's own. */
#define GW_CORS_EXPOSED "Mcp-Session-Id, WWW-Authenticate, Retry-After"
/* Access-Control-Max-Age of the gateway's preflight answers. */
#define GW_CORS_MAX_AGE "600"

/* Decides for `origin` (the request's Origin; {NULL, 0}: none) on an edge
 * port: 1 and *out filled when it is allowed (listed exactly, or any
 * with "*", without credentials then); 0 otherwise ("null" never is). */
int gw_cors_decide(const gw_sandbox_port_t *port, h2o_iovec_t origin, gw_cors_t *out);

/* Rewrites a response's headers for the decision `c`: every Access-Control-*
 * header goes; for an allowed origin the gateway's Access-Control-Allow-Origin,
 * -Allow-Credentials and -Expose-Headers (GW_CORS_EXPOSED, then what the
 * app's own Access-Control-Expose-Headers listed) are added; and Vary:
 * Origin unless a Vary already names it. Strings from pool. */
void gw_cors_rewrite(h2o_mem_pool_t *pool, h2o_headers_t *headers, const gw_cors_t *c);

/* The headers of a preflight answer (204) for the allowed decision `c`:
 * Access-Control-Allow-Origin, Vary: Origin, -Allow-Methods (`method`,
 * the requested one), -Allow-Headers (`request_headers`, the requested
 * ones; none when empty), -Max-Age, -Allow-Credentials unless "*". */
void gw_cors_preflight_headers(h2o_mem_pool_t *pool, h2o_headers_t *headers, const gw_cors_t *c, h2o_iovec_t method,
                               h2o_iovec_t request_headers);

#endif
