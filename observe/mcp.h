/*
 * MCP requests as operators see them, from request headers only (no body is
 * parsed): the method and name an MCP client states in Mcp-Method and
 * Mcp-Name (SEP-2243), and its session (Mcp-Session-Id), for the access log
 * and lizard_mcp_requests_total{method}.
 */
#ifndef GW_OBSERVE_MCP_H
#define GW_OBSERVE_MCP_H

#include <h2o.h>

/* The closed label set of lizard_mcp_requests_total: these methods, and
 * "other" for any other Mcp-Method value. */
typedef enum {
    GW_MCP_INITIALIZE = 0,
    GW_MCP_TOOLS_CALL,
    GW_MCP_TOOLS_LIST,
    GW_MCP_RESOURCES_READ,
    GW_MCP_PROMPTS_GET,
    GW_MCP_OTHER,
    GW_MCP_NUM_METHODS
} gw_mcp_method_t;

/* Bytes of Mcp-Method and Mcp-Name the access log keeps (escaped after). */
#define GW_MCP_METHOD_LOG_MAX 64
#define GW_MCP_NAME_LOG_MAX 128
/* Hex digits of the session's hash in the access log (a SHA-256 prefix: the
 * id itself may open the session, so it is never logged). */
#define GW_MCP_SESSION_HASH_LEN 16

/* The three headers' values ({NULL, 0}: absent; the first of each). */
typedef struct st_gw_mcp_headers_t {
    h2o_iovec_t method, name, session;
} gw_mcp_headers_t;

/* Finds the three in one pass over `headers`. */
void gw_mcp_headers_find(const h2o_headers_t *headers, gw_mcp_headers_t *out);

/* The Mcp-Method header's value, {NULL, 0} when absent: one pass that
 * looks no further than each name's length and first byte. */
h2o_iovec_t gw_mcp_method_header(const h2o_headers_t *headers);

/* The label of a method (exact, case matters as in JSON-RPC). */
gw_mcp_method_t gw_mcp_method_of(h2o_iovec_t method);
/* "initialize", ..., "other". */
const char *gw_mcp_method_name(gw_mcp_method_t m);

/* The session id's hash as GW_MCP_SESSION_HASH_LEN lowercase hex digits
 * and a NUL into out. */
void gw_mcp_session_hash(h2o_iovec_t session, char out[GW_MCP_SESSION_HASH_LEN + 1]);

#endif
