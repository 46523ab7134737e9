/*
 * The access log and the per-response counters behind /metrics. One JSON
 * line per request, written with a single write(2) to an O_APPEND fd so
 * lines from several workers never interleave; SIGUSR1 swaps the file under
 * that fd (log rotation). Credentials never appear: the path is logged with
 * lizard_token removed, and no header is logged.
 */
#define _GNU_SOURCE /* dup3 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "auth/query.h"
#include "routing/host.h"
#include "gateway/access_log.h"
#include "gateway/worker.h"

#define LOG_MODULE "lizard:code"
#define LOG_LINE_MAX 4096
#define LOG_FIELD_MAX 1024 /* longer values are cut, never the line's structure */
#define LOG_RESERVE 128    /* kept free in a line for the keys and fields after a long value */

typedef struct st_logger_t {
    h2o_logger_t super;
    int fd;
} logger_t;

void gw_access_log_note_error(h2o_req_t *req, const char *code)
{
    /* stored with the request (not emitted to stderr) so the log line and the
     * metrics can say which contract error answered it */
    h2o_vector_reserve(&req->pool, &req->error_logs, req->error_logs.size + 1);
    req->error_logs.entries[req->error_logs.size++] = (h2o_req_error_log_t){LOG_MODULE, h2o_iovec_init(code, strlen(code))};
}

static const char *error_code_of(h2o_req_t *req)
{
    size_t i;
    for (i = 0; i != req->error_logs.size; ++i)
        if (req->error_logs.entries[i].module == (const char *)LOG_MODULE ||
            strcmp(req->error_logs.entries[i].module, LOG_MODULE) == 0)
            return req->error_logs.entries[i].msg.base;
    return NULL;
}

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
    char num[24];
    int n = snprintf(num, sizeof(num), "%lld", v);
    put_key(l, key);
    put_raw(l, num, (size_t)n);
}

static void log_access(h2o_logger_t *_self, h2o_req_t *req)
{
    logger_t *self = (void *)_self;
    gw_server_t *server = H2O_STRUCT_FROM_MEMBER(gw_server_t, globalconf, req->conn->ctx->globalconf);
    const char *code = error_code_of(req);
    int status = req->res.status;
    line_t line;

    atomic_fetch_add_explicit(&server->stats.responses_by_class[status >= 100 && status < 600 ? status / 100 : 0], 1,
                              memory_order_relaxed);
    if (code != NULL) {
        for (int i = 0; i != GW_ERR_NUM_CODES; ++i)
            if (strcmp(gw_error_code_name(i), code) == 0)
                atomic_fetch_add_explicit(&server->stats.errors_by_code[i], 1, memory_order_relaxed);
    }
    if (self->fd == -1)
        return;

    line.len = 0;
    put_raw(&line, "{", 1);
    {
        char ts[32];
        struct tm tm;
        time_t t = req->timestamps.request_begin_at.tv_sec;
        gmtime_r(&t, &tm);
        size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(ts + n, sizeof(ts) - n, ".%03dZ", (int)(req->timestamps.request_begin_at.tv_usec / 1000));
        put_key(&line, "time");
        put_str(&line, ts, n);
    }
    {
        struct sockaddr_storage ss;
        socklen_t sslen;
        char host[NI_MAXHOST];
        size_t n = 0;
        if ((sslen = req->conn->callbacks->get_peername(req->conn, (void *)&ss)) != 0 &&
            (n = h2o_socket_getnumerichost((void *)&ss, sslen, host)) == SIZE_MAX)
            n = 0;
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
        const gw_config_t *conf = server->config;
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
        int64_t usec = h2o_timeval_subtract(&req->timestamps.request_begin_at, &req->timestamps.response_end_at);
        put_num(&line, "duration_ms", usec >= 0 ? usec / 1000 : -1);
    }
    if (code != NULL) {
        put_key(&line, "error");
        put_str(&line, code, strlen(code));
    }
    /* room for the closing brace and newline is always kept */
    if (line.len > sizeof(line.buf) - 2)
        line.len = sizeof(line.buf) - 2;
    line.buf[line.len++] = '}';
    line.buf[line.len++] = '\n';
    ssize_t r = write(self->fd, line.buf, line.len);
    (void)r; /* a full disk must not take the gateway down */
}

void gw_access_log_register(h2o_pathconf_t *pathconf, int fd)
{
    logger_t *self = (void *)h2o_create_logger(pathconf, sizeof(*self));
    self->super.log_access = log_access;
    self->fd = fd;
}

int gw_access_log_reopen(int fd, const char *path, char **err)
{
    char buf[512];
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
    snprintf(buf, sizeof(buf), "log.access: %s: %s", path, strerror(errno));
    *err = strdup(buf);
    return -1;
}
