/*
 * Reading the PROXY protocol header off an accepted socket, before h2o
 * sees it. h2o has a reader of its own (h2o_accept_ctx_t's
 * expect_proxy_line) that is not used: it reads v1 only, passes a
 * connection without a header on as if it had none (the contract refuses
 * it), scans for the CR without bound, and runs inside h2o_accept, after
 * the gateway's per-client admission, which must see the carried address.
 */
#include "common/engine.h"
#include "common/counter.h"
#include "gateway/proxy_protocol.h"

typedef struct st_reader_t {
    h2o_socket_t *sock;
    gw_timer_t timeout;
    gw_proxy_header_counters_t *counters;
    gw_proxy_protocol_cb on_header;
    void *data;
} reader_t;

/* Closes the socket of a reader that failed, counted in *counter. */
static void fail(reader_t *r, atomic_uint_fast64_t *counter)
{
    h2o_socket_t *sock = r->sock;

    GW_COUNTER_ADD(counter, 1);
    gw_timer_unlink(&r->timeout);
    sock->data = NULL;
    free(r);
    h2o_socket_close(sock);
}

static void on_timeout(gw_timer_t *entry)
{
    reader_t *r = H2O_STRUCT_FROM_MEMBER(reader_t, timeout, entry);
    fail(r, &r->counters->timeout);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    reader_t *r = sock->data;
    gw_proxy_header_t hdr;
    ssize_t n;
    gw_proxy_protocol_cb cb = r->on_header;
    void *data = r->data;

    if (err != NULL) {
        fail(r, &r->counters->closed);
        return;
    }
    /* 0 for at most GW_PROXY_HEADER_V2_MAX bytes (gw_proxy_header_parse):
     * what waits for the rest is bounded by then */
    if ((n = gw_proxy_header_parse(sock->input->bytes, sock->input->size, &hdr)) == 0)
        return;
    if (n < 0) {
        fail(r, &r->counters->invalid);
        return;
    }
    h2o_buffer_consume(&sock->input, (size_t)n);
    if (hdr.has_src)
        h2o_socket_setpeername(sock, (void *)&hdr.src, hdr.src_len);
    h2o_socket_read_stop(sock);
    GW_COUNTER_ADD(&r->counters->accepted, 1);
    gw_timer_unlink(&r->timeout);
    sock->data = NULL;
    free(r);
    cb(sock, data);
}

void gw_proxy_protocol_read(h2o_socket_t *sock, gw_timeout_t *timeout, gw_proxy_header_counters_t *counters,
                            gw_proxy_protocol_cb on_header, void *data)
{
    reader_t *r = h2o_mem_alloc(sizeof(*r));

    *r = (reader_t){.sock = sock, .counters = counters, .on_header = on_header, .data = data};
    r->timeout.cb = on_timeout;
    gw_timer_link(h2o_socket_get_loop(sock), timeout, &r->timeout);
    sock->data = r;
    h2o_socket_read_start(sock, on_read);
}
