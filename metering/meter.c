/*
 * The per-worker meter (metering/meter.h): a table of records by sandbox
 * id, bounded by forgetting the idle sandboxes seen longest ago.
 */
#include <stdlib.h>
#include <string.h>
#include <h2o/string_.h>
#include "metering/meter.h"

struct st_gw_meter_t {
    gw_hashtab_t table;        /* of gw_metering_entry_t, one per sandbox */
    gw_metering_entry_t *last; /* the entry used last, or NULL: a request's route and byte reports name one
                                * sandbox in a row, so most lookups are a strcmp instead of a SipHash */
};

gw_meter_t *gw_meter_new(void)
{
    gw_meter_t *m = h2o_mem_alloc(sizeof(*m));

    gw_hashtab_init(&m->table);
    m->last = NULL;
    return m;
}

void gw_meter_free(gw_meter_t *m)
{
    if (m == NULL)
        return;
    gw_metering_entries_dispose(&m->table);
    free(m);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* At the cap: forgets the quarter of the idle sandboxes seen longest ago
 * (amortised O(log n) per insert). Entries with counts are kept: if all are
 * busy the table goes past the cap rather than lose bytes. */
static void forget_idle(gw_meter_t *m)
{
    uint64_t *ages = h2o_mem_alloc(gw_hashtab_size(&m->table) * sizeof(*ages)), threshold;
    gw_hashtab_node_t *n, *next;
    size_t num = 0;

    m->last = NULL;
    for (n = gw_hashtab_first(&m->table); n != NULL; n = gw_hashtab_next(&m->table, n))
        if (!gw_metering_record_has_bytes(&GW_METERING_ENTRY(n)->rec))
            ages[num++] = GW_METERING_ENTRY(n)->last_ms;
    if (num != 0) {
        qsort(ages, num, sizeof(*ages), cmp_u64);
        threshold = ages[num / 4];
        for (n = gw_hashtab_first(&m->table); n != NULL; n = next) {
            gw_metering_entry_t *e = GW_METERING_ENTRY(n);
            next = gw_hashtab_next(&m->table, n);
            if (!gw_metering_record_has_bytes(&e->rec) && e->last_ms <= threshold)
                gw_metering_entry_remove(&m->table, e);
        }
    }
    free(ages);
}

static gw_metering_entry_t *meter_entry(gw_meter_t *m, const char *sandbox_id)
{
    gw_metering_entry_t *e;

    if (m->last != NULL && strcmp(m->last->rec.sandbox, sandbox_id) == 0)
        return m->last;
    if ((e = gw_metering_entry_find(&m->table, sandbox_id, NULL)) == NULL) {
        if (gw_hashtab_size(&m->table) >= GW_METER_MAX_SANDBOXES)
            forget_idle(m);
        e = gw_metering_entry_add(&m->table, sandbox_id, gw_metering_project_dup("", 0));
    }
    return m->last = e;
}

static void set_project(gw_metering_entry_t *e, h2o_iovec_t project)
{
    char clean[GW_METERING_PROJECT_MAX + 1];
    size_t len = gw_metering_project_clean(project.base, project.len, clean);

    if (strcmp(e->rec.project, clean) == 0)
        return;
    /* a new project (or the first one): counts not yet handed over go with it */
    free(e->rec.project);
    e->rec.project = h2o_strdup(NULL, clean, len).base;
}

void gw_meter_set_project(gw_meter_t *m, const char *sandbox_id, h2o_iovec_t project, uint64_t now_ms)
{
    gw_metering_entry_t *e = meter_entry(m, sandbox_id);

    e->last_ms = now_ms;
    set_project(e, project);
}

void gw_meter_set_route(gw_meter_t *m, const char *sandbox_id, h2o_iovec_t project, uint64_t quota, uint64_t now_ms)
{
    gw_metering_entry_t *e = meter_entry(m, sandbox_id);

    e->last_ms = now_ms;
    e->rec.egress_quota = quota;
    set_project(e, project);
}

void gw_meter_add(gw_meter_t *m, const char *sandbox_id, uint64_t egress, uint64_t ingress, uint64_t now_ms)
{
    gw_metering_entry_t *e;

    if (egress == 0 && ingress == 0)
        return;
    e = meter_entry(m, sandbox_id);
    if (!gw_metering_record_has_bytes(&e->rec))
        e->rec.from_ms = now_ms;
    e->rec.egress += egress;
    e->rec.ingress += ingress;
    e->last_ms = now_ms;
}

void gw_meter_hand_over(gw_meter_t *m, void (*cb)(void *arg, const gw_metering_record_t *rec), void *arg)
{
    gw_hashtab_node_t *n;

    for (n = gw_hashtab_first(&m->table); n != NULL; n = gw_hashtab_next(&m->table, n)) {
        gw_metering_record_t *r = &GW_METERING_ENTRY(n)->rec;
        if (!gw_metering_record_has_bytes(r))
            continue;
        cb(arg, r);
        r->egress = 0;
        r->ingress = 0;
    }
}

size_t gw_meter_num_sandboxes(const gw_meter_t *m)
{
    return gw_hashtab_size(&m->table);
}
