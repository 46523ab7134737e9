/*
 * Unit tests for http/pipeline.c, through h2o itself: a request is
 * processed by a real h2o context whose only handler is the pipeline, on a
 * loopback connection whose response stream this test captures (h2o's own
 * t/00unit does the same). The route store's lookup is replaced by a stub,
 * so that a lookup that fails to start (NULL, out of memory: no integration
 * test can make the real one fail) can be tested.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "common/engine.h"
#include "routing/route_store.h"

static int stub_lookups;
static gw_route_lookup_t *stub_lookup(gw_route_store_t *s, const char *sandbox_id, gw_route_cb cb, void *data)
{
    (void)s, (void)sandbox_id, (void)cb, (void)data;
    ++stub_lookups;
    return NULL; /* did not start: cb will never be called */
}
#define gw_route_store_lookup stub_lookup
#include "http/pipeline.c"
#undef gw_route_store_lookup

static char *domains[] = {"preview.test"};
static gw_config_t config;
static gw_metrics_t metrics;
static h2o_globalconf_t globalconf;
static h2o_hostconf_t *hosts[2];
static h2o_context_t ctx;
static h2o_loop_t *loop; /* one for the process: h2o 2.2.5 cannot destroy one */

/* A connection with one request, whose response is kept. */
typedef struct st_loopback_t {
    h2o_conn_t super;
    h2o_req_t req;
    h2o_ostream_t final;
    char body[4096];
    size_t body_len;
    int complete;
} loopback_t;

static void on_send(h2o_ostream_t *self, h2o_req_t *req, gw_ostream_vec_t *bufs, size_t bufcnt, h2o_send_state_t state)
{
    loopback_t *lb = H2O_STRUCT_FROM_MEMBER(loopback_t, final, self);
    size_t i;

    for (i = 0; i != bufcnt; ++i) {
        h2o_iovec_t buf = gw_ostream_vec_bytes(&bufs[i]);
        ck_assert_uint_le(lb->body_len + buf.len, sizeof(lb->body));
        memcpy(lb->body + lb->body_len, buf.base, buf.len);
        lb->body_len += buf.len;
    }
    if (h2o_send_state_is_in_progress(state))
        h2o_proceed_response(req);
    else
        lb->complete = 1;
}

static loopback_t *request(const char *authority, const char *path)
{
    static const h2o_conn_callbacks_t callbacks = {NULL};
    loopback_t *lb = (void *)h2o_create_connection(sizeof(*lb), &ctx, hosts, (struct timeval){0}, &callbacks);

    memset((char *)lb + sizeof(lb->super), 0, sizeof(*lb) - sizeof(lb->super));
    h2o_init_request(&lb->req, &lb->super, NULL);
    lb->final.do_send = on_send;
    lb->req._ostr_top = &lb->final;
    lb->req.input.method = h2o_iovec_init(H2O_STRLIT("GET"));
    lb->req.input.scheme = &H2O_URL_SCHEME_HTTPS;
    lb->req.input.authority = h2o_iovec_init(authority, strlen(authority));
    lb->req.input.path = h2o_iovec_init(path, strlen(path));
    lb->req.version = 0x101;
    h2o_process_request(&lb->req);
    return lb;
}

static void release(loopback_t *lb)
{
    h2o_dispose_request(&lb->req);
    free(lb);
}

static void setup(void)
{
    gw_pipeline_conf_t pconf;

    memset(&config, 0, sizeof(config));
    config.domains = domains;
    config.num_domains = 1;
    gw_metrics_init(&metrics, 1);
    metrics.workers[0].ctx = &ctx; /* the handlers find their counters by context */
    pconf = (gw_pipeline_conf_t){.config = &config, .metrics = &metrics, .https_port = 443};

    h2o_config_init(&globalconf);
    hosts[0] = h2o_config_register_host(&globalconf, h2o_iovec_init(H2O_STRLIT("preview.lizard-gateway.invalid")), 65535);
    gw_pipeline_t *p = gw_pipeline_register(h2o_config_register_path(hosts[0], "/", 0), &pconf);
    h2o_context_init(&ctx, loop, &globalconf);
    gw_pipeline_attach(p, &ctx, &(gw_pipeline_thread_t){NULL});
    stub_lookups = 0;
}

static void teardown(void)
{
    h2o_context_dispose(&ctx);
    h2o_config_dispose(&globalconf);
    gw_metrics_dispose(&metrics);
}

static const char *header(h2o_req_t *req, const h2o_token_t *token)
{
    ssize_t i = h2o_find_header(&req->res.headers, token, -1);
    return i == -1 ? NULL
                   : h2o_strdup(&req->pool, req->res.headers.entries[i].value.base, req->res.headers.entries[i].value.len).base;
}

START_TEST(lookup_that_does_not_start_is_answered)
{
    loopback_t *lb = request("8080-abc123.preview.test", "/app");

    /* answered within the handler: nothing else would ever answer it */
    ck_assert_int_eq(stub_lookups, 1);
    ck_assert(lb->complete);
    ck_assert_int_eq(lb->req.res.status, 503);
    ck_assert_int_eq(gw_error_code_of(&lb->req), GW_ERR_ROUTING_UNAVAILABLE);
    ck_assert_str_eq(header(&lb->req, H2O_TOKEN_RETRY_AFTER), "2");
    lb->body[lb->body_len] = '\0';
    ck_assert_ptr_nonnull(strstr(lb->body, "\"code\":\"routing_unavailable\""));
    ck_assert_ptr_nonnull(strstr(lb->body, "\"sandboxId\":\"abc123\""));
    ck_assert_uint_eq(atomic_load(&metrics.workers[0].requests), 1);
    ck_assert_uint_eq(atomic_load(&metrics.workers[0].route_lookups), 1);
    ck_assert_uint_eq(atomic_load(&metrics.workers[0].in_flight), 1);
    release(lb);
    /* the request's state went with it */
    ck_assert_uint_eq(atomic_load(&metrics.workers[0].in_flight), 0);
}
END_TEST

START_TEST(unknown_host_is_answered_without_a_lookup)
{
    loopback_t *lb = request("elsewhere.example", "/");

    ck_assert(lb->complete);
    ck_assert_int_eq(lb->req.res.status, 404);
    ck_assert_int_eq(gw_error_code_of(&lb->req), GW_ERR_UNKNOWN_HOST);
    ck_assert_int_eq(stub_lookups, 0);
    ck_assert_uint_eq(atomic_load(&metrics.workers[0].in_flight), 0);
    release(lb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("requests");
    SRunner *sr;
    int failed;

    loop = h2o_evloop_create();
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, lookup_that_does_not_start_is_answered);
    tcase_add_test(tc, unknown_host_is_answered_without_a_lookup);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
