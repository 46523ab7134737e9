/*
 * The credentials a preview request carries (CONTRACT.md, "Authentication"
 * and "Share links") and what they are worth against the sandbox's record:
 * the access token (header or lizard_token), the gateway's cookie, a share
 * link (header, lizard_token, or the cookie made from one). No Redis call
 * and no response: the pipeline answers.
 */
#ifndef GW_HTTP_CREDENTIALS_H
#define GW_HTTP_CREDENTIALS_H

#include <stdint.h>
#include <h2o/memory.h>
#include "auth/cookie_keys.h"
#include "auth/link_keys.h"
#include "errors/errors.h"
#include "limits/revocation.h"
#include "routing/sandbox.h"

/* What the request carried, once taken out of it ({NULL, 0}: absent). */
typedef struct st_gw_credentials_t {
    h2o_iovec_t header; /* X-Lizard-Access-Token */
    h2o_iovec_t query;  /* the first lizard_token value, decoded */
    int has_query;      /* a lizard_token parameter was there (maybe empty) */
    h2o_iovec_t cookie; /* the gateway's cookie */
    h2o_iovec_t bearer; /* an Authorization: Bearer value the gateway took as its own (gw_credentials_bearer_is_ours) */
} gw_credentials_t;

/* The live keys and limits they are checked with (borrowed). */
typedef struct st_gw_credential_keys_t {
    gw_cookie_keys_t *cookie_keys;
    gw_link_keys_t *link_keys;
    uint64_t link_max_ttl_s;
} gw_credential_keys_t;

typedef enum {
    GW_CREDENTIAL_NONE = 0, /* none carried */
    GW_CREDENTIAL_OK,       /* grant->kind (and expires_at, link_epoch) filled */
    GW_CREDENTIAL_REFUSED,  /* *why says why */
} gw_credential_status_t;

/* Checks the credential in this order (header, Bearer, query, cookie:
 * the first one present decides) against `sbx` for `port` at `now`. Sets
 * *from (GW_CREDENTIAL_FROM_*) for OK and REFUSED: the caller turns a query
 * into the cookie on a navigation, and clears a refused cookie. */
gw_credential_status_t gw_credentials_check(const gw_credentials_t *c, const gw_credential_keys_t *keys, const gw_sandbox_t *sbx,
                                            uint16_t port, uint64_t now, gw_grant_t *grant, gw_error_why_t *why, int *from);

#define GW_CREDENTIAL_FROM_HEADER 0
#define GW_CREDENTIAL_FROM_QUERY 1
#define GW_CREDENTIAL_FROM_COOKIE 2
#define GW_CREDENTIAL_FROM_BEARER 3

/* The credential of an Authorization field with the Bearer scheme (RFC
 * 6750: "Bearer", its case aside, then one or more spaces and the value),
 * or {NULL, 0}: another scheme, or no value. Points into `field`. */
h2o_iovec_t gw_credentials_bearer(h2o_iovec_t field);

/* 1 when a Bearer value is the gateway's own (CONTRACT.md, Authentication
 * 4): a share link (any: one for another port or sandbox is refused, not
 * passed on), or the sandbox's access token (compared in constant time).
 * Anything else is the app's and reaches it unchanged. */
int gw_credentials_bearer_is_ours(h2o_iovec_t value, const gw_sandbox_t *sbx);

#endif
