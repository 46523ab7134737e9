/*
 * The sandbox record parsed from an HGETALL reply of <prefix>sbx:{<id>}.
 * One allocation holds the record, its port table and its strings; it is
 * immutable after parsing and shared by reference count within one thread.
 */
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "routing/cors_origins.h"
#include "routing/sandbox.h"

#define PORT_FIELD_PREFIX "port:"
#define HOST_FIELD_PREFIX "host:"
#define PROTO_FIELD_PREFIX "proto:"
#define TIMEOUT_FIELD_PREFIX "timeout:"
#define CORS_FIELD_PREFIX "cors:"
#define CORS_ORIGINS_FIELD_PREFIX "cors_origins:"

static int is_string(const redisReply *r)
{
    return r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

static int field_is(const redisReply *f, const char *name)
{
    size_t len = strlen(name);
    return f->len == len && memcmp(f->str, name, len) == 0;
}

/* A "port:<n>" field with a recognised value: fills port/access and returns 1. */
static int parse_port_field(const redisReply *f, const redisReply *v, gw_sandbox_port_t *out)
{
    size_t plen = sizeof(PORT_FIELD_PREFIX) - 1;

    if ((size_t)f->len <= plen || memcmp(f->str, PORT_FIELD_PREFIX, plen) != 0)
        return 0;
    if (gw_port_parse(f->str + plen, (size_t)f->len - plen, &out->port) != 0)
        return 0;
    if (field_is(v, "private"))
        out->access = GW_PORT_PRIVATE;
    else if (field_is(v, "public"))
        out->access = GW_PORT_PUBLIC;
    else
        return 0;
    return 1;
}

/* The port of a "host:<n>" field: returns 1 and sets *port. */
static int parse_host_field(const redisReply *f, uint16_t *port)
{
    size_t plen = sizeof(HOST_FIELD_PREFIX) - 1;

    return (size_t)f->len > plen && memcmp(f->str, HOST_FIELD_PREFIX, plen) == 0 &&
           gw_port_parse(f->str + plen, (size_t)f->len - plen, port) == 0;
}

/* The port of a "<prefix><n>" field: returns 1 and sets *port. */
static int parse_prefixed_field(const redisReply *f, const char *prefix, size_t plen, uint16_t *port)
{
    return (size_t)f->len > plen && memcmp(f->str, prefix, plen) == 0 &&
           gw_port_parse(f->str + plen, (size_t)f->len - plen, port) == 0;
}

static int parse_proto_field(const redisReply *f, uint16_t *port)
{
    return parse_prefixed_field(f, H2O_STRLIT(PROTO_FIELD_PREFIX), port);
}

/* A decimal from GW_SANDBOX_MIN_TIMEOUT_MS to max, no sign: the value, else 0. */
static uint32_t parse_timeout(const redisReply *v, uint64_t max)
{
    uint64_t n = 0;
    size_t i;

    if (v->len == 0 || v->len > 10)
        return 0;
    for (i = 0; i != v->len; ++i) {
        if (v->str[i] < '0' || v->str[i] > '9')
            return 0;
        n = n * 10 + (uint64_t)(v->str[i] - '0');
    }
    return n >= GW_SANDBOX_MIN_TIMEOUT_MS && n <= max ? (uint32_t)n : 0;
}

static gw_sandbox_port_t *find_port(const gw_sandbox_t *s, uint16_t port)
{
    size_t lo = 0, hi = s->num_ports;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ports[mid].port == port)
            return s->ports + mid;
        if (s->ports[mid].port < port)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* A record value as a log line may show it: at most max bytes, unprintable
 * bytes and '"' as '?', NUL-terminated (dst holds max + 1). */
static void copy_printable(char *dst, size_t max, const redisReply *v)
{
    size_t i, n = (size_t)v->len < max ? (size_t)v->len : max;

    for (i = 0; i != n; ++i)
        dst[i] = v->str[i] >= 0x20 && v->str[i] < 0x7f && v->str[i] != '"' ? v->str[i] : '?';
    dst[n] = '\0';
}

/* host:<n> of an exposed port: its mode, or the fallback and a note of the
 * value for the operator (the first such field only). */
static void set_host_mode(gw_sandbox_t *s, uint16_t port, const redisReply *v)
{
    gw_sandbox_port_t *p = find_port(s, port);

    if (p == NULL)
        return; /* not exposed: never proxied, whatever it says */
    if (field_is(v, "preserve")) {
        p->host = GW_PORT_HOST_PRESERVE;
    } else if (field_is(v, "localhost")) {
        p->host = GW_PORT_HOST_LOCALHOST;
    } else {
        p->host = GW_PORT_HOST_DEFAULT;
        if (s->bad_host_port != 0)
            return;
        s->bad_host_port = port;
        copy_printable(s->bad_host_value, GW_SANDBOX_BAD_HOST_MAX, v);
    }
}

/* timeout:<n> of an exposed port: its value, or the defaults and a note of
 * the value for the operator (the first such field only). */
static void set_timeout(gw_sandbox_t *s, uint16_t port, const redisReply *v, uint64_t max)
{
    gw_sandbox_port_t *p = find_port(s, port);

    if (p == NULL)
        return;
    if ((p->timeout_ms = parse_timeout(v, max)) != 0 || s->bad_timeout_port != 0)
        return;
    s->bad_timeout_port = port;
    copy_printable(s->bad_timeout_value, GW_SANDBOX_BAD_HOST_MAX, v);
}

/* cors_origins:<n> of an exposed port, normalized into the record's storage at *strings; its first entry that is
 * not an origin is noted for the operator (the first such field only) */
static void set_cors_origins(gw_sandbox_t *s, gw_sandbox_port_t *p, const redisReply *v, char **strings)
{
    h2o_iovec_t bad;
    int any;
    size_t n = gw_cors_origins_parse(v->str, (size_t)v->len, *strings, &any, &bad);

    p->cors_any = any;
    p->cors_origins = h2o_iovec_init(n != 0 ? *strings : NULL, n);
    *strings += n;
    if (bad.base != NULL && s->bad_cors_port == 0) {
        redisReply shown = {.str = (char *)bad.base, .len = bad.len};
        s->bad_cors_port = p->port;
        copy_printable(s->bad_cors_value, GW_SANDBOX_BAD_HOST_MAX, &shown);
    }
}

/* host:<n>, timeout:<n>, proto:<n> (tcp, h2c, rfb; "http" and anything else: an HTTP port), cors:<n> (= edge; "app" and
 * anything else: the app's) and cors_origins:<n> of an exposed port */
static void set_port_option(gw_sandbox_t *s, const redisReply *f, const redisReply *v, uint64_t max_timeout_ms, char **strings)
{
    gw_sandbox_port_t *p;
    uint16_t port;

    if (parse_host_field(f, &port)) {
        set_host_mode(s, port, v);
    } else if (parse_prefixed_field(f, H2O_STRLIT(TIMEOUT_FIELD_PREFIX), &port)) {
        set_timeout(s, port, v, max_timeout_ms);
    } else if (parse_proto_field(f, &port) && (p = find_port(s, port)) != NULL) {
        p->tcp = field_is(v, "tcp");
        p->h2c = field_is(v, "h2c");
        p->rfb = field_is(v, "rfb");
    } else if (parse_prefixed_field(f, CORS_FIELD_PREFIX, sizeof(CORS_FIELD_PREFIX) - 1, &port) && field_is(v, "edge") &&
               (p = find_port(s, port)) != NULL) {
        p->cors_edge = 1;
    } else if (parse_prefixed_field(f, CORS_ORIGINS_FIELD_PREFIX, sizeof(CORS_ORIGINS_FIELD_PREFIX) - 1, &port) &&
               (p = find_port(s, port)) != NULL && p->cors_origins.base == NULL && !p->cors_any) {
        set_cors_origins(s, p, v, strings);
    }
}

static gw_sandbox_state_t parse_state(const redisReply *v)
{
    static const gw_sandbox_state_t states[] = {GW_SANDBOX_RUNNING, GW_SANDBOX_STARTING, GW_SANDBOX_PAUSED, GW_SANDBOX_STOPPED};
    size_t i;

    for (i = 0; i != sizeof(states) / sizeof(states[0]); ++i)
        if (field_is(v, gw_sandbox_state_name(states[i])))
            return states[i];
    return GW_SANDBOX_STATE_UNKNOWN;
}

static int parse_token(const redisReply *v, char *out, unsigned char digest[32])
{
    /* 64 hex digits, either case; kept in lowercase, as the contract writes them, and decoded */
    if (v->len != 64 || h2o_hex_decode(digest, v->str, 64) != 0)
        return 0;
    memcpy(out, v->str, 64);
    h2o_strtolower(out, 64);
    out[64] = '\0';
    return 1;
}

/* link_epoch: a decimal integer with no sign, at most 19 digits (leading
 * zeros are harmless here: the value is compared, never re-signed). */
static int parse_epoch(const redisReply *v, uint64_t *out)
{
    size_t n = h2o_strtosize(v->str, (size_t)v->len);

    if (n == SIZE_MAX)
        return 0;
    *out = n;
    return 1;
}

static int cmp_port(const void *a, const void *b)
{
    const gw_sandbox_port_t *x = a, *y = b;
    return (int)x->port - (int)y->port;
}

/* Copies a string value into the record's trailing storage. */
static h2o_iovec_t copy_value(char **dst, const redisReply *v)
{
    h2o_iovec_t s = h2o_iovec_init(*dst, v != NULL ? (size_t)v->len : 0);
    if (s.len != 0)
        memcpy(s.base, v->str, s.len);
    s.base[s.len] = '\0';
    *dst += s.len + 1;
    return s;
}

/* The second pass: the fixed fields and the port table (sorted). */
static void second_pass(gw_sandbox_t *s, const redisReply *reply, size_t max_ports)
{
    size_t i;

    for (i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *f = reply->element[i], *v = reply->element[i + 1];
        if (!is_string(f) || !is_string(v))
            continue;
        if (field_is(f, "state")) {
            s->state = parse_state(v);
        } else if (field_is(f, "addr")) {
            s->has_addr = gw_netaddr_parse_ip(v->str, (size_t)v->len, 0, &s->addr) == 0;
            s->has_addr_field = 1;
            copy_printable(s->addr_text, GW_SANDBOX_ADDR_TEXT_MAX, v);
        } else if (field_is(f, "token_sha256")) {
            s->has_token = parse_token(v, s->token_sha256, s->token_digest);
        } else if (field_is(f, "resume")) {
            s->resume_auto = field_is(v, "auto");
        } else if (field_is(f, "req_rate")) {
            s->req_rate = (uint32_t)gw_ingress_parse_limit(s->id, "req_rate", v, 1000000);
        } else if (field_is(f, "egress_quota")) {
            s->egress_quota = gw_ingress_parse_quota(s->id, v);
        } else if (field_is(f, "link_epoch")) {
            s->link_epoch = 0;
            s->link_epoch_ok = parse_epoch(v, &s->link_epoch);
        } else if (s->num_ports < max_ports && parse_port_field(f, v, s->ports + s->num_ports)) {
            ++s->num_ports;
        }
    }
    if (!s->has_addr)
        memset(&s->addr, 0, sizeof(s->addr));
    if (!s->has_token)
        s->token_sha256[0] = '\0';
    if (s->num_ports > 1)
        qsort(s->ports, s->num_ports, sizeof(s->ports[0]), cmp_port);
}

/* The third pass, once the port table is sorted: the options of the exposed ports (cors_origins:<n> lists written
 * at *strings). */
static void third_pass(gw_sandbox_t *s, const redisReply *reply, uint64_t max_timeout_ms, char *strings)
{
    size_t i;

    for (i = 0; s->num_ports != 0 && i + 1 < reply->elements; i += 2) {
        const redisReply *f = reply->element[i], *v = reply->element[i + 1];
        if (is_string(f) && is_string(v))
            set_port_option(s, f, v, max_timeout_ms, &strings);
    }
}

int gw_sandbox_parse(const char *id, const redisReply *reply, gw_sandbox_t **out, const char **err)
{
    return gw_sandbox_parse_capped(id, reply, GW_SANDBOX_MAX_TIMEOUT_MS, out, err);
}

int gw_sandbox_parse_capped(const char *id, const redisReply *reply, uint64_t max_timeout_ms, gw_sandbox_t **out, const char **err)
{
    const redisReply *lifecycle = NULL, *project = NULL, *ingress_deny = NULL, *ingress_allow = NULL;
    size_t i, id_len, max_ports = 0, size, cors_bytes = 0;
    gw_sandbox_t *s;
    char *strings;

    *out = NULL;
    if (reply == NULL || reply->type != REDIS_REPLY_ARRAY) {
        *err = "expected an array reply to HGETALL";
        return -1;
    }
    if ((id_len = strlen(id)) > GW_SANDBOX_ID_MAX) {
        *err = "sandbox id is too long";
        return -1;
    }
    if (reply->elements == 0)
        return 0; /* the hash does not exist */

    /* first pass: sizes of the variable parts */
    for (i = 0; i + 1 < reply->elements; i += 2) {
        const redisReply *f = reply->element[i], *v = reply->element[i + 1];
        if (!is_string(f) || !is_string(v))
            continue;
        if (field_is(f, "lifecycle"))
            lifecycle = v;
        else if (field_is(f, "project"))
            project = v;
        else if (field_is(f, "ingress_deny"))
            ingress_deny = v;
        else if (field_is(f, "ingress_allow"))
            ingress_allow = v;
        else if ((size_t)f->len > sizeof(PORT_FIELD_PREFIX) - 1 && memcmp(f->str, PORT_FIELD_PREFIX, 5) == 0)
            ++max_ports;
        else if ((size_t)f->len > sizeof(CORS_ORIGINS_FIELD_PREFIX) - 1 &&
                 memcmp(f->str, CORS_ORIGINS_FIELD_PREFIX, sizeof(CORS_ORIGINS_FIELD_PREFIX) - 1) == 0)
            cors_bytes += (size_t)v->len + 1; /* normalized lists are never longer (routing/cors_origins.h) */
    }

    size = sizeof(*s) + max_ports * sizeof(gw_sandbox_port_t) + (lifecycle != NULL ? (size_t)lifecycle->len : 0) + 1 +
           (project != NULL ? (size_t)project->len : 0) + 1 + cors_bytes;
    if ((s = calloc(1, size)) == NULL) {
        *err = "out of memory";
        return -1;
    }
    memcpy(s->id, id, id_len + 1);
    s->refcnt = 1;
    s->state = GW_SANDBOX_STATE_UNKNOWN;
    s->link_epoch_ok = 1; /* absent = 0 */
    s->egress_quota = GW_EGRESS_QUOTA_NONE;
    s->ports = max_ports != 0 ? (gw_sandbox_port_t *)(s + 1) : NULL;
    strings = (char *)(s + 1) + max_ports * sizeof(gw_sandbox_port_t);
    s->lifecycle = copy_value(&strings, lifecycle);
    s->project = copy_value(&strings, project);

    second_pass(s, reply, max_ports);
    third_pass(s, reply, max_timeout_ms, strings);
    s->ingress = gw_ingress_parse(s->id, ingress_deny, ingress_allow);

    *out = s;
    return 0;
}

const gw_sandbox_port_t *gw_sandbox_port(const gw_sandbox_t *s, uint16_t port)
{
    return find_port(s, port);
}

gw_port_access_t gw_sandbox_port_access(const gw_sandbox_t *s, uint16_t port)
{
    const gw_sandbox_port_t *p = find_port(s, port);
    return p != NULL ? p->access : GW_PORT_NOT_EXPOSED;
}

gw_port_host_t gw_sandbox_port_host(const gw_sandbox_t *s, uint16_t port)
{
    const gw_sandbox_port_t *p = find_port(s, port);
    return p != NULL ? p->host : GW_PORT_HOST_DEFAULT;
}

int gw_sandbox_port_is_tcp(const gw_sandbox_t *s, uint16_t port)
{
    const gw_sandbox_port_t *p = find_port(s, port);
    return p != NULL && p->tcp;
}

int gw_sandbox_port_is_rfb(const gw_sandbox_t *s, uint16_t port)
{
    const gw_sandbox_port_t *p = find_port(s, port);
    return p != NULL && p->rfb;
}

const char *gw_sandbox_state_name(gw_sandbox_state_t st)
{
    switch (st) {
    case GW_SANDBOX_RUNNING:
        return "running";
    case GW_SANDBOX_STARTING:
        return "starting";
    case GW_SANDBOX_PAUSED:
        return "paused";
    case GW_SANDBOX_STOPPED:
        return "stopped";
    default:
        return "unknown";
    }
}

void gw_sandbox_retain(gw_sandbox_t *s)
{
    ++s->refcnt;
}

void gw_sandbox_release(gw_sandbox_t *s)
{
    if (s == NULL)
        return;
    if (--s->refcnt == 0) {
        free(s->ingress);
        free(s);
    }
}
