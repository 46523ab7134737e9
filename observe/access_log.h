/*
 * One JSON line per request: time, client, method, host, sandbox and port
 * (for preview hosts), path (query kept, lizard_token removed), status,
 * bytes, duration, error code, cut reason; one summary line per connection per second
 * for requests abandoned before any response. Never a credential: no token
 * header, no cookie, no lizard_token parameter.
 */
#ifndef GW_OBSERVE_ACCESS_LOG_H
#define GW_OBSERVE_ACCESS_LOG_H

#include <h2o.h>

typedef struct st_gw_access_log_t gw_access_log_t;

typedef struct st_gw_access_log_stats_t {
    uint64_t written;             /* lines on their way to the file or in it */
    uint64_t dropped_full;        /* lines dropped: the writer's buffer was full (disk too slow) */
    uint64_t dropped_over_budget; /* lines dropped: a worker's lines-per-second budget was spent */
} gw_access_log_stats_t;

typedef struct st_gw_access_log_conf_t {
    char *const *domains; /* the preview domains, to log a request's sandbox and port; borrowed */
    size_t num_domains;
    uint64_t max_lines_per_second; /* per worker; 0: no limit */
    /* a request's client as text into buf (INET6_ADDRSTRLEN bytes): 0, or -1 when unknown; the one limits and
     * ingress rules use (a trusted listener's X-Forwarded-For). NULL: the connection's (common/client_addr.h) */
    int (*client_text)(void *arg, h2o_req_t *req, char *buf, size_t bufsize);
    void *client_arg;
} gw_access_log_conf_t;

/* The process's access log: writes to `fd` (O_APPEND) through a writer
 * thread. The fd stays the caller's and must outlive the log; conf is
 * copied (the domains stay borrowed). Aborts on out of memory. */
gw_access_log_t *gw_access_log_new(int fd, size_t num_workers, const gw_access_log_conf_t *conf);

/* After the workers are joined: writes pending summaries, stops the writer. NULL is a no-op. */
void gw_access_log_free(gw_access_log_t *log);

/* Installs the logger on `pathconf` (requests on workers' preview contexts
 * only: at most num_workers contexts, at most 8 pathconfs). Before any
 * context is created. */
void gw_access_log_register(h2o_pathconf_t *pathconf, gw_access_log_t *log);

/* Counters for /metrics; any thread. */
void gw_access_log_stats(gw_access_log_t *log, gw_access_log_stats_t *out);

/* Log rotation (SIGUSR1): opens `path` again (created 0640 if it was moved
 * away) and puts it under `fd`, the fd the writer thread writes to
 * (dup3), so no line is lost or split between files. Returns 0, or -1 with *err (malloc'd; the
 * old file stays in use). */
int gw_access_log_reopen(int fd, const char *path, char **err);

#endif
