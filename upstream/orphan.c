/*
 * Requests whose client left while the app was still working on them:
 * their connection slots follow the work (exchange.h, gw_orphan_adopt), so
 * that a client that resets streams (or makes the gateway reset them) and
 * reconnects cannot keep more requests running at an app than its slots.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "common/engine.h"
#include "upstream/exchange.h"

typedef struct st_orphan_t {
    gw_proxy_t *proxy;
    h2o_socket_t *sock;
    gw_timer_t timer;
    h2o_linklist_t link; /* in proxy->orphans */
    gw_conn_limit_t *slot, *client_slot;
    size_t slot_worker;
    char *sandbox_id, *client_addr, *lifecycle; /* owned copies: the request's pool is gone */
} orphan_t;

static void orphan_free(orphan_t *o)
{
    if (gw_timer_is_linked(&o->timer))
        gw_timer_unlink(&o->timer);
    h2o_linklist_unlink(&o->link);
    if (o->sock != NULL)
        h2o_socket_close(o->sock);
    if (o->slot != NULL)
        gw_conn_limit_release(o->slot, o->slot_worker, o->sandbox_id);
    if (o->client_slot != NULL)
        gw_conn_limit_release(o->client_slot, o->slot_worker, o->client_addr);
    GW_PROXY_COUNT(o->proxy, orphans_open, -1);
    free(o->sandbox_id);
    free(o->client_addr);
    free(o->lifecycle);
    free(o);
}

/* The app answered (a byte of its response, or its close): its work on the request is over. */
static void on_orphan_read(h2o_socket_t *sock, const char *err)
{
    (void)err;
    orphan_free(sock->data);
}

static void on_orphan_timeout(gw_timer_t *entry)
{
    orphan_free(H2O_STRUCT_FROM_MEMBER(orphan_t, timer, entry));
}

static char *dup_str(const char *s, size_t len)
{
    char *d = malloc(len + 1);
    if (d == NULL)
        abort();
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

int gw_orphan_adopt(gw_exchange_t *ex)
{
    gw_proxy_t *p = ex->proxy;
    orphan_t *o;

    /* only a request the app has whole and has not begun to answer: before it is out, the app has nothing to work on;
     * once it answers, closing is what tells it (its next write fails) */
    if (ex->state != GW_EX_AWAIT_HEAD || ex->sock == NULL || !ex->up_req.done || ex->up_req.failed || ex->res.got_byte ||
        (ex->slot == NULL && ex->client_slot == NULL))
        return 0;
    if ((o = calloc(1, sizeof(*o))) == NULL)
        abort();
    o->proxy = p;
    o->sock = ex->sock;
    o->slot = ex->slot;
    o->client_slot = ex->client_slot;
    o->slot_worker = ex->slot_worker;
    o->sandbox_id = dup_str(ex->sandbox_id, strlen(ex->sandbox_id));
    o->client_addr = ex->client_addr != NULL ? dup_str(ex->client_addr, strlen(ex->client_addr)) : NULL;
    o->lifecycle = dup_str(ex->lifecycle.base, ex->lifecycle.len);
    ex->sock = NULL;
    ex->slot = NULL;
    ex->client_slot = NULL;
    gw_exchange_clear_timer(ex);

    /* the app reads EOF, as after a close: a code interpreter that watches its caller stops the work; the read side
     * stays open to see it end */
    shutdown(h2o_socket_get_fd(o->sock), SHUT_WR);
    o->sock->data = o;
    h2o_socket_read_start(o->sock, on_orphan_read);
    h2o_linklist_insert(&p->orphans, &o->link);
    if (p->first_byte_timeout.enabled) {
        o->timer.cb = on_orphan_timeout;
        gw_timer_link(p->ctx->loop, p->first_byte_timeout.timeout, &o->timer);
    }
    GW_PROXY_COUNT(p, orphans, 1);
    GW_PROXY_COUNT(p, orphans_open, 1);
    return 1;
}

void gw_orphans_close(gw_proxy_t *p, const char *sandbox_id, const char *current_lifecycle)
{
    h2o_linklist_t *node = p->orphans.next;

    while (node != &p->orphans) {
        orphan_t *o = H2O_STRUCT_FROM_MEMBER(orphan_t, link, node);
        node = node->next;
        if (sandbox_id == NULL ||
            (strcmp(o->sandbox_id, sandbox_id) == 0 && (current_lifecycle == NULL || strcmp(o->lifecycle, current_lifecycle) != 0)))
            orphan_free(o);
    }
}
