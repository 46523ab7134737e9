/*
 * WebSocket over HTTP/2: the extended CONNECT as an upgrade (ws_h2.h).
 */
#define _GNU_SOURCE /* arc4random_buf */
#include <stdlib.h>
#include <string.h>
#include "common/ws_frame.h"
#include "upstream/ws_h2.h"

#define KEY_NAME "sec-websocket-key"

int gw_ws_h2_is_extended_connect(h2o_req_t *req)
{
    return req->version >= 0x200 && req->is_tunnel_req && req->upgrade.base != NULL;
}

int gw_ws_h2_is_websocket(h2o_req_t *req)
{
    return (req->version < 0x200 || gw_ws_h2_is_extended_connect(req)) && req->upgrade.base != NULL &&
           h2o_lcstris(req->upgrade.base, req->upgrade.len, H2O_STRLIT("websocket"));
}

h2o_iovec_t gw_ws_h2_request_body(h2o_req_t *req)
{
    return gw_ws_h2_is_extended_connect(req) ? h2o_iovec_init(NULL, 0) : req->entity;
}

int gw_ws_h2_as_upgrade(h2o_req_t *req)
{
    unsigned char nonce[16];
    char *key = h2o_mem_alloc_pool(&req->pool, char, h2o_base64_encode_capacity(sizeof(nonce)));
    size_t key_len;
    ssize_t at;

    if (!h2o_lcstris(req->upgrade.base, req->upgrade.len, H2O_STRLIT("websocket")))
        return -1;
    req->method = h2o_iovec_init(H2O_STRLIT("GET"));
    while ((at = h2o_find_header_by_str(&req->headers, H2O_STRLIT(KEY_NAME), -1)) != -1)
        h2o_delete_header(&req->headers, at);
    arc4random_buf(nonce, sizeof(nonce));
    key_len = h2o_base64_encode(key, nonce, sizeof(nonce), 0);
    h2o_add_header_by_str(&req->pool, &req->headers, H2O_STRLIT(KEY_NAME), 0, NULL, key, key_len);
    return 0;
}

int gw_ws_h2_accept_matches(h2o_req_t *req, const gw_http1_response_t *head)
{
    ssize_t at = h2o_find_header_by_str(&req->headers, H2O_STRLIT(KEY_NAME), -1);
    char expected[GW_WS_ACCEPT_SIZE];
    size_t expected_len, i;
    int found = 0;

    if (at == -1)
        return 0;
    expected_len = gw_ws_accept_encode(expected, req->headers.entries[at].value.base, req->headers.entries[at].value.len);
    for (i = 0; i != head->num_headers; ++i) {
        const struct phr_header *h = head->headers + i;
        if (!h2o_lcstris(h->name, h->name_len, H2O_STRLIT("sec-websocket-accept")))
            continue;
        /* one, and the right one */
        if (found++ != 0 || h->value_len != expected_len || memcmp(h->value, expected, expected_len) != 0)
            return 0;
    }
    return found;
}
