/*
 * The client's address of a connection (common/client_addr.h): read from
 * h2o's socket peer, which holds the PROXY header's address when there was one.
 */
#include "common/client_addr.h"
#include "common/netaddr.h"

socklen_t gw_client_addr(h2o_conn_t *conn, struct sockaddr_storage *ss)
{
    if (conn == NULL || conn->callbacks->get_peername == NULL)
        return 0;
    return conn->callbacks->get_peername(conn, (void *)ss);
}

int gw_client_addr_text(h2o_conn_t *conn, char *buf, size_t bufsize)
{
    struct sockaddr_storage ss;
    socklen_t len = gw_client_addr(conn, &ss);

    return len == 0 ? -1 : gw_netaddr_peer_text((void *)&ss, len, buf, bufsize);
}
