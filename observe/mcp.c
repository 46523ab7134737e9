/*
 * MCP request headers (see mcp.h). h2o keeps request header names
 * lowercase; a request without any of them pays one length test per
 * header.
 */
#include <string.h>
#include <openssl/sha.h>
#include "observe/mcp.h"

static const char *const method_names[GW_MCP_NUM_METHODS] = {
    [GW_MCP_INITIALIZE] = "initialize",         [GW_MCP_TOOLS_CALL] = "tools/call",   [GW_MCP_TOOLS_LIST] = "tools/list",
    [GW_MCP_RESOURCES_READ] = "resources/read", [GW_MCP_PROMPTS_GET] = "prompts/get", [GW_MCP_OTHER] = "other",
};

static int name_is(const h2o_iovec_t *name, const char *s, size_t len)
{
    return name->len == len && name->base[0] == 'm' && memcmp(name->base, s, len) == 0;
}

void gw_mcp_headers_find(const h2o_headers_t *headers, gw_mcp_headers_t *out)
{
    size_t i;

    memset(out, 0, sizeof(*out));
    for (i = 0; i != headers->size; ++i) {
        const h2o_iovec_t *name = headers->entries[i].name;
        h2o_iovec_t *slot = name_is(name, H2O_STRLIT("mcp-method"))       ? &out->method
                            : name_is(name, H2O_STRLIT("mcp-name"))       ? &out->name
                            : name_is(name, H2O_STRLIT("mcp-session-id")) ? &out->session
                                                                          : NULL;
        if (slot != NULL && slot->base == NULL)
            *slot = headers->entries[i].value;
    }
}

h2o_iovec_t gw_mcp_method_header(const h2o_headers_t *headers)
{
    size_t i;

    for (i = 0; i != headers->size; ++i)
        if (name_is(headers->entries[i].name, H2O_STRLIT("mcp-method")))
            return headers->entries[i].value;
    return h2o_iovec_init(NULL, 0);
}

gw_mcp_method_t gw_mcp_method_of(h2o_iovec_t method)
{
    size_t i;

    for (i = 0; i != GW_MCP_OTHER; ++i)
        if (h2o_memis(method.base, method.len, method_names[i], strlen(method_names[i])))
            return (gw_mcp_method_t)i;
    return GW_MCP_OTHER;
}

const char *gw_mcp_method_name(gw_mcp_method_t m)
{
    return (unsigned)m < GW_MCP_NUM_METHODS ? method_names[m] : method_names[GW_MCP_OTHER];
}

void gw_mcp_session_hash(h2o_iovec_t session, char out[GW_MCP_SESSION_HASH_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char digest[SHA256_DIGEST_LENGTH];
    size_t i;

    SHA256((const unsigned char *)session.base, session.len, digest);
    for (i = 0; i != GW_MCP_SESSION_HASH_LEN / 2; ++i) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[GW_MCP_SESSION_HASH_LEN] = '\0';
}
