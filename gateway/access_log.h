/*
 * One JSON line per request: time, client, method, host, sandbox and port
 * (for preview hosts), path (query kept, lizard_token removed), status,
 * bytes, duration, error code. Never a
 * credential: no token header, no cookie, no lizard_token parameter.
 */
#ifndef GW_GATEWAY_ACCESS_LOG_H
#define GW_GATEWAY_ACCESS_LOG_H

#include <h2o.h>

/* Installs the logger on `pathconf`, writing to fd (O_APPEND; one write(2) per line). */
void gw_access_log_register(h2o_pathconf_t *pathconf, int fd);

/* Log rotation (SIGUSR1): opens `path` again (created 0640 if it was moved
 * away) and puts it under `fd`, the fd every logger writes to, so no line is
 * lost or split between files. Returns 0, or -1 with *err (malloc'd; the
 * old file stays in use). */
int gw_access_log_reopen(int fd, const char *path, char **err);

/* Records the gateway error code of this request for the log line. */
void gw_access_log_note_error(h2o_req_t *req, const char *code);

#endif
