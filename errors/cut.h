/*
 * Responses the gateway ended before their end (CONTRACT.md, Long calls):
 * the reason is recorded on the request, so that its access-log line says
 * "cut":"<reason>" and lizard_responses_cut_total{reason} counts it.
 */
#ifndef GW_ERRORS_CUT_H
#define GW_ERRORS_CUT_H

#include <h2o.h>

typedef enum {
    GW_CUT_NONE = 0,
    GW_CUT_FIRST_BYTE_TIMEOUT, /* no response head within the silence limit (the 504 upstream_timeout) */
    GW_CUT_IDLE_TIMEOUT,       /* the body went silent for the silence limit */
    GW_CUT_CLIENT_STALL,       /* the client took nothing (limits.client_stall_timeout_ms, the buffer budgets) */
    GW_CUT_REVOKED,            /* a publish revoked what let the request in */
    GW_CUT_EGRESS_QUOTA,       /* the sandbox's egress_quota was reached */
    GW_CUT_UPSTREAM_RESET,     /* the sandbox closed or broke the body before its end */
    GW_CUT_SHUTDOWN,           /* the gateway's drain ended with the response still streaming */
    GW_CUT_BODY_TOO_LARGE,     /* the request body, streaming, passed limits.max_request_body_bytes after the app answered */
    GW_CUT_NUM
} gw_cut_reason_t;

/* "first_byte_timeout", ...; "" for GW_CUT_NONE. A static string. */
const char *gw_cut_reason_name(gw_cut_reason_t reason);

/* Records on req that the gateway cut its response for `reason` (the first
 * reason recorded stays; GW_CUT_NONE is ignored). The record lives in
 * req->pool. */
void gw_cut_note(h2o_req_t *req, gw_cut_reason_t reason);

/* The reason recorded on req, or GW_CUT_NONE. */
gw_cut_reason_t gw_cut_of(h2o_req_t *req);

#endif
