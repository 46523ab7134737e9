/*
 * The request pipeline: a preview request is parsed (host), routed (Redis),
 * authenticated, checked against the allowed networks, then handed to the
 * proxy. Plain listeners get the redirect handler instead.
 */
#ifndef GW_GATEWAY_PIPELINE_H
#define GW_GATEWAY_PIPELINE_H

#include <h2o.h>

/* Installs the preview handler on `pathconf`. */
void gw_pipeline_register(h2o_pathconf_t *pathconf);

/* Installs the handler that redirects preview requests to https. */
void gw_pipeline_register_redirect(h2o_pathconf_t *pathconf);

#endif
