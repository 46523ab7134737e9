/*
 * Records, batches and tables of records (metering/record.h), and the
 * cleaning of project ids: well-formed UTF-8, cut between characters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <h2o/memory.h>
#include <h2o/string_.h>
#include "metering/record.h"
#include "common/utf8.h"

void gw_metering_record_dispose(gw_metering_record_t *r)
{
    free(r->project);
    free(r->gateway);
    r->project = NULL;
    r->gateway = NULL;
}

size_t gw_metering_project_clean(const char *s, size_t len, char *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0, n;

    while (i != len) {
        /* NUL counts as ill-formed: the strings here end at it */
        if (u[i] == '\0' || (n = gw_utf8_char_len(u + i, len - i)) == 0) {
            if (o + 1 > GW_METERING_PROJECT_MAX)
                break;
            out[o++] = '?';
            ++i;
            continue;
        }
        if (o + n > GW_METERING_PROJECT_MAX)
            break; /* a whole character or none */
        memcpy(out + o, s + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
    return o;
}

char *gw_metering_project_dup(const char *s, size_t len)
{
    char clean[GW_METERING_PROJECT_MAX + 1];
    size_t n = gw_metering_project_clean(s, len, clean);

    return h2o_strdup(NULL, clean, n).base;
}

gw_metering_batch_t *gw_metering_batch_new(size_t capacity)
{
    gw_metering_batch_t *b = h2o_mem_alloc(sizeof(*b));

    memset(b, 0, sizeof(*b));
    b->records = h2o_mem_alloc(capacity * sizeof(*b->records));
    return b;
}

void gw_metering_batch_sum(gw_metering_batch_t *b)
{
    size_t i;

    b->first_seq = UINT64_MAX;
    b->last_seq = 0;
    b->egress = 0;
    b->sealed_ms = 0;
    for (i = 0; i != b->num_records; ++i) {
        const gw_metering_record_t *r = b->records + i;
        if (r->to_ms > b->sealed_ms)
            b->sealed_ms = r->to_ms;
        if (r->seq < b->first_seq)
            b->first_seq = r->seq;
        if (r->seq > b->last_seq)
            b->last_seq = r->seq;
        b->egress += r->egress;
    }
    if (b->num_records == 0)
        b->first_seq = 0;
}

void gw_metering_batch_free(gw_metering_batch_t *b)
{
    size_t i;

    if (b == NULL)
        return;
    for (i = 0; i != b->num_records; ++i)
        gw_metering_record_dispose(b->records + i);
    free(b->records);
    free(b);
}

gw_metering_entry_t *gw_metering_entry_find(const gw_hashtab_t *t, const char *id, const char *project)
{
    gw_hashtab_node_t *n;

    for (n = gw_hashtab_find(t, id, strlen(id)); n != NULL; n = gw_hashtab_find_next(t, n)) {
        gw_metering_entry_t *e = GW_METERING_ENTRY(n);
        if (project == NULL || strcmp(e->rec.project, project) == 0)
            return e;
    }
    return NULL;
}

gw_metering_entry_t *gw_metering_entry_add(gw_hashtab_t *t, const char *id, char *project)
{
    gw_metering_entry_t *e = h2o_mem_alloc(sizeof(*e));

    memset(e, 0, sizeof(*e));
    snprintf(e->rec.sandbox, sizeof(e->rec.sandbox), "%s", id);
    e->rec.project = project;
    gw_hashtab_insert(t, &e->node, e->rec.sandbox, strlen(e->rec.sandbox));
    return e;
}

void gw_metering_entry_remove(gw_hashtab_t *t, gw_metering_entry_t *e)
{
    gw_hashtab_remove(t, &e->node);
    gw_metering_record_dispose(&e->rec);
    free(e);
}

void gw_metering_entries_dispose(gw_hashtab_t *t)
{
    gw_hashtab_node_t *n, *next;

    for (n = gw_hashtab_first(t); n != NULL; n = next) {
        next = gw_hashtab_next(t, n);
        gw_metering_entry_remove(t, GW_METERING_ENTRY(n));
    }
    gw_hashtab_dispose(t);
}
