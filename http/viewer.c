/*
 * The desktop viewer's files (viewer.h): read once, sorted by path, each
 * with its gzip form when that is smaller; looked up by binary search.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <openssl/evp.h>
#include "common/errfmt.h"
#include "http/redirect.h"
#include "http/viewer.h"

#define VERSION_LEN 16 /* hex digits of the digest of every file */

typedef struct st_viewer_file_t {
    char *path; /* relative to the viewer's directory, '/'-separated, NUL-terminated */
    size_t path_len;
    h2o_iovec_t body;
    h2o_iovec_t gz; /* {NULL, 0}: sent as is */
    const char *type;
} viewer_file_t;

struct st_gw_viewer_t {
    viewer_file_t *files;
    size_t num, cap, bytes;
    char version[VERSION_LEN + 1];
};

static const struct {
    const char *ext, *type;
    int text;
} types[] = {
    {".html", "text/html; charset=utf-8", 1},
    {".js", "text/javascript; charset=utf-8", 1},
    {".css", "text/css; charset=utf-8", 1},
    {".json", "application/json", 1},
    {".svg", "image/svg+xml", 1},
    {".png", "image/png", 0},
    {".ico", "image/x-icon", 0},
    {".oga", "audio/ogg", 0},
    {".ogg", "audio/ogg", 0},
    {".mp3", "audio/mpeg", 0},
    {".woff", "font/woff", 0},
    {".woff2", "font/woff2", 0},
    {".txt", "text/plain; charset=utf-8", 1},
    {".map", "application/json", 1},
};

static int type_of(const char *path, size_t len, const char **type)
{
    size_t i, n;

    for (i = 0; i != sizeof(types) / sizeof(types[0]); ++i) {
        n = strlen(types[i].ext);
        if (len > n && memcmp(path + len - n, types[i].ext, n) == 0) {
            *type = types[i].type;
            return types[i].text;
        }
    }
    *type = "application/octet-stream";
    return 0;
}

/* The gzip form of `in` when it is smaller, else {NULL, 0}. */
static h2o_iovec_t gzip_of(h2o_iovec_t in)
{
    z_stream zs;
    h2o_iovec_t out = {NULL, 0};

    memset(&zs, 0, sizeof(zs));
    if (in.len == 0 || deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return out;
    out.len = deflateBound(&zs, (uLong)in.len);
    out.base = h2o_mem_alloc(out.len);
    zs.next_in = (Bytef *)in.base;
    zs.avail_in = (uInt)in.len;
    zs.next_out = (Bytef *)out.base;
    zs.avail_out = (uInt)out.len;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END || zs.total_out >= in.len) {
        free(out.base);
        out = h2o_iovec_init(NULL, 0);
    } else {
        out.len = zs.total_out;
    }
    deflateEnd(&zs);
    return out;
}

static int read_file(const char *path, size_t budget, h2o_iovec_t *out, char **err)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t got = 0;

    if (fd == -1 || fstat(fd, &st) != 0) {
        gw_errorf(err, "%s: %s", path, strerror(errno));
        goto Error;
    }
    if ((uint64_t)st.st_size > budget) {
        gw_errorf(err, "%s: the viewer's files are over %d bytes", path, GW_VIEWER_MAX_BYTES);
        goto Error;
    }
    out->base = h2o_mem_alloc((size_t)st.st_size + 1);
    while (got != (size_t)st.st_size) {
        ssize_t n = read(fd, out->base + got, (size_t)st.st_size - got);
        if (n <= 0) {
            gw_errorf(err, "%s: %s", path, n == 0 ? "shorter than its size" : strerror(errno));
            free(out->base);
            goto Error;
        }
        got += (size_t)n;
    }
    out->len = got;
    close(fd);
    return 0;
Error:
    if (fd != -1)
        close(fd);
    return -1;
}

static int add_file(gw_viewer_t *v, const char *full, const char *rel, char **err)
{
    viewer_file_t *f;

    if (v->num == GW_VIEWER_MAX_FILES)
        return gw_errorf(err, "%s: more than %d files in the viewer", full, GW_VIEWER_MAX_FILES);
    if (v->num == v->cap) {
        v->cap = v->cap != 0 ? v->cap * 2 : 64;
        v->files = h2o_mem_realloc(v->files, v->cap * sizeof(*v->files));
    }
    f = &v->files[v->num];
    memset(f, 0, sizeof(*f));
    if (read_file(full, GW_VIEWER_MAX_BYTES - v->bytes, &f->body, err) != 0)
        return -1;
    ++v->num;
    v->bytes += f->body.len;
    f->path_len = strlen(rel);
    f->path = h2o_strdup(NULL, rel, f->path_len).base;
    if (type_of(f->path, f->path_len, &f->type))
        f->gz = gzip_of(f->body);
    return 0;
}

/* Adds the files under `full` (a directory; `rel` its path in the viewer, "" at the top). */
static int walk(gw_viewer_t *v, char *full, size_t full_len, char *rel, size_t rel_len, unsigned depth, char **err)
{
    DIR *d;
    struct dirent *e;
    struct stat st;
    int ret = 0;

    if (depth > GW_VIEWER_MAX_DEPTH)
        return gw_errorf(err, "%s: directories deeper than %d", full, GW_VIEWER_MAX_DEPTH);
    if ((d = opendir(full)) == NULL)
        return gw_errorf(err, "%s: %s", full, strerror(errno));
    while (ret == 0 && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        if (full_len + 1 + n >= PATH_MAX || rel_len + 1 + n >= PATH_MAX) {
            ret = gw_errorf(err, "%s: a path longer than %d bytes", full, PATH_MAX);
            break;
        }
        full[full_len] = '/';
        memcpy(full + full_len + 1, e->d_name, n + 1);
        memcpy(rel + rel_len + (rel_len != 0), e->d_name, n + 1);
        if (rel_len != 0)
            rel[rel_len] = '/';
        if (stat(full, &st) != 0)
            continue; /* a dangling link */
        if (S_ISDIR(st.st_mode))
            ret = walk(v, full, full_len + 1 + n, rel, rel_len + (rel_len != 0) + n, depth + 1, err);
        else if (S_ISREG(st.st_mode))
            ret = add_file(v, full, rel, err);
        full[full_len] = '\0';
        rel[rel_len] = '\0';
    }
    closedir(d);
    return ret;
}

static int compare_files(const void *a, const void *b)
{
    return strcmp(((const viewer_file_t *)a)->path, ((const viewer_file_t *)b)->path);
}

static const viewer_file_t *find(const gw_viewer_t *v, const char *path, size_t len)
{
    size_t lo = 0, hi = v->num;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const viewer_file_t *f = &v->files[mid];
        int c = memcmp(f->path, path, f->path_len < len ? f->path_len : len);
        if (c == 0)
            c = f->path_len < len ? -1 : f->path_len > len ? 1 : 0;
        if (c == 0)
            return f;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void set_version(gw_viewer_t *v)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char digest[EVP_MAX_MD_SIZE];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t i;

    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
        h2o_fatal("desktop viewer: no SHA-256");
    for (i = 0; i != v->num; ++i) {
        EVP_DigestUpdate(ctx, v->files[i].path, v->files[i].path_len + 1);
        EVP_DigestUpdate(ctx, v->files[i].body.base, v->files[i].body.len);
    }
    EVP_DigestFinal_ex(ctx, digest, NULL);
    EVP_MD_CTX_free(ctx);
    for (i = 0; i != VERSION_LEN / 2; ++i) {
        v->version[2 * i] = hex[digest[i] >> 4];
        v->version[2 * i + 1] = hex[digest[i] & 15];
    }
    v->version[VERSION_LEN] = '\0';
}

gw_viewer_t *gw_viewer_load(const char *dir, char **err)
{
    gw_viewer_t *v = h2o_mem_alloc(sizeof(*v));
    char full[PATH_MAX], rel[PATH_MAX] = "";
    size_t len = strlen(dir);

    memset(v, 0, sizeof(*v));
    if (len == 0 || len >= PATH_MAX) {
        gw_errorf(err, "desktop.viewer_dir: not a usable path");
        goto Error;
    }
    memcpy(full, dir, len + 1);
    if (walk(v, full, len, rel, 0, 0, err) != 0)
        goto Error;
    qsort(v->files, v->num, sizeof(*v->files), compare_files);
    if (find(v, H2O_STRLIT("vnc.html")) == NULL) {
        gw_errorf(err, "%s: no vnc.html (is it noVNC? apt-get install novnc)", dir);
        goto Error;
    }
    set_version(v);
    return v;
Error:
    gw_viewer_free(v);
    return NULL;
}

gw_viewer_t *gw_viewer_load_or_say(const char *dir)
{
    gw_viewer_t *v;
    char *err = NULL;

    if (dir == NULL)
        return NULL;
    if ((v = gw_viewer_load(dir, &err)) == NULL) {
        fprintf(stderr, "lizard-gateway: desktop viewer not loaded: %s; desktop (proto rfb) ports serve only their WebSocket\n",
                err);
        free(err);
        return NULL;
    }
    fprintf(stderr, "lizard-gateway: desktop viewer: %zu files (%zu bytes) from %s, served as %s%s/\n", v->num, v->bytes, dir,
            GW_VIEWER_PREFIX, v->version);
    return v;
}

void gw_viewer_free(gw_viewer_t *v)
{
    size_t i;

    if (v == NULL)
        return;
    for (i = 0; i != v->num; ++i) {
        free(v->files[i].path);
        free(v->files[i].body.base);
        free(v->files[i].gz.base);
    }
    free(v->files);
    free(v);
}

size_t gw_viewer_count(const gw_viewer_t *v, size_t *bytes)
{
    *bytes = v->bytes;
    return v->num;
}

static void add_header(h2o_req_t *req, const char *name, size_t name_len, const char *value, size_t value_len)
{
    h2o_add_header_by_str(&req->pool, &req->res.headers, name, name_len, 0, NULL, value, value_len);
}

static int accepts_gzip(h2o_req_t *req)
{
    ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_ACCEPT_ENCODING, -1);
    return i != -1 &&
           h2o_contains_token(req->headers.entries[i].value.base, req->headers.entries[i].value.len, H2O_STRLIT("gzip"), ',');
}

static void send_file(h2o_req_t *req, const viewer_file_t *f)
{
    static h2o_generator_t generator = {NULL, NULL};
    h2o_iovec_t body = f->body;

    req->res.status = 200;
    req->res.reason = "OK";
    add_header(req, H2O_STRLIT("content-type"), f->type, strlen(f->type));
    add_header(req, H2O_STRLIT("cache-control"), H2O_STRLIT("public, max-age=31536000, immutable"));
    add_header(req, H2O_STRLIT("x-content-type-options"), H2O_STRLIT("nosniff"));
    if (f->gz.base != NULL) {
        add_header(req, H2O_STRLIT("vary"), H2O_STRLIT("accept-encoding"));
        if (accepts_gzip(req)) {
            add_header(req, H2O_STRLIT("content-encoding"), H2O_STRLIT("gzip"));
            body = f->gz;
        }
    }
    req->res.content_length = body.len;
    h2o_start_response(req, &generator);
    if (h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD")))
        body.len = 0;
    h2o_send(req, &body, 1, H2O_SEND_STATE_FINAL);
}

/* "/" goes to the viewer, told to connect back to this host at GW_VIEWER_WS_PATH. */
static void send_start(const gw_viewer_t *v, h2o_req_t *req, int view_only)
{
    char path[256];
    size_t n = 0;
    const char *parts[] = {GW_VIEWER_PREFIX, v->version,
                           "/vnc.html?autoconnect=true&reconnect=true&resize=scale&path=" GW_VIEWER_WS_PATH "&view_only=",
                           view_only ? "true" : "false"};
    size_t i;

    for (i = 0; i != sizeof(parts) / sizeof(parts[0]); ++i) {
        size_t k = strlen(parts[i]);
        memcpy(path + n, parts[i], k); /* 16 + 16 + 97 + 5: within path */
        n += k;
    }
    gw_redirect_send(req, 302, "Found", gw_redirect_location(&req->pool, req->authority, h2o_iovec_init(path, n)));
}

int gw_viewer_serve(const gw_viewer_t *v, h2o_req_t *req, h2o_iovec_t path, int view_only)
{
    size_t len = path.len, plen = sizeof(GW_VIEWER_PREFIX) - 1;
    const char *q = memchr(path.base, '?', path.len);
    const viewer_file_t *f;

    if (v == NULL || !(h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET")) ||
                       h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD"))))
        return 0;
    if (q != NULL)
        len = (size_t)(q - path.base);
    if (len == 1 && path.base[0] == '/') {
        send_start(v, req, view_only);
        return 1;
    }
    if (len <= plen + VERSION_LEN + 1 || memcmp(path.base, GW_VIEWER_PREFIX, plen) != 0 ||
        memcmp(path.base + plen, v->version, VERSION_LEN) != 0 || path.base[plen + VERSION_LEN] != '/')
        return 0;
    if ((f = find(v, path.base + plen + VERSION_LEN + 1, len - plen - VERSION_LEN - 1)) == NULL)
        return 0;
    send_file(req, f);
    return 1;
}
