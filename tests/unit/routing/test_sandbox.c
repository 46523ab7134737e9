/*
 * routing/sandbox.c: the sandbox hash as the control plane writes it,
 * parsed from real RESP bytes through hiredis's own reader.
 */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/hiredis.h>
#include <h2o/string_.h>
#include "routing/sandbox.h"

#define TOKEN "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

/* Builds a redisReply from RESP text, as hiredis would hand it to a callback. */
static redisReply *resp_len(const char *text, size_t len)
{
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    ck_assert_ptr_nonnull(rd);
    ck_assert_int_eq(redisReaderFeed(rd, text, len), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_ptr_nonnull(reply);
    redisReaderFree(rd);
    return reply;
}

static redisReply *resp(const char *text)
{
    return resp_len(text, strlen(text));
}

/* HGETALL reply from NULL-terminated field/value pairs. */
static redisReply *hash(const char *const *kv)
{
    char buf[8192];
    size_t n = 0, off;
    while (kv[n] != NULL)
        ++n;
    off = (size_t)snprintf(buf, sizeof(buf), "*%zu\r\n", n);
    for (size_t i = 0; i != n; ++i)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "$%zu\r\n%s\r\n", strlen(kv[i]), kv[i]);
    ck_assert_uint_lt(off, sizeof(buf));
    return resp(buf);
}

static gw_sandbox_t *parse_kv(const char *const *kv)
{
    redisReply *r = hash(kv);
    gw_sandbox_t *s = NULL;
    const char *err = NULL;
    ck_assert_int_eq(gw_sandbox_parse("sbx1", r, &s, &err), 0);
    freeReplyObject(r);
    return s;
}

START_TEST(full_record)
{
    const char *kv[] = {"state", "running",   "addr",    "10.0.3.7", "lifecycle", "lc-42",     "project", "proj-9", "token_sha256",
                        TOKEN,   "port:3000", "private", "port:80",  "public",    "port:8080", "private", NULL};
    gw_sandbox_t *s = parse_kv(kv);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s->id, "sbx1");
    ck_assert_int_eq(s->state, GW_SANDBOX_RUNNING);
    ck_assert_int_eq(s->has_addr, 1);
    ck_assert_int_eq(s->addr.ss.ss_family, AF_INET);
    ck_assert_uint_eq(ntohl(((struct sockaddr_in *)&s->addr.ss)->sin_addr.s_addr), 0x0a000307);
    ck_assert_uint_eq(gw_netaddr_port(&s->addr), 0);
    ck_assert_str_eq(s->lifecycle.base, "lc-42");
    ck_assert_uint_eq(s->lifecycle.len, 5);
    ck_assert_str_eq(s->project.base, "proj-9");
    ck_assert_uint_eq(s->project.len, 6);
    ck_assert_int_eq(s->has_token, 1);
    ck_assert_str_eq(s->token_sha256, TOKEN);
    ck_assert_uint_eq(s->num_ports, 3);
    /* sorted by port */
    ck_assert_uint_eq(s->ports[0].port, 80);
    ck_assert_uint_eq(s->ports[1].port, 3000);
    ck_assert_uint_eq(s->ports[2].port, 8080);
    ck_assert_int_eq(gw_sandbox_port_access(s, 3000), GW_PORT_PRIVATE);
    ck_assert_int_eq(gw_sandbox_port_access(s, 80), GW_PORT_PUBLIC);
    ck_assert_int_eq(gw_sandbox_port_access(s, 8080), GW_PORT_PRIVATE);
    ck_assert_int_eq(gw_sandbox_port_access(s, 3001), GW_PORT_NOT_EXPOSED);
    ck_assert_int_eq(gw_sandbox_port_access(s, 1), GW_PORT_NOT_EXPOSED);
    ck_assert_int_eq(gw_sandbox_port_access(s, 65535), GW_PORT_NOT_EXPOSED);
    ck_assert_uint_eq(s->refcnt, 1);
    gw_sandbox_release(s);
}
END_TEST

START_TEST(empty_means_not_found)
{
    redisReply *r = resp("*0\r\n");
    gw_sandbox_t *s = (gw_sandbox_t *)1;
    const char *err = NULL;
    ck_assert_int_eq(gw_sandbox_parse("sbx1", r, &s, &err), 0);
    ck_assert_ptr_null(s);
    freeReplyObject(r);
}
END_TEST

START_TEST(not_an_array)
{
    static const char *texts[] = {"$3\r\nfoo\r\n", "+OK\r\n", ":1\r\n", "-ERR wrong\r\n", "$-1\r\n"};
    for (size_t i = 0; i != sizeof(texts) / sizeof(texts[0]); ++i) {
        redisReply *r = resp(texts[i]);
        gw_sandbox_t *s = NULL;
        const char *err = NULL;
        ck_assert_int_eq(gw_sandbox_parse("sbx1", r, &s, &err), -1);
        ck_assert_ptr_null(s);
        ck_assert_ptr_nonnull(err);
        freeReplyObject(r);
    }
    gw_sandbox_t *s = NULL;
    const char *err = NULL;
    ck_assert_int_eq(gw_sandbox_parse("sbx1", NULL, &s, &err), -1);
}
END_TEST

START_TEST(states)
{
    static const struct {
        const char *value;
        gw_sandbox_state_t state;
    } cases[] = {{"running", GW_SANDBOX_RUNNING},        {"starting", GW_SANDBOX_STARTING},     {"paused", GW_SANDBOX_PAUSED},
                 {"stopped", GW_SANDBOX_STOPPED},        {"RUNNING", GW_SANDBOX_STATE_UNKNOWN}, {"run", GW_SANDBOX_STATE_UNKNOWN},
                 {"runningx", GW_SANDBOX_STATE_UNKNOWN}, {"", GW_SANDBOX_STATE_UNKNOWN}};
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        const char *kv[] = {"state", cases[i].value, NULL};
        gw_sandbox_t *s = parse_kv(kv);
        ck_assert_msg(s->state == cases[i].state, "state \"%s\"", cases[i].value);
        gw_sandbox_release(s);
    }
    /* no state field at all */
    const char *kv[] = {"addr", "10.0.0.1", NULL};
    gw_sandbox_t *s = parse_kv(kv);
    ck_assert_int_eq(s->state, GW_SANDBOX_STATE_UNKNOWN);
    gw_sandbox_release(s);

    ck_assert_str_eq(gw_sandbox_state_name(GW_SANDBOX_RUNNING), "running");
    ck_assert_str_eq(gw_sandbox_state_name(GW_SANDBOX_STARTING), "starting");
    ck_assert_str_eq(gw_sandbox_state_name(GW_SANDBOX_PAUSED), "paused");
    ck_assert_str_eq(gw_sandbox_state_name(GW_SANDBOX_STOPPED), "stopped");
}
END_TEST

START_TEST(addresses)
{
    static const struct {
        const char *value;
        int has_addr, family;
    } cases[] = {{"10.1.2.3", 1, AF_INET},
                 {"fd00::17", 1, AF_INET6},
                 {"::ffff:10.0.0.1", 1, AF_INET6},
                 {"vm17.internal", 0, 0},
                 {"10.1.2.3:80", 0, 0},
                 {"[fd00::17]", 0, 0},
                 {"", 0, 0},
                 {"10.1.2", 0, 0},
                 {"10.1.2.3 ", 0, 0}};
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        const char *kv[] = {"state", "running", "addr", cases[i].value, NULL};
        gw_sandbox_t *s = parse_kv(kv);
        ck_assert_msg(s->has_addr == cases[i].has_addr, "addr \"%s\"", cases[i].value);
        if (s->has_addr) {
            ck_assert_int_eq(s->addr.ss.ss_family, cases[i].family);
            ck_assert_uint_eq(gw_netaddr_port(&s->addr), 0);
        }
        gw_sandbox_release(s);
    }
}
END_TEST

START_TEST(tokens)
{
    const char *upper = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08";
    const char *kv[] = {"token_sha256", upper, NULL};
    gw_sandbox_t *s = parse_kv(kv);
    ck_assert_int_eq(s->has_token, 1);
    ck_assert_str_eq(s->token_sha256, TOKEN); /* stored lowercase */
    gw_sandbox_release(s);

    static const char *bad[] = {"", "9f86", TOKEN "0", "zf86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a0"};
    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        const char *kv2[] = {"state", "running", "token_sha256", bad[i], NULL};
        s = parse_kv(kv2);
        ck_assert_msg(s->has_token == 0, "token \"%s\" accepted", bad[i]);
        gw_sandbox_release(s);
    }
    /* missing */
    const char *kv3[] = {"state", "running", NULL};
    s = parse_kv(kv3);
    ck_assert_int_eq(s->has_token, 0);
    gw_sandbox_release(s);
}
END_TEST

START_TEST(resume)
{
    static const struct {
        const char *value;
        int want;
    } cases[] = {{"auto", 1}, {"AUTO", 0}, {"", 0}, {"auto ", 0}, {"never", 0}};
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        const char *kv[] = {"state", "paused", "resume", cases[i].value, NULL};
        gw_sandbox_t *s = parse_kv(kv);
        ck_assert_msg(s->resume_auto == cases[i].want, "resume \"%s\"", cases[i].value);
        gw_sandbox_release(s);
    }
    const char *absent[] = {"state", "paused", NULL};
    gw_sandbox_t *s = parse_kv(absent);
    ck_assert_int_eq(s->resume_auto, 0);
    gw_sandbox_release(s);
}
END_TEST

START_TEST(link_epochs)
{
    static const struct {
        const char *value;
        int ok;
        uint64_t epoch;
    } cases[] = {{"0", 1, 0},
                 {"7", 1, 7},
                 {"9999999999999999999", 1, UINT64_C(9999999999999999999)},
                 {"10000000000000000000", 0, 0},
                 {"", 0, 0},
                 {"-1", 0, 0},
                 {"+1", 0, 0},
                 {"1 ", 0, 0},
                 {"x", 0, 0}};
    const char *absent[] = {"state", "running", NULL};
    gw_sandbox_t *s = parse_kv(absent);

    /* absent = 0 */
    ck_assert_int_eq(s->link_epoch_ok, 1);
    ck_assert_uint_eq(s->link_epoch, 0);
    gw_sandbox_release(s);
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        const char *kv[] = {"state", "running", "link_epoch", cases[i].value, NULL};
        s = parse_kv(kv);
        ck_assert_msg(s->link_epoch_ok == cases[i].ok, "link_epoch \"%s\"", cases[i].value);
        if (cases[i].ok)
            ck_assert_uint_eq(s->link_epoch, cases[i].epoch);
        gw_sandbox_release(s);
    }
}
END_TEST

START_TEST(ports)
{
    const char *kv[] = {"port:3000", "private",    "port:0",  "public",     "port:03000", "public", "port:+1",
                        "public",    "port:65536", "public",  "port:65535", "public",     "port:",  "public",
                        "port:22",   "open",       "port:23", "PUBLIC",     "portx:24",   "public", "port:25x",
                        "private",   "port:1",     "public",  NULL};
    gw_sandbox_t *s = parse_kv(kv);
    ck_assert_uint_eq(s->num_ports, 3);
    ck_assert_int_eq(gw_sandbox_port_access(s, 1), GW_PORT_PUBLIC);
    ck_assert_int_eq(gw_sandbox_port_access(s, 3000), GW_PORT_PRIVATE);
    ck_assert_int_eq(gw_sandbox_port_access(s, 65535), GW_PORT_PUBLIC);
    ck_assert_int_eq(gw_sandbox_port_access(s, 0), GW_PORT_NOT_EXPOSED);
    ck_assert_int_eq(gw_sandbox_port_access(s, 22), GW_PORT_NOT_EXPOSED);
    ck_assert_int_eq(gw_sandbox_port_access(s, 23), GW_PORT_NOT_EXPOSED);
    ck_assert_int_eq(gw_sandbox_port_access(s, 24), GW_PORT_NOT_EXPOSED);
    ck_assert_int_eq(gw_sandbox_port_access(s, 25), GW_PORT_NOT_EXPOSED);
    gw_sandbox_release(s);
}
END_TEST

START_TEST(host_modes)
{
    /* host:<n> before and after its port:<n>, for exposed and unexposed ports */
    const char *kv[] = {"host:5173", "localhost", "port:5173", "private",   "port:8888", "public", "host:8888", "preserve",
                        "port:3000", "public",    "host:4000", "localhost", "port:80",   "public", "host:80",   "LOCALHOST",
                        "port:81",   "public",    "host:81",   "",          "port:82",   "public", "host:82",   "localhost ",
                        "host:083",  "localhost", "port:83",   "public",    NULL};
    gw_sandbox_t *s = parse_kv(kv);
    ck_assert_int_eq(gw_sandbox_port_host(s, 5173), GW_PORT_HOST_LOCALHOST);
    ck_assert_int_eq(gw_sandbox_port_host(s, 8888), GW_PORT_HOST_PRESERVE);
    ck_assert_int_eq(gw_sandbox_port_host(s, 3000), GW_PORT_HOST_DEFAULT); /* absent */
    ck_assert_int_eq(gw_sandbox_port_host(s, 4000), GW_PORT_HOST_DEFAULT); /* not exposed */
    ck_assert_int_eq(gw_sandbox_port_access(s, 4000), GW_PORT_NOT_EXPOSED);
    /* not recognised (values are exact, as for port:<n>): the fallback */
    ck_assert_int_eq(gw_sandbox_port_host(s, 80), GW_PORT_HOST_DEFAULT);
    ck_assert_int_eq(gw_sandbox_port_host(s, 81), GW_PORT_HOST_DEFAULT);
    ck_assert_int_eq(gw_sandbox_port_host(s, 82), GW_PORT_HOST_DEFAULT);
    ck_assert_int_eq(gw_sandbox_port_host(s, 83), GW_PORT_HOST_DEFAULT); /* host:083 is no port */
    /* the first one is kept for the operator's log line */
    ck_assert_uint_eq(s->bad_host_port, 80);
    ck_assert_str_eq(s->bad_host_value, "LOCALHOST");
    gw_sandbox_release(s);

    /* a long or binary value is cut and made printable */
    const char *kv2[] = {"port:1", "public", "host:1", "\"x\"\tyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy", NULL};
    s = parse_kv(kv2);
    ck_assert_uint_eq(s->bad_host_port, 1);
    ck_assert_uint_eq(strlen(s->bad_host_value), GW_SANDBOX_BAD_HOST_MAX);
    ck_assert(strncmp(s->bad_host_value, "?x??yyy", 7) == 0);
    gw_sandbox_release(s);

    const char *kv3[] = {"port:1", "public", "host:1", "preserve", NULL};
    s = parse_kv(kv3);
    ck_assert_uint_eq(s->bad_host_port, 0);
    gw_sandbox_release(s);
}
END_TEST

START_TEST(port_timeouts)
{
    /* timeout:<n> of exposed ports: a decimal from 1000 to the cap, else ignored (0) and the first noted */
    const char *kv[] = {"port:3000",
                        "public",
                        "timeout:3000",
                        "120000",
                        "port:4000",
                        "public",
                        "timeout:4000",
                        "abc",
                        "port:5000",
                        "public",
                        "timeout:5000",
                        "0",
                        "port:6000",
                        "public",
                        "timeout:6000",
                        "-5",
                        "port:7000",
                        "public",
                        "timeout:7000",
                        "999",
                        "port:8000",
                        "public",
                        "timeout:8000",
                        "1000",
                        "port:8001",
                        "public",
                        "timeout:8001",
                        "7200000",
                        "timeout:9999",
                        "5000",
                        NULL};
    redisReply *r = hash(kv);
    gw_sandbox_t *s = NULL, *capped = NULL;
    const char *err = NULL;

    ck_assert_int_eq(gw_sandbox_parse("sbx1", r, &s, &err), 0);
    ck_assert_uint_eq(gw_sandbox_port(s, 3000)->timeout_ms, 120000);
    ck_assert_uint_eq(gw_sandbox_port(s, 4000)->timeout_ms, 0);
    ck_assert_uint_eq(gw_sandbox_port(s, 5000)->timeout_ms, 0);
    ck_assert_uint_eq(gw_sandbox_port(s, 6000)->timeout_ms, 0);
    ck_assert_uint_eq(gw_sandbox_port(s, 7000)->timeout_ms, 0);
    ck_assert_uint_eq(gw_sandbox_port(s, 8000)->timeout_ms, 1000);
    ck_assert_uint_eq(gw_sandbox_port(s, 8001)->timeout_ms, 7200000); /* under GW_SANDBOX_MAX_TIMEOUT_MS */
    ck_assert_ptr_null(gw_sandbox_port(s, 9999));                     /* not exposed: ignored */
    ck_assert_uint_eq(s->bad_timeout_port, 4000);
    ck_assert_str_eq(s->bad_timeout_value, "abc");
    gw_sandbox_release(s);

    /* upstream.max_port_timeout_ms: above it is ignored like a malformed value */
    ck_assert_int_eq(gw_sandbox_parse_capped("sbx1", r, 3600000, &capped, &err), 0);
    ck_assert_uint_eq(gw_sandbox_port(capped, 3000)->timeout_ms, 120000);
    ck_assert_uint_eq(gw_sandbox_port(capped, 8001)->timeout_ms, 0);
    gw_sandbox_release(capped);
    freeReplyObject(r);
}
END_TEST

START_TEST(proto_h2c)
{
    /* h2c is known (gRPC's port); its forwarding is not built: the port stays an HTTP port, marked */
    const char *kv[] = {"port:50051", "public", "proto:50051", "h2c", "port:3000", "public", "proto:3000", "http", NULL};
    gw_sandbox_t *s = parse_kv(kv);
    ck_assert_int_eq(gw_sandbox_port(s, 50051)->h2c, 1);
    ck_assert_int_eq(gw_sandbox_port(s, 50051)->tcp, 0);
    ck_assert_int_eq(gw_sandbox_port(s, 3000)->h2c, 0);
    gw_sandbox_release(s);
}
END_TEST

START_TEST(proto_tcp)
{
    /* proto:<n> before and after its port; only the exact "tcp" makes a TCP port */
    const char *kv[] = {"proto:5432", "tcp",       "port:5432",  "private",    "port:6379", "public",  "proto:6379",
                        "tcp",        "port:3000", "public",     "proto:3000", "http",      "port:22", "public",
                        "proto:22",   "TCP",       "proto:9999", "tcp",        NULL};
    gw_sandbox_t *s = parse_kv(kv);
    ck_assert_int_eq(gw_sandbox_port_is_tcp(s, 5432), 1);
    ck_assert_int_eq(gw_sandbox_port_is_tcp(s, 6379), 1);
    ck_assert_int_eq(gw_sandbox_port_is_tcp(s, 3000), 0);
    ck_assert_int_eq(gw_sandbox_port_is_tcp(s, 22), 0);
    ck_assert_int_eq(gw_sandbox_port_is_tcp(s, 9999), 0); /* not exposed */
    ck_assert_int_eq(gw_sandbox_port_access(s, 5432), GW_PORT_PRIVATE);
    gw_sandbox_release(s);
}
END_TEST

START_TEST(cors_fields)
{
    /* cors:<n> and cors_origins:<n> before and after their port; only "edge" makes an edge port; the list is
     * normalized into the record, its garbage noted once */
    const char *kv[] = {"cors_origins:3000",
                        "https://App.example.com:443, garbage, http://127.0.0.1:5173",
                        "cors:3000",
                        "edge",
                        "port:3000",
                        "private",
                        "port:4000",
                        "public",
                        "cors:4000",
                        "edge",
                        "cors_origins:4000",
                        "*",
                        "port:5000",
                        "public",
                        "cors:5000",
                        "EDGE",
                        "cors_origins:5000",
                        "https://x.example",
                        "cors:6000",
                        "edge",
                        "cors_origins:6000",
                        "https://unexposed.example",
                        NULL};
    gw_sandbox_t *s = parse_kv(kv);
    const gw_sandbox_port_t *p = gw_sandbox_port(s, 3000);

    ck_assert_int_eq(p->cors_edge, 1);
    ck_assert_int_eq(p->cors_any, 0);
    ck_assert(h2o_memis(p->cors_origins.base, p->cors_origins.len, H2O_STRLIT("https://app.example.com,http://127.0.0.1:5173,")));
    ck_assert_uint_eq(s->bad_cors_port, 3000);
    ck_assert_str_eq(s->bad_cors_value, "garbage");
    p = gw_sandbox_port(s, 4000);
    ck_assert_int_eq(p->cors_edge, 1);
    ck_assert_int_eq(p->cors_any, 1);
    ck_assert_uint_eq(p->cors_origins.len, 0);
    p = gw_sandbox_port(s, 5000);
    ck_assert_int_eq(p->cors_edge, 0); /* "EDGE" is not "edge": the app's, as before */
    ck_assert_ptr_null(gw_sandbox_port(s, 6000));
    gw_sandbox_release(s);
}
END_TEST

START_TEST(missing_strings_are_empty)
{
    const char *kv[] = {"state", "paused", NULL};
    gw_sandbox_t *s = parse_kv(kv);
    ck_assert_int_eq(s->state, GW_SANDBOX_PAUSED);
    ck_assert_uint_eq(s->lifecycle.len, 0);
    ck_assert_str_eq(s->lifecycle.base, "");
    ck_assert_uint_eq(s->project.len, 0);
    ck_assert_str_eq(s->project.base, "");
    ck_assert_uint_eq(s->num_ports, 0);
    ck_assert_int_eq(gw_sandbox_port_access(s, 3000), GW_PORT_NOT_EXPOSED);
    gw_sandbox_release(s);
}
END_TEST

START_TEST(binary_safe_strings)
{
    /* lifecycle with an embedded NUL keeps its length; the copy is NUL-terminated */
    static const char text[] = "*4\r\n$9\r\nlifecycle\r\n$3\r\na\0b\r\n$7\r\nproject\r\n$1\r\np\r\n";
    redisReply *r = resp_len(text, sizeof(text) - 1);
    gw_sandbox_t *s = NULL;
    const char *err = NULL;
    ck_assert_int_eq(gw_sandbox_parse("x", r, &s, &err), 0);
    freeReplyObject(r);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(s->lifecycle.len, 3);
    ck_assert(memcmp(s->lifecycle.base, "a\0b", 4) == 0);
    ck_assert_str_eq(s->project.base, "p");
    gw_sandbox_release(s);

    /* odd element count and non-string elements are skipped, not fatal */
    r = resp("*5\r\n$5\r\nstate\r\n$7\r\nrunning\r\n:1\r\n:2\r\n$4\r\naddr\r\n");
    ck_assert_int_eq(gw_sandbox_parse("x", r, &s, &err), 0);
    freeReplyObject(r);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(s->state, GW_SANDBOX_RUNNING);
    ck_assert_int_eq(s->has_addr, 0);
    gw_sandbox_release(s);
}
END_TEST

START_TEST(refcount)
{
    const char *kv[] = {"state", "running", "project", "p", NULL};
    gw_sandbox_t *s = parse_kv(kv);
    gw_sandbox_retain(s);
    gw_sandbox_retain(s);
    ck_assert_uint_eq(s->refcnt, 3);
    gw_sandbox_release(s);
    gw_sandbox_release(s);
    ck_assert_uint_eq(s->refcnt, 1);
    ck_assert_str_eq(s->project.base, "p"); /* still alive */
    gw_sandbox_release(s);                  /* freed: LeakSanitizer would report otherwise */
    gw_sandbox_release(NULL);
}
END_TEST

START_TEST(id_copied)
{
    char id[GW_SANDBOX_ID_MAX + 1];
    memset(id, 'z', GW_SANDBOX_ID_MAX);
    id[GW_SANDBOX_ID_MAX] = '\0';
    redisReply *r = resp("*2\r\n$5\r\nstate\r\n$7\r\nrunning\r\n");
    gw_sandbox_t *s = NULL;
    const char *err = NULL;
    ck_assert_int_eq(gw_sandbox_parse(id, r, &s, &err), 0);
    ck_assert_str_eq(s->id, id);
    gw_sandbox_release(s);
    char longid[GW_SANDBOX_ID_MAX + 2];
    memset(longid, 'z', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    s = NULL;
    ck_assert_int_eq(gw_sandbox_parse(longid, r, &s, &err), -1);
    ck_assert_ptr_null(s);
    freeReplyObject(r);
}
END_TEST

/* ingress_deny then ingress_allow, IPv4 and IPv6, parsed once with the record */
static int admits(const gw_sandbox_t *s, const char *ip)
{
    gw_netaddr_t a;
    ck_assert_int_eq(gw_netaddr_parse_ip(ip, strlen(ip), 0, &a), 0);
    return gw_ingress_admits(s->ingress, (const struct sockaddr *)&a.ss);
}

START_TEST(ingress_lists)
{
    const char *kv[] = {"state", "running", "ingress_allow", "127.0.0.0/8, ::1", "ingress_deny", "127.0.0.3", "req_rate",
                        "25",    NULL};
    const char *none[] = {"state", "running", NULL};
    gw_sandbox_t *s = parse_kv(kv), *n = parse_kv(none);

    ck_assert_ptr_nonnull(s->ingress);
    ck_assert_int_eq(s->ingress->malformed, 0);
    ck_assert_int_eq(admits(s, "127.0.0.2"), 1);
    ck_assert_int_eq(admits(s, "127.0.0.3"), 0); /* deny wins */
    ck_assert_int_eq(admits(s, "::1"), 1);
    ck_assert_int_eq(admits(s, "10.1.2.3"), 0); /* outside the allow list */
    ck_assert_int_eq(admits(s, "2001:db8::1"), 0);
    ck_assert_uint_eq(s->req_rate, 25);
    /* no rules: nothing parsed, everyone admitted, unlimited */
    ck_assert_ptr_null(n->ingress);
    ck_assert_int_eq(admits(n, "10.1.2.3"), 1);
    ck_assert_uint_eq(n->req_rate, 0);
    gw_sandbox_release(s);
    gw_sandbox_release(n);
}
END_TEST

/* egress_quota: a decimal 0 .. 2^63 - 1 (0 refuses everything); absent or malformed: unlimited */
START_TEST(egress_quota_field)
{
    const char *q[] = {"state", "running", "egress_quota", "1048576", NULL};
    const char *zero[] = {"state", "running", "egress_quota", "0", NULL};
    const char *none[] = {"state", "running", NULL};
    const char *bad[] = {"-1", "1e6", "", " 5", "9223372036854775808", "12abc"};
    gw_sandbox_t *s = parse_kv(q), *z = parse_kv(zero), *n = parse_kv(none);

    ck_assert_uint_eq(s->egress_quota, 1048576);
    ck_assert_uint_eq(s->egress_total, 0); /* the route store fills it */
    ck_assert_int_eq(gw_sandbox_quota_reached(s), 0);
    s->egress_total = 1048575;
    ck_assert_int_eq(gw_sandbox_quota_reached(s), 0);
    s->egress_total = 1048576; /* reached, not only passed */
    ck_assert_int_eq(gw_sandbox_quota_reached(s), 1);
    ck_assert_uint_eq(z->egress_quota, 0);
    ck_assert_int_eq(gw_sandbox_quota_reached(z), 1);
    ck_assert_uint_eq(n->egress_quota, GW_EGRESS_QUOTA_NONE);
    n->egress_total = (uint64_t)INT64_MAX; /* the largest total Redis can hold */
    ck_assert_int_eq(gw_sandbox_quota_reached(n), 0);
    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        const char *kv[] = {"state", "running", "egress_quota", bad[i], NULL};
        gw_sandbox_t *b = parse_kv(kv);
        ck_assert_msg(b->egress_quota == GW_EGRESS_QUOTA_NONE, "\"%s\" taken as a quota", bad[i]);
        gw_sandbox_release(b);
    }
    redisReply *max = resp("$19\r\n9223372036854775807\r\n");
    ck_assert_uint_eq(gw_ingress_parse_quota("sbx1", max), (uint64_t)INT64_MAX);
    freeReplyObject(max);
    gw_sandbox_release(s);
    gw_sandbox_release(z);
    gw_sandbox_release(n);
}
END_TEST

/* The running total from a GET reply: a decimal, anything else is 0 */
START_TEST(egress_total_reply)
{
    const char *text[] = {"$7\r\n2097152\r\n", "$-1\r\n", "$2\r\n-5\r\n", "$3\r\nabc\r\n",
                          "-WRONGTYPE no\r\n", ":42\r\n", ":-3\r\n"};
    uint64_t want[] = {2097152, 0, 0, 0, 0, 42, 0};

    for (size_t i = 0; i != sizeof(text) / sizeof(text[0]); ++i) {
        redisReply *r = resp(text[i]);
        ck_assert_uint_eq(gw_ingress_parse_total(r), want[i]);
        freeReplyObject(r);
    }
    ck_assert_uint_eq(gw_ingress_parse_total(NULL), 0);
}
END_TEST

START_TEST(ingress_malformed_refuses)
{
    const char *bad[][7] = {{"state", "running", "ingress_allow", "10.0.0.0/8,not-a-net", NULL},
                            {"state", "running", "ingress_deny", "10.0.0.1/8", NULL}, /* host bits set */
                            {"state", "running", "ingress_allow", "10.0.0.0/8,,::1/128", NULL},
                            {"state", "running", "ingress_deny", "::1/129", NULL}};
    size_t i;

    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        gw_sandbox_t *s = parse_kv(bad[i]);
        ck_assert_ptr_nonnull(s->ingress);
        ck_assert_int_eq(s->ingress->malformed, 1);
        ck_assert_int_eq(admits(s, "10.1.2.3"), 0);
        ck_assert_int_eq(admits(s, "::1"), 0);
        gw_sandbox_release(s);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sandbox");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, full_record);
    tcase_add_test(tc, empty_means_not_found);
    tcase_add_test(tc, not_an_array);
    tcase_add_test(tc, states);
    tcase_add_test(tc, addresses);
    tcase_add_test(tc, tokens);
    tcase_add_test(tc, resume);
    tcase_add_test(tc, link_epochs);
    tcase_add_test(tc, ports);
    tcase_add_test(tc, missing_strings_are_empty);
    tcase_add_test(tc, host_modes);
    tcase_add_test(tc, binary_safe_strings);
    tcase_add_test(tc, refcount);
    tcase_add_test(tc, proto_tcp);
    tcase_add_test(tc, proto_h2c);
    tcase_add_test(tc, port_timeouts);
    tcase_add_test(tc, cors_fields);
    tcase_add_test(tc, id_copied);
    tcase_add_test(tc, ingress_lists);
    tcase_add_test(tc, ingress_malformed_refuses);
    tcase_add_test(tc, egress_quota_field);
    tcase_add_test(tc, egress_total_reply);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
