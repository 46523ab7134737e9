/*
 * The cut reason of a request, kept as errors.c keeps the error code: a
 * request tag (common/engine.h) that points into a table of fixed stride,
 * found again by arithmetic.
 */
#include <string.h>
#include "common/engine.h"
#include "errors/cut.h"

#define REASON_NAME_SIZE 24
static const char reason_names[GW_CUT_NUM][REASON_NAME_SIZE] = {
    [GW_CUT_NONE] = "",
    [GW_CUT_FIRST_BYTE_TIMEOUT] = "first_byte_timeout",
    [GW_CUT_IDLE_TIMEOUT] = "idle_timeout",
    [GW_CUT_CLIENT_STALL] = "client_stall",
    [GW_CUT_REVOKED] = "revoked",
    [GW_CUT_EGRESS_QUOTA] = "egress_quota",
    [GW_CUT_UPSTREAM_RESET] = "upstream_reset",
    [GW_CUT_SHUTDOWN] = "shutdown",
    [GW_CUT_BODY_TOO_LARGE] = "body_too_large",
};

static const char CUT_LOG_MODULE[] = "lizard:cut";

const char *gw_cut_reason_name(gw_cut_reason_t reason)
{
    return reason_names[(unsigned)reason < GW_CUT_NUM ? reason : GW_CUT_NONE];
}

void gw_cut_note(h2o_req_t *req, gw_cut_reason_t reason)
{
    const char *name;

    if (reason == GW_CUT_NONE || (unsigned)reason >= GW_CUT_NUM || gw_cut_of(req) != GW_CUT_NONE)
        return;
    name = reason_names[reason];
    gw_req_tag_add(req, CUT_LOG_MODULE, name);
}

gw_cut_reason_t gw_cut_of(h2o_req_t *req)
{
    const char *first = (const char *)reason_names, *at = gw_req_tag_find(req, CUT_LOG_MODULE, first, first + sizeof(reason_names));

    return at != NULL ? (gw_cut_reason_t)((size_t)(at - first) / REASON_NAME_SIZE) : GW_CUT_NONE;
}
