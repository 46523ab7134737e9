/* Stand-in for gateway/access_log.c in the error-rendering fuzz target,
 * which never sends a response. */
#include "gateway/access_log.h"

void gw_access_log_note_error(h2o_req_t *req, const char *code)
{
    (void)req;
    (void)code;
}
