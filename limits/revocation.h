/*
 * Revocation of open connections (CONTRACT.md, "Revocation reaches open
 * connections too"): each worker indexes its in-flight exchanges and WebSocket
 * tunnels by sandbox, with what let each in (a grant); when a publish on
 * <prefix>routes names a sandbox that has some, its record is read again and
 * those the new record would refuse are closed.
 */
#ifndef GW_LIMITS_REVOCATION_H
#define GW_LIMITS_REVOCATION_H

#include <stdint.h>
#include <h2o.h>
#include "errors/errors.h"
#include "routing/route_store.h"
#include "routing/sandbox.h"

typedef enum {
    GW_GRANT_PUBLIC = 0, /* a public port: no credential was asked for */
    GW_GRANT_PREFLIGHT,  /* a CORS preflight: passes without a credential */
    GW_GRANT_TOKEN,      /* the access token, in the header or the lizard_token parameter */
    GW_GRANT_COOKIE,     /* the gateway's cookie, valid until expires_at */
    GW_GRANT_LINK,       /* a share link (or the cookie made from one): until expires_at, while link_epoch holds */
} gw_grant_kind_t;

/* What let a request in: the record it was checked against (retained by
 * whoever holds the grant), the port, and the credential's kind. */
typedef struct st_gw_grant_t {
    gw_sandbox_t *record;
    uint16_t port;
    gw_grant_kind_t kind;
    uint64_t expires_at; /* GW_GRANT_COOKIE, GW_GRANT_LINK: unix seconds; 0 otherwise */
    uint64_t link_epoch; /* GW_GRANT_LINK: the epoch the link was signed with */
    int view_only;       /* GW_GRANT_LINK: a view-only link (or its cookie): an rfb port's viewer, its input dropped */
} gw_grant_t;

/* Whether `now_record` (the sandbox's record as read after a publish; NULL:
 * the sandbox is gone) still lets in what `grant` let in. Returns -1 when it
 * does, else the error a new request would get: sandbox_not_found,
 * port_not_exposed, missing_token (the port became private), invalid_token
 * (the token changed, or the cookie expired; for a share link: link_epoch
 * changed or the link expired; a view-only link's port is no longer rfb), sandbox_not_running (not
 * running, or a new lifecycle: the microVM it was talking to is gone). Pure. */
int gw_grant_recheck(const gw_grant_t *grant, const gw_sandbox_t *now_record, uint64_t now_unix);

typedef struct st_gw_revocation_t gw_revocation_t;
typedef struct st_gw_revocable_t gw_revocable_t;

/* Closes the exchange or tunnel that embeds `item`, because its sandbox's
 * new record answers `code`. The item is no longer registered when this is
 * called; removing it again is a no-op. */
typedef void (*gw_revoke_cb)(gw_revocable_t *item, gw_error_code_t code);

/* Embedded in what can be revoked; fill grant and on_revoke, then add. */
struct st_gw_revocable_t {
    gw_grant_t grant;
    gw_revoke_cb on_revoke;
    /* private */
    struct st_gw_revocation_bucket_t *bucket; /* NULL: not registered */
    h2o_linklist_t link;
};

/* One per worker. `routes` (borrowed, may be set later with
 * gw_revocation_set_routes) reads records again after a publish. Never NULL
 * (out of memory aborts). */
gw_revocation_t *gw_revocation_new(h2o_loop_t *loop, gw_route_store_t *routes);
void gw_revocation_set_routes(gw_revocation_t *r, gw_route_store_t *routes);
/* Cancels record reads in flight. Items still registered are left alone
 * (their owners close them). NULL is a no-op. */
void gw_revocation_free(gw_revocation_t *r);

/* Registers item under item->grant.record->id. The record must stay
 * retained by the item's owner until gw_revocation_remove. */
void gw_revocation_add(gw_revocation_t *r, gw_revocable_t *item);
/* Unregisters item; a no-op when it is not registered. */
void gw_revocation_remove(gw_revocation_t *r, gw_revocable_t *item);
/* Items registered for sandbox_id (tests, metrics). */
size_t gw_revocation_count(gw_revocation_t *r, const char *sandbox_id);

/* A publish named sandbox_id (NULL: the subscription was (re)confirmed, so
 * any sandbox may have changed). For each such sandbox with registered items,
 * reads its record again through the route store and then calls
 * gw_revocation_check. Signature of gw_route_invalidate_cb. */
void gw_revocation_on_publish(void *r, const char *sandbox_id);

/* Revokes every item of sandbox_id that `record` (NULL: gone) refuses. */
void gw_revocation_check(gw_revocation_t *r, const char *sandbox_id, const gw_sandbox_t *record, uint64_t now_unix);

#endif
