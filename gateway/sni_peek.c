/*
 * Peeking at the SNI of an accepted TLS socket before h2o sees it
 * (gateway/sni_peek.h). The bytes are read into sock->input the way h2o
 * would have read them, and left there: h2o_socket_ssl_handshake (2.2.5 and
 * master alike) starts from what sock->input holds.
 */
#include "common/counter.h"
#include "gateway/sni_peek.h"

typedef struct st_peek_t {
    h2o_socket_t *sock;
    gw_timer_t timeout;
    gw_cert_fetch_t *fetch;
    gw_cert_wait_t *wait; /* while the certificate is fetched */
    gw_client_hello_counters_t *counters;
    gw_sni_peek_cb on_ready;
    void *data;
} peek_t;

static void dispose(peek_t *p)
{
    gw_timer_unlink(&p->timeout);
    p->sock->data = NULL;
    free(p);
}

/* Closes the socket of a peek that failed, counted in *counter. */
static void fail(peek_t *p, atomic_uint_fast64_t *counter)
{
    h2o_socket_t *sock = p->sock;

    GW_COUNTER_ADD(counter, 1);
    gw_cert_wait_free(p->wait);
    dispose(p);
    h2o_socket_close(sock);
}

/* The socket to h2o, with the wait's answer for its handshake. */
static void hand_over(peek_t *p)
{
    h2o_socket_t *sock = p->sock;
    gw_cert_wait_t *wait = p->wait;
    gw_sni_peek_cb cb = p->on_ready;
    void *data = p->data;

    h2o_socket_read_stop(sock);
    dispose(p);
    if (wait != NULL)
        gw_cert_wait_handover(wait);
    cb(sock, data);
    gw_cert_wait_free(wait);
}

static void on_timeout(gw_timer_t *entry)
{
    peek_t *p = H2O_STRUCT_FROM_MEMBER(peek_t, timeout, entry);
    fail(p, &p->counters->timeout);
}

static void on_answer(void *data)
{
    hand_over(data);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    peek_t *p = sock->data;
    uint8_t scratch[GW_CLIENT_HELLO_MAX];
    char name[GW_CLIENT_HELLO_MAX_NAME + 1];
    size_t name_len;

    if (err != NULL) {
        fail(p, &p->counters->closed);
        return;
    }
    switch (gw_client_hello_parse(sock->input->bytes, sock->input->size, scratch, name, &name_len)) {
    case GW_CLIENT_HELLO_MORE: /* never once GW_CLIENT_HELLO_MAX_INPUT bytes are there */
        return;
    case GW_CLIENT_HELLO_TOO_LARGE:
        fail(p, &p->counters->too_large);
        return;
    case GW_CLIENT_HELLO_OK:
        GW_COUNTER_ADD(&p->counters->read, 1);
        break;
    default:
        GW_COUNTER_ADD(&p->counters->other, 1);
        hand_over(p);
        return;
    }
    if (name_len != 0 && (p->wait = gw_cert_fetch_wait(p->fetch, h2o_iovec_init(name, name_len), sock, on_answer, p)) != NULL &&
        !gw_cert_wait_answered(p->wait)) {
        h2o_socket_read_stop(sock); /* what follows the ClientHello waits in the kernel */
        return;
    }
    hand_over(p);
}

void gw_sni_peek_read(h2o_socket_t *sock, gw_timeout_t *timeout, gw_cert_fetch_t *fetch, gw_client_hello_counters_t *counters,
                      gw_sni_peek_cb on_ready, void *data)
{
    peek_t *p = h2o_mem_alloc(sizeof(*p));

    *p = (peek_t){.sock = sock, .fetch = fetch, .counters = counters, .on_ready = on_ready, .data = data};
    p->timeout.cb = on_timeout;
    gw_timer_link(h2o_socket_get_loop(sock), timeout, &p->timeout);
    sock->data = p;
    h2o_socket_read_start(sock, on_read);
    if (sock->input->size != 0)
        on_read(sock, NULL); /* what came with the PROXY header */
}
