/*
 * Errors that libh2o 2.2.5 answers by itself, before any handler runs,
 * rewritten into the contract's form (CONTRACT.md, Errors). Today one: a
 * request body over limits.max_request_body_bytes, which h2o answers over
 * HTTP/1 with its own plain-text 413; the client gets 413 body_too_large.
 * (Over HTTP/2, h2o 2.2.5 resets such a stream with REFUSED_STREAM inside
 * its frame handler, where no hook exists: that cannot be rewritten.)
 */
#ifndef GW_GATEWAY_EARLY_ERRORS_H
#define GW_GATEWAY_EARLY_ERRORS_H

#include <h2o.h>
#include "gateway/config.h"

/* Installs, on `fallback` (the fallback path of a preview or redirect
 * hostconf, where h2o binds a request it fails before routing it), a filter
 * that turns h2o's early 413 into the contract's error. The caller installs
 * the loggers there too, so that such requests are logged and counted like
 * any other. Before any context is created; config must outlive the server. */
void gw_early_errors_register(h2o_pathconf_t *fallback, const gw_config_t *config);

#endif
