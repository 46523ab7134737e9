/*
 * Credentials against a sandbox's record. A value starting "lzs1." (or
 * "lzv1.", view-only) in the header or the query is a share link
 * (auth/share_link.h) and is never compared with the access token; anything
 * else there is the access token. A view-only link, or its cookie, opens
 * only an rfb port (anywhere else it is refused: invalid_token).
 * The cookie is always the gateway's own: an access cookie, or the cookie a
 * share link became (auth/cookie.h); a link itself in the cookie is refused.
 * An Authorization: Bearer is the gateway's only when it is a share link or
 * the access token; any other Bearer belongs to the app.
 */
#include <string.h>
#include <h2o/string_.h>
#include "auth/share_link.h"
#include "auth/token.h"
#include "http/credentials.h"

/* Why a share link was refused, for the person who sent it. */
static gw_error_why_t link_refusal(gw_link_result_t result)
{
    switch (result) {
    case GW_LINK_UNKNOWN_KEY:
        return GW_WHY_LINK_UNKNOWN_KEY;
    case GW_LINK_EXPIRED:
        return GW_WHY_LINK_EXPIRED;
    case GW_LINK_TOO_LONG:
        return GW_WHY_LINK_TOO_LONG;
    case GW_LINK_REVOKED:
        return GW_WHY_LINK_REVOKED;
    case GW_LINK_WRONG_PORT:
        return GW_WHY_LINK_OTHER_PORT;
    case GW_LINK_WRONG_SANDBOX:
        return GW_WHY_LINK_OTHER_SANDBOX;
    default:
        return GW_WHY_LINK_SIGNATURE;
    }
}

static gw_credential_status_t check_link(h2o_iovec_t token, const gw_credential_keys_t *keys, const gw_sandbox_t *sbx,
                                         uint16_t port, uint64_t now, gw_grant_t *grant, gw_error_why_t *why)
{
    gw_share_link_t link;
    gw_link_result_t result = gw_link_keys_verify(keys->link_keys, token, sbx->id, port,
                                                  sbx->link_epoch_ok ? &sbx->link_epoch : NULL, now, keys->link_max_ttl_s, &link);

    if (result != GW_LINK_OK) {
        *why = link_refusal(result);
        return GW_CREDENTIAL_REFUSED;
    }
    /* view-only means something only where the gateway walks the viewer's input: a desktop (README, Desktops) */
    if (link.view_only && !gw_sandbox_port_is_rfb(sbx, port)) {
        *why = GW_WHY_LINK_VIEW_ONLY;
        return GW_CREDENTIAL_REFUSED;
    }
    grant->kind = GW_GRANT_LINK;
    grant->expires_at = link.expires_at;
    grant->link_epoch = link.epoch;
    grant->view_only = link.view_only;
    return GW_CREDENTIAL_OK;
}

static gw_credential_status_t check_token(h2o_iovec_t token, const gw_sandbox_t *sbx, gw_grant_t *grant, gw_error_why_t *why,
                                          gw_error_why_t refusal)
{
    if (!sbx->has_token || !gw_token_matches_digest(token, sbx->token_digest)) {
        *why = refusal;
        return GW_CREDENTIAL_REFUSED;
    }
    grant->kind = GW_GRANT_TOKEN;
    return GW_CREDENTIAL_OK;
}

/* Why the gateway's cookie was refused, for the person who sent it. */
static gw_error_why_t cookie_refusal(h2o_iovec_t cookie, gw_cookie_result_t result, const char *sandbox_id, uint16_t port,
                                     uint64_t now)
{
    h2o_iovec_t cookie_sandbox;
    uint16_t cookie_port;
    uint64_t expires_at;

    if (result == GW_COOKIE_EXPIRED) /* reported only once the signature holds */
        return GW_WHY_COOKIE_EXPIRED;
    /* A cookie of this very preview, unexpired, whose signature no longer holds: signed for the sandbox's
     * previous token (or altered; the two cannot be told apart). */
    if (result == GW_COOKIE_BAD_SIGNATURE && gw_cookie_read_fields(cookie, &cookie_sandbox, &cookie_port, &expires_at) == 0 &&
        h2o_memis(cookie_sandbox.base, cookie_sandbox.len, sandbox_id, strlen(sandbox_id)) && cookie_port == port &&
        expires_at > now)
        return GW_WHY_COOKIE_REVOKED;
    return GW_WHY_COOKIE_NOT_VALID;
}

/* 1 when the gateway's cookie verified (`result`) and its fields read: `grant`
 * is then of `kind`, until the cookie's expiry. */
static int cookie_grants(h2o_iovec_t cookie, gw_cookie_result_t result, gw_grant_kind_t kind, gw_grant_t *grant)
{
    h2o_iovec_t cookie_sandbox;
    uint16_t cookie_port;

    if (result != GW_COOKIE_OK || gw_cookie_read_fields(cookie, &cookie_sandbox, &cookie_port, &grant->expires_at) != 0)
        return 0;
    grant->kind = kind;
    return 1;
}

static gw_credential_status_t check_cookie(h2o_iovec_t cookie, const gw_credential_keys_t *keys, const gw_sandbox_t *sbx,
                                           uint16_t port, uint64_t now, gw_grant_t *grant, gw_error_why_t *why)
{
    gw_cookie_result_t result = sbx->has_token
                                    ? gw_cookie_keys_verify(keys->cookie_keys, cookie, sbx->id, port, now, sbx->token_sha256)
                                    : GW_COOKIE_TOKEN_CHANGED;

    if (cookie_grants(cookie, result, GW_GRANT_COOKIE, grant))
        return GW_CREDENTIAL_OK;
    *why = cookie_refusal(cookie, result, sbx->id, port, now);
    return GW_CREDENTIAL_REFUSED;
}

/* The cookie a share link became (auth/cookie.h): the gateway's own,
 * binding the link's epoch; it is worth what the link was, while the epoch
 * holds. */
static gw_credential_status_t check_link_cookie(h2o_iovec_t cookie, const gw_credential_keys_t *keys, const gw_sandbox_t *sbx,
                                                uint16_t port, uint64_t now, gw_grant_t *grant, gw_error_why_t *why)
{
    int view = gw_cookie_is_view_link(cookie);
    gw_cookie_result_t result =
        !sbx->link_epoch_ok ? GW_COOKIE_BAD_SIGNATURE /* an unreadable link_epoch revokes every link */
        : view              ? gw_cookie_keys_verify_view_link(keys->cookie_keys, cookie, sbx->id, port, now, sbx->link_epoch)
                            : gw_cookie_keys_verify_link(keys->cookie_keys, cookie, sbx->id, port, now, sbx->link_epoch);

    if (view && result == GW_COOKIE_OK && !gw_sandbox_port_is_rfb(sbx, port)) {
        *why = GW_WHY_LINK_VIEW_ONLY;
        return GW_CREDENTIAL_REFUSED;
    }
    if (cookie_grants(cookie, result, GW_GRANT_LINK, grant)) {
        grant->link_epoch = sbx->link_epoch;
        grant->view_only = view;
        return GW_CREDENTIAL_OK;
    }
    switch (*why = cookie_refusal(cookie, result, sbx->id, port, now)) {
    case GW_WHY_COOKIE_EXPIRED:
        *why = GW_WHY_LINK_EXPIRED;
        break;
    case GW_WHY_COOKIE_REVOKED:
        /* this preview's, unexpired, its signature no longer holds: a new link_epoch (or a retired secret) */
        *why = GW_WHY_LINK_REVOKED;
        break;
    default:
        break;
    }
    return GW_CREDENTIAL_REFUSED;
}

gw_credential_status_t gw_credentials_check(const gw_credentials_t *c, const gw_credential_keys_t *keys, const gw_sandbox_t *sbx,
                                            uint16_t port, uint64_t now, gw_grant_t *grant, gw_error_why_t *why, int *from)
{
    if (c->header.base != NULL) {
        *from = GW_CREDENTIAL_FROM_HEADER;
        return gw_share_link_is(c->header) ? check_link(c->header, keys, sbx, port, now, grant, why)
                                           : check_token(c->header, sbx, grant, why, GW_WHY_WRONG_TOKEN_HEADER);
    }
    if (c->bearer.base != NULL) {
        *from = GW_CREDENTIAL_FROM_BEARER;
        return gw_share_link_is(c->bearer) ? check_link(c->bearer, keys, sbx, port, now, grant, why)
                                           : check_token(c->bearer, sbx, grant, why, GW_WHY_WRONG_BEARER);
    }
    if (c->has_query) {
        *from = GW_CREDENTIAL_FROM_QUERY;
        return gw_share_link_is(c->query) ? check_link(c->query, keys, sbx, port, now, grant, why)
                                          : check_token(c->query, sbx, grant, why, GW_WHY_WRONG_LINK);
    }
    if (c->cookie.base != NULL) {
        *from = GW_CREDENTIAL_FROM_COOKIE;
        /* the cookie a share link became is the gateway's own, not the link (docs/share-links.md, Share links) */
        return gw_cookie_is_link(c->cookie) ? check_link_cookie(c->cookie, keys, sbx, port, now, grant, why)
                                            : check_cookie(c->cookie, keys, sbx, port, now, grant, why);
    }
    return GW_CREDENTIAL_NONE;
}

h2o_iovec_t gw_credentials_bearer(h2o_iovec_t field)
{
    size_t i = sizeof("Bearer") - 1;

    if (field.len <= i || !h2o_lcstris(field.base, i, H2O_STRLIT("bearer")) || field.base[i] != ' ')
        return h2o_iovec_init(NULL, 0);
    while (i != field.len && field.base[i] == ' ')
        ++i;
    /* h2o trims the field's trailing blanks: what is left is the value, or nothing */
    return i != field.len ? h2o_iovec_init(field.base + i, field.len - i) : h2o_iovec_init(NULL, 0);
}

int gw_credentials_bearer_is_ours(h2o_iovec_t value, const gw_sandbox_t *sbx)
{
    return gw_share_link_is(value) || (sbx->has_token && gw_token_matches_digest(value, sbx->token_digest));
}
