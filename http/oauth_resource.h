/*
 * OAuth discovery for MCP and other OAuth clients (CONTRACT.md,
 * "Authentication", OAuth discovery; RFC 9728): with
 * auth.oauth_authorization_servers set, a private port names its
 * authorization servers in /.well-known/oauth-protected-resource, and its
 * 401s to programs point there. The servers issue share links as their
 * access tokens, which the gateway verifies offline (http/credentials.h).
 */
#ifndef GW_HTTP_OAUTH_RESOURCE_H
#define GW_HTTP_OAUTH_RESOURCE_H

#include <h2o.h>
#include "config/config.h"

#define GW_OAUTH_RESOURCE_PATH "/.well-known/oauth-protected-resource"

/* 1 when a GET or HEAD for `path` (the target, query aside) asks for the
 * protected resource document and discovery is configured. */
int gw_oauth_resource_is_request(const gw_config_t *conf, h2o_req_t *req, h2o_iovec_t path);

/* Answers the document: 200 application/json,
 * {"resource":"https://<host>/","authorization_servers":[...],"bearer_methods_supported":["header"]},
 * <host> the request's own authority (as redirects name it). */
void gw_oauth_resource_send(const gw_config_t *conf, h2o_req_t *req);

/* Before a 401 to a request that is not a browser navigation, when
 * discovery is configured: adds WWW-Authenticate: Bearer
 * resource_metadata="https://<host>/.well-known/oauth-protected-resource"
 * to req->res.headers, ahead of the Lizard-Token challenge errors.c adds
 * (clients that read one joined WWW-Authenticate value, as the MCP SDK
 * does, look at its first scheme). */
void gw_oauth_resource_challenge(const gw_config_t *conf, h2o_req_t *req);

#endif
