/*
 * The warning page of public ports as responses (auth/warning.h has the
 * page, the language table and the bindings): sending the page, checking
 * the consent cookie, and answering the Continue button's POST to
 * /.lizard/consent.
 */
#ifndef GW_GATEWAY_WARNING_PAGE_H
#define GW_GATEWAY_WARNING_PAGE_H

#include <h2o.h>
#include "auth/cookie_keys.h"
#include "gateway/config.h"
#include "routing/host.h"

/* 1 when path (the request target) is GW_WARNING_CONSENT_PATH, with or
 * without a query. */
int gw_warning_page_is_consent(h2o_iovec_t path);

/* 1 when `value` (the consent cookie's value; {NULL, 0}: none) is a valid
 * consent for this request's host. */
int gw_warning_page_consented(h2o_req_t *req, gw_cookie_keys_t *keys, const gw_host_t *host, h2o_iovec_t value);

/* Answers req with the page for `host`, whose Continue returns to
 * return_path (the request target without the gateway's credentials). */
void gw_warning_page_send(h2o_req_t *req, const gw_config_t *conf, gw_cookie_keys_t *keys, const gw_host_t *host,
                          h2o_iovec_t return_path);

/* Answers a request to GW_WARNING_CONSENT_PATH: 405 unless POST; 403
 * invalid_token unless the form's CSRF token is valid for this host and the
 * browser says the form was this host's own; else 303 to the form's return
 * path with the consent cookie. */
void gw_warning_page_consent(h2o_req_t *req, const gw_config_t *conf, gw_cookie_keys_t *keys, const gw_host_t *host);

#endif
