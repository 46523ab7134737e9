/*
 * One JSON line per request: time, client, method, host, sandbox and port
 * (for preview hosts), path (query kept, lizard_token removed), status,
 * bytes, duration, error code; one summary line per connection per second
 * for requests abandoned before any response. Never a credential: no token
 * header, no cookie, no lizard_token parameter.
 */
#ifndef GW_GATEWAY_ACCESS_LOG_H
#define GW_GATEWAY_ACCESS_LOG_H

#include <h2o.h>

typedef struct st_gw_access_log_t gw_access_log_t;

typedef struct st_gw_access_log_stats_t {
    uint64_t written;             /* lines on their way to the file or in it */
    uint64_t dropped_full;        /* lines dropped: the writer's buffer was full (disk too slow) */
    uint64_t dropped_over_budget; /* lines dropped: a worker's lines-per-second budget was spent */
    uint64_t abandoned_requests;  /* requests that ended before any response (summed, not logged) */
} gw_access_log_stats_t;

/* The process's access log: writes to `fd` (O_APPEND; -1: off, the logger
 * then only counts for /metrics) through a writer thread, at most
 * `max_lines_per_second` lines per worker (0: no limit). The fd stays the
 * caller's and must outlive the log. Aborts on out of memory. */
gw_access_log_t *gw_access_log_new(int fd, size_t num_workers, uint64_t max_lines_per_second);

/* After the workers are joined: writes pending summaries, stops the writer. NULL is a no-op. */
void gw_access_log_free(gw_access_log_t *log);

/* Installs the logger on `pathconf` (requests on workers' preview contexts only). */
void gw_access_log_register(h2o_pathconf_t *pathconf, gw_access_log_t *log);

/* Counters for /metrics; any thread. */
void gw_access_log_stats(gw_access_log_t *log, gw_access_log_stats_t *out);

/* Records the gateway error code of this request for the log line. */
void gw_access_log_note_error(h2o_req_t *req, const char *code);

#endif
