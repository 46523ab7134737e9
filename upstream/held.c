/*
 * The held-bytes ledger (held.h): a worker-wide sum and libh2o's khash from
 * client connection to its sum, entries at 0 removed.
 */
#include <stdlib.h>
#include <h2o.h>
#include "khash.h"
#include "upstream/held.h"

KHASH_MAP_INIT_INT64(gw_held_by_conn, size_t)

struct st_gw_held_t {
    size_t total;
    khash_t(gw_held_by_conn) * by_conn;
};

gw_held_t *gw_held_new(void)
{
    gw_held_t *h = h2o_mem_alloc(sizeof(*h));

    h->total = 0;
    /* khash reports out of memory; h2o's policy is to abort */
    if ((h->by_conn = kh_init(gw_held_by_conn)) == NULL)
        h2o_fatal("no memory");
    return h;
}

void gw_held_free(gw_held_t *h)
{
    if (h == NULL)
        return;
    kh_destroy(gw_held_by_conn, h->by_conn);
    free(h);
}

void gw_held_move(gw_held_t *h, uint64_t conn, size_t before, size_t now)
{
    khiter_t it;
    int ret;

    if (now == before)
        return;
    h->total = h->total - before + now;
    it = kh_put(gw_held_by_conn, h->by_conn, conn, &ret);
    if (ret < 0)
        h2o_fatal("no memory");
    if (ret != 0)
        kh_val(h->by_conn, it) = 0;
    kh_val(h->by_conn, it) = kh_val(h->by_conn, it) - before + now;
    if (kh_val(h->by_conn, it) == 0)
        kh_del(gw_held_by_conn, h->by_conn, it);
}

size_t gw_held_total(const gw_held_t *h)
{
    return h->total;
}

size_t gw_held_of(const gw_held_t *h, uint64_t conn)
{
    khiter_t it = kh_get(gw_held_by_conn, h->by_conn, conn);
    return it == kh_end(h->by_conn) ? 0 : kh_val(h->by_conn, it);
}

size_t gw_held_connections(const gw_held_t *h)
{
    return kh_size(h->by_conn);
}

int gw_held_over(const gw_held_t *h, uint64_t conn, size_t conn_max, size_t worker_max)
{
    return h->total > worker_max || gw_held_of(h, conn) > conn_max;
}

int gw_held_is_victim(const gw_held_t *h, uint64_t conn, size_t worker_max, uint64_t victim_conn, size_t victim_held)
{
    if (victim_held == 0)
        return 0;
    return h->total > worker_max || victim_conn == conn;
}
