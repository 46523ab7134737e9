/*
 * The gateway's own redirects (the query-to-cookie 302, the consent 303, the
 * plain listener's 308): their Location is always an absolute https URL on
 * the request's own host (CONTRACT.md, Forwarding), so that no path, however
 * it looks ("//evil.example", "/\evil.example"), is read as another host.
 */
#ifndef GW_HTTP_REDIRECT_H
#define GW_HTTP_REDIRECT_H

#include <stdint.h>
#include <h2o.h>

/* "https://" hostname (lowercased) [":" port] path, from pool. The port is
 * left out when it is 443 or 0. `path` must be origin-form ("/..." with no
 * byte below 0x21 or above 0x7e); anything else becomes "/" ("OPTIONS *"
 * names no resource). `hostname` must already be a valid host (the pipeline
 * has parsed it): it is copied, not checked. */
h2o_iovec_t gw_redirect_url(h2o_mem_pool_t *pool, h2o_iovec_t hostname, uint16_t port, h2o_iovec_t path);

/* The URL of `path` on the request's own authority (Host or :authority, as
 * parsed by gw_host_parse): its host name, and its port when the client sent
 * one, since that is the port the browser connected to (a TLS listener's, or
 * a load balancer's in front of a trusted plain listener); without one, 443.
 * A port that is not 1-65535 is left out. */
h2o_iovec_t gw_redirect_location(h2o_mem_pool_t *pool, h2o_iovec_t authority, h2o_iovec_t path);

/* Answers req with `status` and Location: `location`, Cache-Control:
 * no-store and an empty body, keeping the headers already in
 * req->res.headers (Set-Cookie...: h2o_send_redirect would drop them). */
void gw_redirect_send(h2o_req_t *req, int status, const char *reason, h2o_iovec_t location);

#endif
