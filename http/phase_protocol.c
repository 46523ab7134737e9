/*
 * The protocol phase: a raw TCP port (proto:<n> = tcp, CONTRACT.md "Raw TCP
 * ports") takes only its tunnel's handshake, GET /.lizard/tcp with
 * Sec-WebSocket-Protocol: lizard.tcp.v1; any other request to it is 400
 * not_http_port. A gRPC request to a port that is not proto:<n> = h2c is
 * not_http_port too, answered the gRPC way (errors/grpc.c); to an h2c port
 * it goes on, to the app over HTTP/2 (upstream/h2c.h). After the
 * credentials, as for any request, so that a client without one learns
 * nothing about the port. A desktop (proto:<n> = rfb) takes its viewer,
 * answered here from the gateway's memory (http/viewer.h), and its
 * WebSocket, which goes on as a TCP tunnel; anything else is not_http_port.
 */
#include "http/phases.h"
#include "http/viewer.h"
#include "upstream/tcp_tunnel.h"

gw_phase_result_t gw_phase_protocol(gw_pipeline_req_t *r)
{
    if (gw_phase_port_is_rfb(r) && !gw_rfb_tunnel_is_handshake(r->req)) {
        if (gw_viewer_serve(r->conf->viewer, r->req, r->path, r->grant.view_only))
            return GW_PHASE_ANSWERED;
        return gw_phase_error_why(r, GW_ERR_NOT_HTTP_PORT, GW_WHY_NOT_DESKTOP_PATH);
    }
    if (gw_phase_port_is_tcp(r) && !gw_tcp_tunnel_is_handshake(r->req, r->path))
        return gw_phase_error(r, GW_ERR_NOT_HTTP_PORT, NULL);
    /* gRPC needs HTTP/2 to the app: an h2c port; any other port gets a gRPC UNAVAILABLE that says so, not an HTTP/1.1
     * exchange the client cannot read */
    if (gw_error_is_grpc(r->req) && !(r->sbx_port != NULL && r->sbx_port->h2c))
        return gw_phase_error_why(r, GW_ERR_NOT_HTTP_PORT, GW_WHY_NOT_H2C);
    return GW_PHASE_NEXT;
}
