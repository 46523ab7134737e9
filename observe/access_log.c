/*
 * The access log. One JSON line per request, handed to a writer thread (log_writer.c) so that a slow
 * disk never stalls a worker. Floods are bounded: requests the client
 * abandoned before any response began are summed into one line per
 * connection per second, and each worker writes at most
 * log.access_max_lines_per_second lines (the rest are counted as dropped).
 * SIGUSR1 swaps the file under the writer's fd (log rotation). Credentials
 * never appear: the path is logged with lizard_token removed, and no header
 * is logged.
 */
#define _GNU_SOURCE /* dup3 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/engine.h"
#include "auth/query.h"
#include "routing/host.h"
#include "observe/access_log.h"
#include "errors/cut.h"
#include "errors/errors.h"
#include "observe/log_writer.h"
#include "observe/mcp.h"
#include "common/client_addr.h"
#include "common/errfmt.h"
#include "common/netaddr.h"
#include "common/numfmt.h"

#define LOG_LINE_MAX 4096
#define LOG_FIELD_MAX 1024 /* longer values are cut, never the line's structure */
#define LOG_RESERVE 128    /* kept free in a line for the keys and fields after a long value */
/* The writer's buffer: about 4 MiB of lines (10,000+) may wait for the disk. */
#define WRITER_BUFFER_BYTES (4 * 1024 * 1024)
/* Connections whose abandoned requests one worker sums at a time; the rest
 * are summed under one line without a connection. */
#define ABANDONED_SLOTS 16
#define ABANDONED_FLUSH_MS 1000

typedef struct st_abandoned_t {
    uint64_t conn_id; /* 0: the overflow slot's connections */
    uint64_t count;
    int http2;
    char client[INET6_ADDRSTRLEN];
} abandoned_t;

/* One per worker (per h2o context), touched only by that worker's thread. */
typedef struct st_worker_log_t {
    gw_access_log_t *log;
    uint64_t second; /* the second `lines` counts in */
    uint64_t lines;
    h2o_loop_t *loop; /* set at the first abandoned request */
    gw_timeout_t flush_timeout;
    gw_timer_t flush_entry;
    abandoned_t abandoned[ABANDONED_SLOTS + 1]; /* [ABANDONED_SLOTS]: overflow */
    size_t num_abandoned;
} worker_log_t;

/* The loggers of one log (one per pathconf it is registered on). */
#define MAX_LOGGERS 8

typedef struct st_logger_t {
    h2o_logger_t super;
    gw_access_log_t *log;
} logger_t;

struct st_gw_access_log_t {
    gw_log_writer_t *writer;
    gw_access_log_conf_t conf;
    worker_log_t *workers;
    size_t num_workers;
    atomic_size_t workers_taken; /* by on_context_init, one per context */
    logger_t *loggers[MAX_LOGGERS];
    size_t num_loggers;
    atomic_uint_fast64_t over_budget;
};

typedef struct st_line_t {
    char buf[LOG_LINE_MAX];
    size_t len;
} line_t;

static void put_raw(line_t *l, const char *s, size_t n)
{
    if (n > sizeof(l->buf) - l->len)
        n = sizeof(l->buf) - l->len;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void put_str(line_t *l, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t i;

    if (n > LOG_FIELD_MAX)
        n = LOG_FIELD_MAX;
    put_raw(l, "\"", 1);
    for (i = 0; i != n && l->len + 6 + LOG_RESERVE < sizeof(l->buf); ++i) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put_raw(l, e, 2);
        } else if (c < 0x20 || c >= 0x7f) {
            /* bytes are logged, not interpreted: non-ASCII becomes \u00XX */
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put_raw(l, e, 6);
        } else {
            put_raw(l, (const char *)&c, 1);
        }
    }
    put_raw(l, "\"", 1);
}

static void put_key(line_t *l, const char *key)
{
    put_raw(l, l->len == 1 ? "\"" : ",\"", l->len == 1 ? 1 : 2);
    put_raw(l, key, strlen(key));
    put_raw(l, "\":", 2);
}

static void put_num(line_t *l, const char *key, long long v)
{
    /* every line has a few: no printf (issue 11) */
    char num[1 + GW_NUMFMT_DEC_SIZE];
    size_t n = 0;

    if (v < 0)
        num[n++] = '-';
    n += gw_numfmt_dec(num + n, v < 0 ? -(unsigned long long)v : (unsigned long long)v);
    put_key(l, key);
    put_raw(l, num, n);
}

/* The client's address (gw_netaddr_peer_text) into host (INET6_ADDRSTRLEN
 * bytes at least): its length, 0 (and "") when unknown. */
static size_t client_of(h2o_conn_t *conn, char *host)
{
    int n = gw_client_addr_text(conn, host, INET6_ADDRSTRLEN);

    if (n < 0)
        n = 0;
    host[n] = '\0';
    return (size_t)n;
}

/* A request's client: the configured accessor's (the pipeline's), else the connection's. */
static size_t client_of_request(const gw_access_log_conf_t *conf, h2o_req_t *req, char *host)
{
    if (conf->client_text == NULL)
        return client_of(req->conn, host);
    if (conf->client_text(conf->client_arg, req, host, INET6_ADDRSTRLEN) != 0)
        host[0] = '\0';
    return strlen(host);
}

/* Spends one line of this second's budget; 0 when there is none left. */
static int take_line(worker_log_t *wl, uint64_t now_ms)
{
    if (wl->log->conf.max_lines_per_second == 0)
        return 1;
    if (now_ms / 1000 != wl->second) {
        wl->second = now_ms / 1000;
        wl->lines = 0;
    }
    if (wl->lines == wl->log->conf.max_lines_per_second) {
        atomic_fetch_add_explicit(&wl->log->over_budget, 1, memory_order_relaxed);
        return 0;
    }
    ++wl->lines;
    return 1;
}

static void emit(worker_log_t *wl, line_t *l, uint64_t now_ms)
{
    /* room for the closing brace and newline is always kept */
    if (l->len > sizeof(l->buf) - 2)
        l->len = sizeof(l->buf) - 2;
    l->buf[l->len++] = '}';
    l->buf[l->len++] = '\n';
    if (take_line(wl, now_ms))
        gw_log_writer_append(wl->log->writer, l->buf, l->len);
}

static void put_time(line_t *l, time_t t, int ms)
{
    char ts[32];
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    /* ".mmmZ", ms in [0, 999] */
    ts[n++] = '.';
    ts[n++] = (char)('0' + ms / 100);
    ts[n++] = (char)('0' + ms / 10 % 10);
    ts[n++] = (char)('0' + ms % 10);
    ts[n++] = 'Z';
    put_key(l, "time");
    put_str(l, ts, n);
}

/* mcp_method, mcp_name (cut, escaped) and mcp_session (a hash, never the id), from the request's headers (observe/mcp.h). */
static void put_mcp(line_t *l, h2o_req_t *req)
{
    gw_mcp_headers_t mcp;

    gw_mcp_headers_find(&req->headers, &mcp);
    if (mcp.method.base != NULL) {
        put_key(l, "mcp_method");
        put_str(l, mcp.method.base, mcp.method.len < GW_MCP_METHOD_LOG_MAX ? mcp.method.len : GW_MCP_METHOD_LOG_MAX);
    }
    if (mcp.name.base != NULL) {
        put_key(l, "mcp_name");
        put_str(l, mcp.name.base, mcp.name.len < GW_MCP_NAME_LOG_MAX ? mcp.name.len : GW_MCP_NAME_LOG_MAX);
    }
    if (mcp.session.base != NULL) {
        char hash[GW_MCP_SESSION_HASH_LEN + 1];
        gw_mcp_session_hash(mcp.session, hash);
        put_key(l, "mcp_session");
        put_str(l, hash, GW_MCP_SESSION_HASH_LEN);
    }
}

/* One line per connection that abandoned requests since the last flush. */
static void flush_abandoned(gw_timer_t *entry)
{
    worker_log_t *wl = H2O_STRUCT_FROM_MEMBER(worker_log_t, flush_entry, entry);
    uint64_t now_ms = h2o_now(wl->loop);
    size_t i;

    for (i = 0; i != ABANDONED_SLOTS + 1; ++i) {
        abandoned_t *a = &wl->abandoned[i];
        line_t line;
        if (a->count == 0)
            continue;
        line.len = 0;
        put_raw(&line, "{", 1);
        put_time(&line, (time_t)(now_ms / 1000), (int)(now_ms % 1000));
        put_key(&line, "event");
        put_str(&line, H2O_STRLIT("abandoned_requests"));
        if (a->conn_id != 0) {
            put_key(&line, "client");
            put_str(&line, a->client, strlen(a->client));
            put_num(&line, "connection", (long long)a->conn_id);
            put_key(&line, "protocol");
            put_str(&line, a->http2 ? "HTTP/2" : "HTTP/1.1", a->http2 ? 6 : 8);
        }
        put_num(&line, "count", (long long)a->count);
        emit(wl, &line, now_ms);
        memset(a, 0, sizeof(*a));
    }
    wl->num_abandoned = 0;
}

/* A request that ended before any response began (the client reset the
 * stream or closed the connection): summed per connection, not logged. */
static void note_abandoned(worker_log_t *wl, h2o_req_t *req)
{
    abandoned_t *a = NULL;
    size_t i;

    if (wl->loop == NULL) {
        wl->loop = req->conn->ctx->loop;
        gw_timeout_init(wl->loop, &wl->flush_timeout, ABANDONED_FLUSH_MS);
        wl->flush_entry.cb = flush_abandoned;
    }
    for (i = 0; i != wl->num_abandoned; ++i)
        if (wl->abandoned[i].conn_id == req->conn->id)
            a = &wl->abandoned[i];
    if (a == NULL) {
        if (wl->num_abandoned != ABANDONED_SLOTS) {
            a = &wl->abandoned[wl->num_abandoned++];
            a->conn_id = req->conn->id;
            a->http2 = req->version >= 0x200;
            client_of(req->conn, a->client);
        } else {
            a = &wl->abandoned[ABANDONED_SLOTS];
        }
    }
    ++a->count;
    if (!gw_timer_is_linked(&wl->flush_entry))
        gw_timer_link(wl->loop, &wl->flush_timeout, &wl->flush_entry);
}

/* The logger is on several pathconfs; the first of its instances to meet a
 * context takes a worker_log_t for it, the others share that one, so a
 * worker has one lines-per-second budget whichever path a request took. */
static void on_context_init(h2o_logger_t *_self, h2o_context_t *ctx)
{
    gw_access_log_t *log = ((logger_t *)_self)->log;
    worker_log_t *wl = NULL;
    size_t i;

    for (i = 0; i != log->num_loggers && wl == NULL; ++i)
        wl = h2o_context_get_logger_context(ctx, &log->loggers[i]->super);
    if (wl == NULL) {
        size_t index = atomic_fetch_add(&log->workers_taken, 1);
        if (index >= log->num_workers)
            h2o_fatal("access log: more contexts than workers");
        wl = &log->workers[index];
    }
    h2o_context_set_logger_context(ctx, _self, wl);
}

static void log_access(h2o_logger_t *_self, h2o_req_t *req)
{
    logger_t *self = (void *)_self;
    worker_log_t *wl = h2o_context_get_logger_context(req->conn->ctx, _self);
    int code = gw_error_code_of(req);
    int status = req->res.status;
    line_t line;

    if (status == 0) {
        note_abandoned(wl, req);
        return;
    }

    line.len = 0;
    put_raw(&line, "{", 1);
    put_time(&line, req->timestamps.request_begin_at.tv_sec, (int)(req->timestamps.request_begin_at.tv_usec / 1000));
    {
        char host[INET6_ADDRSTRLEN];
        size_t n = client_of_request(&self->log->conf, req, host);
        put_key(&line, "client");
        put_str(&line, host, n);
    }
    put_key(&line, "method");
    put_str(&line, req->input.method.base, req->input.method.len);
    put_key(&line, "host");
    put_str(&line, req->input.authority.base, req->input.authority.len);
    {
        /* parsed again rather than carried: the log must not depend on how far the pipeline got */
        gw_host_t host;
        const gw_access_log_conf_t *conf = &self->log->conf;
        if (gw_host_parse(req->input.authority, conf->domains, conf->num_domains, &host) == GW_HOST_OK) {
            put_key(&line, "sandbox");
            put_str(&line, host.sandbox_id, strlen(host.sandbox_id));
            put_num(&line, "port", host.port);
        }
    }
    {
        h2o_iovec_t value, path = req->input.path;
        gw_query_take(&req->pool, req->input.path, h2o_iovec_init(H2O_STRLIT("lizard_token")), &value, &path);
        put_key(&line, "path");
        put_str(&line, path.base, path.len);
    }
    put_key(&line, "protocol");
    {
        const char *proto = req->version >= 0x200 ? "HTTP/2" : req->version == 0x101 ? "HTTP/1.1" : "HTTP/1.0";
        put_str(&line, proto, strlen(proto));
    }
    put_num(&line, "status", status);
    put_num(&line, "bytes_sent", (long long)req->bytes_sent);
    {
        /* A WebSocket upgrade's line is written when the tunnel opens (h2o
         * disposes the request then), so the response has no end: its
         * duration is the time to the 101. */
        struct timeval *end = status == 101 && !h2o_timeval_is_null(&req->timestamps.response_start_at) &&
                                      h2o_timeval_is_null(&req->timestamps.response_end_at)
                                  ? &req->timestamps.response_start_at
                                  : &req->timestamps.response_end_at;
        int64_t usec = h2o_timeval_subtract(&req->timestamps.request_begin_at, end);
        put_num(&line, "duration_ms", usec >= 0 ? usec / 1000 : -1);
    }
    if (code >= 0) {
        const char *name = gw_error_code_name(code);
        put_key(&line, "error");
        put_str(&line, name, strlen(name));
    }
    {
        /* the gateway ended the response before its end (CONTRACT.md, Long calls) */
        gw_cut_reason_t cut = gw_cut_of(req);
        if (cut != GW_CUT_NONE) {
            const char *name = gw_cut_reason_name(cut);
            put_key(&line, "cut");
            put_str(&line, name, strlen(name));
        }
    }
    put_mcp(&line, req);
    emit(wl, &line, h2o_now(req->conn->ctx->loop));
}

gw_access_log_t *gw_access_log_new(int fd, size_t num_workers, const gw_access_log_conf_t *conf)
{
    gw_access_log_t *log = h2o_mem_alloc(sizeof(*log));
    size_t i;

    memset(log, 0, sizeof(*log));
    log->writer = gw_log_writer_new(fd, WRITER_BUFFER_BYTES);
    log->conf = *conf;
    log->num_workers = num_workers;
    log->workers = h2o_mem_alloc(sizeof(*log->workers) * num_workers);
    memset(log->workers, 0, sizeof(*log->workers) * num_workers);
    for (i = 0; i != num_workers; ++i)
        log->workers[i].log = log;
    return log;
}

void gw_access_log_free(gw_access_log_t *log)
{
    if (log == NULL)
        return;
    /* the workers are joined: their pending summaries go out now */
    for (size_t i = 0; i != log->num_workers; ++i)
        if (log->workers[i].loop != NULL && gw_timer_is_linked(&log->workers[i].flush_entry))
            flush_abandoned(&log->workers[i].flush_entry);
    gw_log_writer_free(log->writer);
    free(log->workers);
    free(log);
}

void gw_access_log_register(h2o_pathconf_t *pathconf, gw_access_log_t *log)
{
    logger_t *self = (void *)h2o_create_logger(pathconf, sizeof(*self));

    if (log->num_loggers == MAX_LOGGERS)
        h2o_fatal("access log: registered on too many paths");
    self->super.on_context_init = on_context_init;
    self->super.log_access = log_access;
    self->log = log;
    log->loggers[log->num_loggers++] = self;
}

void gw_access_log_stats(gw_access_log_t *log, gw_access_log_stats_t *out)
{
    out->written = gw_log_writer_written(log->writer);
    out->dropped_full = gw_log_writer_dropped(log->writer);
    out->dropped_over_budget = atomic_load_explicit(&log->over_budget, memory_order_relaxed);
}

int gw_access_log_reopen(int fd, const char *path, char **err)
{
    int nfd;

    if ((nfd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640)) == -1)
        goto Error;
    /* Atomic for the workers: a write(2) under way finishes in the old file, every later one
     * goes to the new file, and no line is ever written to a closed fd. */
    if (dup3(nfd, fd, O_CLOEXEC) == -1) {
        int e = errno;
        close(nfd);
        errno = e;
        goto Error;
    }
    close(nfd);
    return 0;

Error:
    return gw_errorf(err, "log.access: %s: %s", path, strerror(errno));
}
