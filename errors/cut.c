/*
 * The cut reason of a request, kept as errors.c keeps the error code: an
 * error_logs entry (never printed) whose message points into a table of
 * fixed stride, found again by arithmetic.
 */
#include <string.h>
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
    h2o_vector_reserve(&req->pool, &req->error_logs, req->error_logs.size + 1);
    req->error_logs.entries[req->error_logs.size++] = (h2o_req_error_log_t){CUT_LOG_MODULE, h2o_iovec_init(name, strlen(name))};
}

gw_cut_reason_t gw_cut_of(h2o_req_t *req)
{
    uintptr_t first = (uintptr_t)reason_names, end = (uintptr_t)(reason_names + GW_CUT_NUM);
    size_t i;

    for (i = 0; i != req->error_logs.size; ++i) {
        uintptr_t at = (uintptr_t)req->error_logs.entries[i].msg.base;
        if (req->error_logs.entries[i].module == CUT_LOG_MODULE && at >= first && at < end)
            return (gw_cut_reason_t)((at - first) / REASON_NAME_SIZE);
    }
    return GW_CUT_NONE;
}
