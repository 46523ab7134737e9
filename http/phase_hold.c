/*
 * The hold phase: a running sandbox goes on; a paused one that may be woken
 * (routing/wake.h) holds the request until it is running (CONTRACT.md,
 * "Waking a paused sandbox"), then the phases run again from the route with
 * the fresh record; any other state is sandbox_not_running. It comes after
 * the credential: scanners never wake sandboxes. No connection slot and no
 * upstream connection is taken while held.
 */
#include <stdio.h>
#include "http/phases.h"
#include "upstream/request_body.h"

/* The sandbox woke (or will not, or took too long). */
static void on_woken(void *data, gw_wake_result_t result, gw_sandbox_t *sbx)
{
    gw_pipeline_req_t *r = data;
    char detail[128];

    r->waiter = NULL;
    gw_hangup_unwatch(r->thread->hangup, &r->hangup);
    switch (result) {
    case GW_WAKE_SETTLED:
        /* the fresh record decides everything again: the credential, the port, the state */
        r->route_status = GW_ROUTE_FOUND;
        r->sbx = sbx;
        gw_phases_run(r, GW_PHASE_ROUTE);
        break;
    case GW_WAKE_NOT_FOUND:
        r->route_status = GW_ROUTE_NOT_FOUND;
        r->sbx = NULL;
        gw_phases_run(r, GW_PHASE_ROUTE);
        break;
    default:
        snprintf(detail, sizeof(detail), "It did not wake within %llu ms.",
                 (unsigned long long)r->conf->config->routing.resume_timeout_ms);
        gw_phase_error(r, GW_ERR_SANDBOX_NOT_RUNNING, detail);
        gw_phases_unwind(r);
        break;
    }
}

/* The HTTP/1 client closed while its request was held: the hold goes now,
 * and the answer (which nobody reads) lets h2o close the connection. */
static void on_hangup(gw_hangup_watch_t *watch)
{
    gw_pipeline_req_t *r = H2O_STRUCT_FROM_MEMBER(gw_pipeline_req_t, hangup, watch);

    gw_wake_cancel(r->waiter, 1);
    r->waiter = NULL;
    gw_phase_error(r, GW_ERR_SANDBOX_NOT_RUNNING, "The client went away while the sandbox was waking.");
    gw_phases_unwind(r);
}

/* Holds the request until its sandbox wakes. Its body (read whole by h2o
 * before the handler ran, or a streaming one's declared length, else what
 * h2o read of it before: no more is taken while held, the rest waits in the
 * client and the socket buffers, docs/uploads.md) counts against
 * limits.max_held_request_bytes: past
 * it the request is refused at once, 503 with Retry-After (the sandbox is
 * asked to wake all the same, so the retry finds it running), rather than
 * held with more memory. */
static gw_phase_result_t hold(gw_pipeline_req_t *r)
{
    gw_wake_hold_result_t refused;
    size_t bytes = r->req->entity.len;

    if (gw_request_body_streams(r->req) && r->req->content_length != SIZE_MAX && r->req->content_length > bytes)
        bytes = r->req->content_length;
    if ((r->waiter = gw_wake_hold(r->thread->wake, r->sbx, bytes, on_woken, r, &refused)) == NULL) {
        if (refused == GW_WAKE_OVER_BYTES)
            return gw_phase_error(r, GW_ERR_SANDBOX_NOT_RUNNING,
                                  "It is waking up; the gateway holds no more request bodies meanwhile. Retry shortly.");
        return gw_phase_error(r, GW_ERR_TOO_MANY_CONNECTIONS, "Too many requests are waiting for this sandbox to wake.");
    }
    r->hangup.cb = on_hangup;
    gw_hangup_watch(r->thread->hangup, &r->hangup, r->req);
    return GW_PHASE_ASYNC;
}

gw_phase_result_t gw_phase_hold(gw_pipeline_req_t *r)
{
    char detail[128];

    if (r->sbx->state == GW_SANDBOX_RUNNING)
        return GW_PHASE_NEXT;
    if (gw_wake_applies(r->sbx))
        return hold(r);
    snprintf(detail, sizeof(detail), "The sandbox is %s.", gw_sandbox_state_name(r->sbx->state));
    return gw_phase_error(r, GW_ERR_SANDBOX_NOT_RUNNING, detail);
}
