/*
 * The warning page of public ports (CONTRACT.md, "Public ports and the
 * warning page"): which requests get it, its HTML (no JavaScript; every
 * sentence in one table per language), and what its CSRF token and the
 * consent cookie bind. Signing itself is the gateway cookie's (auth/cookie.h)
 * with a binding of its own, so both rotate with the cookie secrets.
 */
#ifndef GW_AUTH_WARNING_H
#define GW_AUTH_WARNING_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/memory.h>

#define GW_WARNING_CONSENT_PATH "/.lizard/consent"
#define GW_WARNING_CONSENT_COOKIE "__Host-lizard_consent"
/* how long the page's Continue button works (the CSRF token's lifetime) */
#define GW_WARNING_CSRF_TTL_S 3600
/* bound of a consent form body ("csrf=...&return=..."), and of its return path */
#define GW_WARNING_MAX_FORM_BYTES 8192
#define GW_WARNING_MAX_RETURN_PATH 4096
/* "csrf:" or "consent:" and the hex SHA-256 of the host */
#define GW_WARNING_BINDING_SIZE 80

typedef enum {
    GW_WARNING_CSRF = 0,
    GW_WARNING_CONSENT,
} gw_warning_binding_kind_t;

/* Every sentence of the page, in one language. "$H" stands for the host. */
typedef struct st_gw_warning_strings_t {
    const char *lang; /* BCP 47 primary tag: "en" */
    const char *title;
    const char *heading;
    const char *served_by;
    const char *passwords;
    const char *trust;
    const char *continue_label;
    const char *leave;
} gw_warning_strings_t;

/* The strings for an Accept-Language value ({NULL, 0}: none): the language
 * with the highest q that the page has, else English. Never NULL. */
const gw_warning_strings_t *gw_warning_strings(h2o_iovec_t accept_language);

/* 1 when a request gets the page rather than the sandbox, given its method,
 * Sec-Fetch-Dest ({NULL, 0} when absent), whether it is a WebSocket (or other)
 * upgrade, and prefers_html (its Accept prefers text/html; used only without
 * Sec-Fetch-Dest). A document navigation qualifies; in iframe mode a frame's
 * too. Credentials and consent are the caller's to check. Pure. */
int gw_warning_applies(h2o_iovec_t method, h2o_iovec_t sec_fetch_dest, int is_upgrade, int prefers_html, int iframe_mode);

/* Renders the page (from pool): names `host`, and holds the form that POSTs
 * `csrf` and `return_path` to GW_WARNING_CONSENT_PATH. Every reflected value
 * is escaped. */
h2o_iovec_t gw_warning_render(h2o_mem_pool_t *pool, const gw_warning_strings_t *strings, h2o_iovec_t host, h2o_iovec_t csrf,
                              h2o_iovec_t return_path);

/* What a CSRF token or a consent cookie binds besides (sandbox, port,
 * expiry): the kind and the host (lowercased here; without a ":port"), so
 * that neither serves for another host nor as the other. NUL-terminated;
 * passed as the token hash of gw_cookie_sign / gw_cookie_verify. */
void gw_warning_binding(gw_warning_binding_kind_t kind, h2o_iovec_t host, char out[GW_WARNING_BINDING_SIZE]);

/* 1 when `path` may be redirected to after consent: a path on this host
 * ("/..."), not "//" or "/\" (another host), without control characters,
 * spaces or non-ASCII, at most GW_WARNING_MAX_RETURN_PATH bytes. */
int gw_warning_return_path_ok(h2o_iovec_t path);

#endif
