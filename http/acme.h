/*
 * ACME HTTP-01 (CONTRACT.md, "Custom domains"): on every listener, for any
 * host, GET /.well-known/acme-challenge/<token> answers the key
 * authorization the control plane stored as <prefix>acme:{<token>}, as
 * text/plain, or 404. Nothing under that path is proxied or redirected.
 */
#ifndef GW_HTTP_ACME_H
#define GW_HTTP_ACME_H

#include <h2o.h>
#include "common/redis.h"

/* The path the handler is registered at (before "/" of the same hostconf:
 * h2o takes the first pathconf that matches). */
#define GW_ACME_PATH "/.well-known/acme-challenge"

/* Longest token looked up (RFC 8555 8.3: base64url of at least 128 bits;
 * CAs use 43 characters). */
#define GW_ACME_TOKEN_MAX 128

/* Longest key authorization answered (token '.' base64url SHA-256 thumbprint). */
#define GW_ACME_VALUE_MAX 512

typedef struct st_gw_acme_t gw_acme_t;

typedef struct st_gw_acme_conf_t {
    const char *prefix;         /* key prefix, e.g. "lizard:" (borrowed, outlives the server) */
    uint64_t lookup_timeout_ms; /* deadline of the GET */
} gw_acme_conf_t;

/* Installs the handler on `pathconf` (conf copied); aborts on out of memory. */
gw_acme_t *gw_acme_register(h2o_pathconf_t *pathconf, const gw_acme_conf_t *conf);

/* Gives the handler the Redis connection of the thread that runs `ctx`
 * (borrowed; outlives the loop). Until then challenges get 503. */
void gw_acme_attach(gw_acme_t *acme, h2o_context_t *ctx, gw_redis_t *redis);

/* The token of a challenge path (req->path_normalized): 0 with *token set when
 * `path` is GW_ACME_PATH "/" and 1 to GW_ACME_TOKEN_MAX base64url
 * characters, -1 otherwise. Pure; for tests. */
int gw_acme_token(h2o_iovec_t path, h2o_iovec_t *token);

#endif
