/*
 * Errors that libh2o answers by itself, before any handler runs, rewritten
 * into the contract's form (CONTRACT.md, Errors): a request body over
 * limits.max_request_body_bytes, which h2o answers with its own plain-text
 * 413 (413 body_too_large), and a request head over
 * limits.max_request_head_bytes, its plain-text 431 (431 headers_too_large);
 * HTTP/1.1 and HTTP/2 alike (patches 0130 and 0150).
 */
#ifndef GW_HTTP_EARLY_ERRORS_H
#define GW_HTTP_EARLY_ERRORS_H

#include <h2o.h>
#include "config/config.h"

/* Installs, on `fallback` (the fallback path of a preview or redirect
 * hostconf, where h2o binds a request it fails before routing it), a filter
 * that turns h2o's early 413 and 431 into the contract's errors. The caller installs
 * the loggers there too, so that such requests are logged and counted like
 * any other. Before any context is created; config must outlive the server. */
void gw_early_errors_register(h2o_pathconf_t *fallback, const gw_config_t *config);

#endif
