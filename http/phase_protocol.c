/*
 * The protocol phase: a raw TCP port (proto:<n> = tcp, CONTRACT.md "Raw TCP
 * ports") takes only its tunnel's handshake, GET /.lizard/tcp with
 * Sec-WebSocket-Protocol: lizard.tcp.v1; any other request to it is 400
 * not_http_port. After the credentials, as for any request, so that a
 * client without one learns nothing about the port.
 */
#include "http/phases.h"
#include "upstream/tcp_tunnel.h"

gw_phase_result_t gw_phase_protocol(gw_pipeline_req_t *r)
{
    if (!gw_phase_port_is_tcp(r) || gw_tcp_tunnel_is_handshake(r->req, r->path))
        return GW_PHASE_NEXT;
    return gw_phase_error(r, GW_ERR_NOT_HTTP_PORT, NULL);
}
