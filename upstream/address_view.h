/*
 * The sandbox's view of its address (../shared/CONTRACT.md, Forwarding), as
 * pure functions over header values: on a `localhost` port the app is told it
 * is served at http://localhost:<n> (Origin, Referer) and what it says about
 * that address in its response (Location, Content-Location, Refresh,
 * Access-Control-Allow-Origin, Set-Cookie Domain) is turned back into the
 * preview origin; in every mode, Set-Cookie cannot reach other sandboxes'
 * hosts nor the gateway's own cookies.
 */
#ifndef GW_UPSTREAM_ADDRESS_VIEW_H
#define GW_UPSTREAM_ADDRESS_VIEW_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>

/* The gateway's own cookies all start with one of these (the consent and
 * warning-nonce cookies of auth/warning.h, __Host-Http-lizard_*, and any the
 * gateway adds): a sandbox cannot set them, whatever the case. */
#define GW_ADDRESS_VIEW_RESERVED_COOKIE_PREFIXES                                                                                   \
    {                                                                                                                              \
        "__Host-lizard_", "__Secure-lizard_", "__Host-Http-lizard_", "__Http-lizard_"                                              \
    }

/* What Set-Cookie from any sandbox is checked against; borrowed, must outlive
 * every view that points to it. */
typedef struct st_gw_cookie_rules_t {
    char *const *domains; /* the preview domains: lowercase, no leading or trailing dot */
    size_t num_domains;
    const char *access_cookie; /* auth.cookie_name: the gateway's access cookie (NULL: only the reserved prefixes) */
} gw_cookie_rules_t;

/* The rewriting of one exchange. Strings are borrowed (from the request's
 * pool or static). */
typedef struct st_gw_address_view_t {
    uint16_t localhost_port;          /* 0: `preserve` (only the cookie rules apply) */
    h2o_iovec_t preview_origin;       /* "https://<host>[:<port>]", lowercase, no ":443"; len 0: not known (no URL is rewritten) */
    h2o_iovec_t localhost_origin;     /* "http://localhost:<n>" */
    const gw_cookie_rules_t *cookies; /* NULL: Set-Cookie passes unchanged */
} gw_address_view_t;

/* Sets up *v for an exchange whose client sent `authority` (Host or
 * :authority, already checked by routing/host.h) to a port in `localhost`
 * mode (localhost_port != 0) or `preserve` mode (0). Strings from pool. */
void gw_address_view_init(gw_address_view_t *v, h2o_mem_pool_t *pool, h2o_iovec_t authority, uint16_t localhost_port,
                          const gw_cookie_rules_t *cookies);

/* --- the request (localhost mode) --- */

/* The bytes at the start of an Origin (whole = 1: the value is exactly the
 * preview origin) or Referer (whole = 0: the preview origin followed by the
 * end, '/', '?' or '#') value that are the preview origin, to be replaced by
 * localhost_origin; 0: the value passes unchanged (another origin, or
 * preserve mode). Scheme and host compare case-insensitively. */
size_t gw_address_view_request_origin(const gw_address_view_t *v, h2o_iovec_t value, int whole);

/* The request headers to forward in localhost mode: `headers` itself when no
 * Origin or Referer is on the preview origin, else a copy (from pool, values
 * shared) in which they are on localhost_origin. */
const h2o_headers_t *gw_address_view_request_headers(const gw_address_view_t *v, h2o_mem_pool_t *pool,
                                                     const h2o_headers_t *headers);

/* --- the response --- */

/* Rewrites a response header of the app: `token` is h2o's token of its
 * (lowercase) name, NULL when h2o has none. Returns 1 to forward it with
 * *value (replaced by a pool string when rewritten), 0 to drop it (a
 * Set-Cookie for the gateway's own cookie). Only Set-Cookie (any mode) and,
 * in localhost mode, Location, Content-Location, Refresh and
 * Access-Control-Allow-Origin are ever changed. */
int gw_address_view_response_header(const gw_address_view_t *v, h2o_mem_pool_t *pool, const h2o_token_t *token, h2o_iovec_t *value);

#endif
