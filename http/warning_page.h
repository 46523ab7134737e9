/*
 * The warning page of public ports as responses (auth/warning.h has the
 * page, the language table and the bindings): which requests get it,
 * sending it with its nonce cookie, checking the consent cookie, and
 * answering the Continue button's POST to /.lizard/consent.
 */
#ifndef GW_HTTP_WARNING_PAGE_H
#define GW_HTTP_WARNING_PAGE_H

#include <h2o.h>
#include "auth/cookie_keys.h"
#include "config/config.h"
#include "routing/host.h"

/* The gateway's cookies of the page, taken out of a request's Cookie header
 * ({NULL, 0}: absent). */
typedef struct st_gw_warning_cookies_t {
    h2o_iovec_t consent; /* GW_WARNING_CONSENT_COOKIE */
    h2o_iovec_t nonce;   /* GW_WARNING_NONCE_COOKIE */
} gw_warning_cookies_t;

/* 1 when path (the request target) is GW_WARNING_CONSENT_PATH, with or
 * without a query. */
int gw_warning_page_is_consent(h2o_iovec_t path);

/* 1 when req is a navigation that gets the page unless it carries a
 * credential or consent (gw_warning_applies on its headers). */
int gw_warning_page_applies(h2o_req_t *req);

/* 1 when the consent cookie in `cookies` is a valid consent for this
 * request's host and this browser's nonce cookie. */
int gw_warning_page_consented(h2o_req_t *req, gw_cookie_keys_t *keys, const gw_host_t *host, const gw_warning_cookies_t *cookies);

/* Answers req with the page for `host`, whose Continue returns to
 * return_path (the request target without the gateway's credentials), and
 * the nonce cookie its CSRF token is bound to (the browser's own nonce again
 * when it has one: several tabs of the page all work). */
void gw_warning_page_send(h2o_req_t *req, const gw_config_t *conf, gw_cookie_keys_t *keys, const gw_host_t *host,
                          h2o_iovec_t return_path, const gw_warning_cookies_t *cookies);

/* Answers a request to GW_WARNING_CONSENT_PATH on a public port: 405 unless
 * POST; 403 invalid_token unless the form's CSRF token is valid for this host
 * and this browser's nonce cookie and the browser says the form was this
 * host's own; else 303 to the form's return path (an absolute URL on this
 * host) with the consent cookie, bound to that nonce, and the nonce cookie
 * again, made to live as long as the consent. */
void gw_warning_page_consent(h2o_req_t *req, const gw_config_t *conf, gw_cookie_keys_t *keys, const gw_host_t *host,
                             const gw_warning_cookies_t *cookies);

#endif
