/*
 * The journal's entries, written and read (metering/journal_format.h).
 * Each entry carries the CRC-32 of its JSON, so a torn or damaged line is
 * found and skipped alone; a file of a later version is refused whole.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <zlib.h>
#include <h2o/memory.h>
#include "metering/journal_format.h"
#include "metering/spill.h"

#define CRC_HEX 8

void gw_jbuf_append(gw_jbuf_t *b, const char *s, size_t len)
{
    if (b->len + len > b->cap) {
        size_t cap = b->cap != 0 ? b->cap : 4096;
        while (cap < b->len + len)
            cap *= 2;
        b->base = h2o_mem_realloc(b->base, cap);
        b->cap = cap;
    }
    memcpy(b->base + b->len, s, len);
    b->len += len;
}

void gw_jbuf_dispose(gw_jbuf_t *b)
{
    free(b->base);
    memset(b, 0, sizeof(*b));
}

/* --- writing ---------------------------------------------------------------- */

/* "<crc> <json>\n"; takes obj. A record that cannot be encoded (never: its
 * strings are cleaned) is dropped with a line on stderr. */
static void put_json(gw_jbuf_t *out, json_t *obj)
{
    char *text = obj != NULL ? json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    char crc[CRC_HEX + 2];

    json_decref(obj);
    if (text == NULL) {
        fprintf(stderr, "lizard-gateway: metering: journal: an entry could not be encoded as JSON: skipped\n");
        return;
    }
    size_t len = strlen(text);
    snprintf(crc, sizeof(crc), "%08lx ", (unsigned long)crc32(0, (const Bytef *)text, (uInt)len));
    gw_jbuf_append(out, crc, CRC_HEX + 1);
    gw_jbuf_append(out, text, len);
    gw_jbuf_append(out, "\n", 1);
    free(text);
}

void gw_journal_put_header(gw_jbuf_t *out)
{
    char line[64];
    int n = snprintf(line, sizeof(line), GW_JOURNAL_MAGIC "%d\n", GW_JOURNAL_VERSION);

    gw_jbuf_append(out, line, (size_t)n);
}

void gw_journal_put_exec(gw_jbuf_t *out, const gw_metering_batch_t *b)
{
    json_int_t offset = b->exec_offset == GW_METERING_OFFSET_UNKNOWN ? -1 : (json_int_t)b->exec_offset;

    put_json(out, json_pack("{s:s, s:I, s:I, s:s, s:I}", "t", "exec", "first", (json_int_t)b->first_seq, "last",
                            (json_int_t)b->last_seq, "replid", b->exec_replid, "offset", offset));
}

void gw_journal_put_done(gw_jbuf_t *out, const gw_metering_batch_t *b)
{
    put_json(out, json_pack("{s:s, s:I, s:I}", "t", "done", "first", (json_int_t)b->first_seq, "last", (json_int_t)b->last_seq));
}

void gw_journal_put_batch(gw_jbuf_t *out, const gw_metering_batch_t *b, const char *instance_id)
{
    size_t i;

    put_json(out, json_pack("{s:s, s:I, s:I, s:I}", "t", "batch", "first", (json_int_t)b->first_seq, "last",
                            (json_int_t)b->last_seq, "records", (json_int_t)b->num_records));
    for (i = 0; i != b->num_records; ++i) {
        const gw_metering_record_t *r = b->records + i;
        put_json(out, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:I}", "t", "rec", "sandbox", r->sandbox, "project",
                                r->project, "egress", (json_int_t)r->egress, "ingress", (json_int_t)r->ingress, "from_ms",
                                (json_int_t)r->from_ms, "to_ms", (json_int_t)r->to_ms, "gateway",
                                r->gateway != NULL ? r->gateway : instance_id, "seq", (json_int_t)r->seq));
    }
    if (b->state == GW_METERING_BATCH_EXECUTED)
        gw_journal_put_exec(out, b);
}

void gw_journal_put_open(gw_jbuf_t *out, const gw_metering_record_t *r, uint64_t egress, uint64_t ingress)
{
    put_json(out, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "t", "open", "sandbox", r->sandbox, "project", r->project,
                            "egress", (json_int_t)egress, "ingress", (json_int_t)ingress, "from_ms", (json_int_t)r->from_ms,
                            "to_ms", (json_int_t)r->to_ms));
}

/* --- reading ---------------------------------------------------------------- */

typedef struct st_parse_t {
    gw_journal_replay_t *out;
    gw_metering_batch_t **tail;
    gw_metering_batch_t *cur; /* the batch whose records come now */
    size_t expect;            /* cur's records as its entry says */
    gw_journal_report_cb report;
    void *arg;
    size_t lineno;
} parse_t;

static void bad(parse_t *p, const char *why)
{
    ++p->out->malformed;
    p->report(p->arg, p->lineno, why);
}

static void clear_open(gw_hashtab_t *open)
{
    gw_metering_entries_dispose(open);
    gw_hashtab_init(open);
}

static void merge_open(gw_hashtab_t *open, gw_metering_record_t *r)
{
    gw_metering_entry_t *e = gw_metering_entry_find(open, r->sandbox, r->project);

    if (e == NULL) {
        e = gw_metering_entry_add(open, r->sandbox, r->project);
        r->project = NULL;
        e->rec.from_ms = r->from_ms;
    }
    if (r->from_ms < e->rec.from_ms)
        e->rec.from_ms = r->from_ms;
    if (r->to_ms > e->rec.to_ms)
        e->rec.to_ms = r->to_ms;
    e->rec.egress += r->egress;
    e->rec.ingress += r->ingress;
    e->journaled_egress = e->rec.egress;
    e->journaled_ingress = e->rec.ingress;
    gw_metering_record_dispose(r);
}

static void append_batch(parse_t *p, gw_metering_batch_t *b)
{
    b->from_spill = 1;
    b->next = NULL;
    *p->tail = b;
    p->tail = &b->next;
}

/* The batch named (first, last), and the link that points to it. */
static gw_metering_batch_t **find_batch(parse_t *p, uint64_t first, uint64_t last)
{
    gw_metering_batch_t **link;

    for (link = &p->out->head; *link != NULL; link = &(*link)->next)
        if ((*link)->first_seq == first && (*link)->last_seq == last)
            return link;
    return NULL;
}

static int get_u64(json_t *obj, const char *key, uint64_t *v)
{
    json_t *j = json_object_get(obj, key);

    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return -1;
    *v = (uint64_t)json_integer_value(j);
    return 0;
}

/* A batch's entry: what was still open went into it. */
static void on_batch(parse_t *p, json_t *obj)
{
    uint64_t first, last, n;

    if (p->cur != NULL && p->cur->num_records != p->expect)
        bad(p, "the batch before this entry lacks records (they were damaged)");
    p->cur = NULL;
    if (get_u64(obj, "first", &first) != 0 || get_u64(obj, "last", &last) != 0 || get_u64(obj, "records", &n) != 0 || first == 0 ||
        first > last || n == 0 || n > GW_METERING_MAX_BATCH_RECORDS) {
        bad(p, "batch: expected first <= last (from 1) and 1 to 1000 records");
        return;
    }
    clear_open(&p->out->open);
    p->cur = gw_metering_batch_new((size_t)n);
    p->cur->first_seq = first;
    p->cur->last_seq = last;
    p->expect = (size_t)n;
    append_batch(p, p->cur);
}

static void on_rec(parse_t *p, json_t *obj)
{
    gw_metering_record_t rec;
    const char *why;

    if (gw_metering_record_from_json(obj, 1, &rec, NULL, &why) != 0) {
        bad(p, why);
        return;
    }
    if (p->cur == NULL || p->cur->num_records == p->expect || rec.seq < p->cur->first_seq || rec.seq > p->cur->last_seq) {
        gw_metering_record_dispose(&rec);
        bad(p, "a record outside the batch before it (whose entry was damaged)");
        return;
    }
    p->cur->records[p->cur->num_records++] = rec;
    if (rec.seq > p->out->max_seq)
        p->out->max_seq = rec.seq;
}

/* exec or done: the batch they name. */
static void on_settled(parse_t *p, json_t *obj, int done)
{
    gw_metering_batch_t **link, *b;
    uint64_t first, last;
    json_t *replid = json_object_get(obj, "replid"), *offset = json_object_get(obj, "offset");

    if (get_u64(obj, "first", &first) != 0 || get_u64(obj, "last", &last) != 0) {
        bad(p, "exec, done: expected first and last");
        return;
    }
    if ((link = find_batch(p, first, last)) == NULL) {
        bad(p, done ? "done names a batch not in the journal" : "exec names a batch not in the journal");
        return;
    }
    b = *link;
    if (done) {
        if ((*link = b->next) == NULL)
            p->tail = link;
        if (p->cur == b)
            p->cur = NULL;
        gw_metering_batch_free(b);
        return;
    }
    if (!json_is_string(replid) || json_string_length(replid) == 0 || json_string_length(replid) > GW_METERING_REPLID_MAX ||
        !json_is_integer(offset) || json_integer_value(offset) < -1) {
        bad(p, "exec: expected a replid and an offset");
        return;
    }
    b->state = GW_METERING_BATCH_EXECUTED;
    memcpy(b->exec_replid, json_string_value(replid), json_string_length(replid) + 1);
    b->exec_offset = json_integer_value(offset) == -1 ? GW_METERING_OFFSET_UNKNOWN : (uint64_t)json_integer_value(offset);
}

static int hex8(const char *s, unsigned long *v)
{
    size_t i;

    *v = 0;
    for (i = 0; i != CRC_HEX; ++i) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        *v = *v << 4 | (unsigned long)d;
    }
    return 0;
}

/* One entry of version 2 (len bytes without its newline). */
static void on_entry(parse_t *p, const char *line, size_t len)
{
    unsigned long crc;
    json_error_t jerr;
    json_t *obj, *t;
    const char *type;

    if (len > GW_JOURNAL_LINE_MAX) {
        bad(p, "longer than GW_JOURNAL_LINE_MAX");
        return;
    }
    if (len < CRC_HEX + 3 || hex8(line, &crc) != 0 || line[CRC_HEX] != ' ') {
        bad(p, "not an entry (<crc32> <JSON>)");
        return;
    }
    line += CRC_HEX + 1;
    len -= CRC_HEX + 1;
    if (crc32(0, (const Bytef *)line, (uInt)len) != crc) {
        bad(p, "its checksum does not match (damaged)");
        return;
    }
    if ((obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL || !json_is_string(t = json_object_get(obj, "t"))) {
        json_decref(obj);
        bad(p, "not a JSON object with a type");
        return;
    }
    type = json_string_value(t);
    if (strcmp(type, "batch") == 0) {
        on_batch(p, obj);
    } else if (strcmp(type, "rec") == 0) {
        on_rec(p, obj);
    } else if (strcmp(type, "open") == 0) {
        gw_metering_record_t rec;
        const char *why;
        if (gw_metering_record_from_json(obj, 0, &rec, NULL, &why) == 0)
            merge_open(&p->out->open, &rec);
        else
            bad(p, why);
    } else if (strcmp(type, "exec") == 0 || strcmp(type, "done") == 0) {
        on_settled(p, obj, type[0] == 'd');
    } else {
        bad(p, "an unknown type of entry");
    }
    json_decref(obj);
}

/* --- version 1: a spill file (JSON lines of records) ---------------------------- */

typedef struct st_v1_rec_t {
    gw_metering_record_t rec;
    char executed_on[GW_METERING_REPLID_MAX + 1];
} v1_rec_t;

static int cmp_v1(const void *a, const void *b)
{
    uint64_t x = ((const v1_rec_t *)a)->rec.seq, y = ((const v1_rec_t *)b)->rec.seq;
    return x < y ? -1 : x > y;
}

/* Its records sorted by seq, cut into batches of disjoint seq ranges, one
 * executed_on each (a batch EXEC took on that primary: held there only). */
static void v1_batches(parse_t *p, v1_rec_t *recs, size_t n)
{
    gw_metering_batch_t *b = NULL;
    size_t i;

    qsort(recs, n, sizeof(*recs), cmp_v1);
    for (i = 0; i != n; ++i) {
        if (b == NULL || b->num_records == GW_METERING_MAX_BATCH_RECORDS || strcmp(b->exec_replid, recs[i].executed_on) != 0) {
            b = gw_metering_batch_new(GW_METERING_MAX_BATCH_RECORDS);
            memcpy(b->exec_replid, recs[i].executed_on, sizeof(b->exec_replid));
            b->state = b->exec_replid[0] != '\0' ? GW_METERING_BATCH_EXECUTED : GW_METERING_BATCH_SEALED;
            append_batch(p, b);
        }
        b->records[b->num_records++] = recs[i].rec;
        if (recs[i].rec.seq > p->out->max_seq)
            p->out->max_seq = recs[i].rec.seq;
    }
}

static void parse_v1(parse_t *p, const char *text, size_t len)
{
    size_t cap = 64, n = 0, i = 0;
    v1_rec_t *recs = h2o_mem_alloc(cap * sizeof(*recs));

    while (i < len) {
        const char *line = text + i, *eol = memchr(line, '\n', len - i);
        size_t l = eol != NULL ? (size_t)(eol - line) : len - i;
        const char *why;
        i += l + 1;
        ++p->lineno;
        if (l == 0)
            continue;
        if (l > GW_JOURNAL_LINE_MAX) {
            bad(p, "longer than GW_JOURNAL_LINE_MAX");
            continue;
        }
        if (memchr(line, '\0', l) != NULL) {
            bad(p, "contains a NUL byte");
            continue;
        }
        if (n == cap)
            recs = h2o_mem_realloc(recs, (cap *= 2) * sizeof(*recs));
        if (gw_metering_parse_spill_line(line, l, &recs[n].rec, recs[n].executed_on, &why) != 0) {
            bad(p, why);
            continue;
        }
        ++n;
    }
    v1_batches(p, recs, n);
    free(recs);
}

/* --- a whole file --------------------------------------------------------------- */

static void parse_v2(parse_t *p, const char *text, size_t len, size_t i)
{
    while (i < len) {
        const char *line = text + i, *eol = memchr(line, '\n', len - i);
        size_t l = eol != NULL ? (size_t)(eol - line) : len - i;
        i += l + 1;
        ++p->lineno;
        if (eol == NULL) {
            /* a write cut short (a crash, a full disk): none of it was ever acknowledged */
            bad(p, "the last entry is incomplete (the write was cut short)");
            break;
        }
        on_entry(p, line, l);
    }
    if (p->cur != NULL && p->cur->num_records != p->expect)
        bad(p, "the last batch lacks records (they were damaged or cut off)");
}

/* The header's version: 0 when the line is not a header. */
static long header_version(const char *line, size_t len)
{
    size_t mlen = sizeof(GW_JOURNAL_MAGIC) - 1, i;
    long v = 0;

    if (len <= mlen || memcmp(line, GW_JOURNAL_MAGIC, mlen) != 0 || len - mlen > 9)
        return 0;
    for (i = mlen; i != len; ++i) {
        if (line[i] < '0' || line[i] > '9')
            return 0;
        v = v * 10 + (line[i] - '0');
    }
    return v;
}

int gw_journal_parse(const char *text, size_t len, gw_journal_replay_t *out, gw_journal_report_cb report, void *arg,
                     const char **err)
{
    parse_t p = {out, &out->head, NULL, 0, report, arg, 0};
    const char *eol;
    size_t first_len;
    gw_metering_batch_t **link, *b;
    long version;

    memset(out, 0, sizeof(*out));
    gw_hashtab_init(&out->open);
    if (len == 0)
        return 0;
    if (text[0] == '{') {
        out->version = 1;
        parse_v1(&p, text, len);
    } else {
        eol = memchr(text, '\n', len);
        first_len = eol != NULL ? (size_t)(eol - text) : len;
        version = eol != NULL ? header_version(text, first_len) : 0;
        if (version > GW_JOURNAL_VERSION) {
            *err = "written by a later version of lizard-gateway (its journal version is higher than 2)";
            return -1;
        }
        out->version = GW_JOURNAL_VERSION;
        p.lineno = 1;
        if (version != GW_JOURNAL_VERSION)
            bad(&p, eol != NULL ? "not a journal header" : "the header is incomplete (the write was cut short)");
        parse_v2(&p, text, len, eol != NULL ? first_len + 1 : len);
    }
    /* a batch whose records were all damaged replays nothing; the others are named by their records now */
    for (link = &out->head; (b = *link) != NULL;) {
        if (b->num_records == 0) {
            *link = b->next;
            gw_metering_batch_free(b);
            continue;
        }
        gw_metering_batch_sum(b);
        out->records += b->num_records;
        link = &b->next;
    }
    return 0;
}

void gw_journal_replay_dispose(gw_journal_replay_t *r)
{
    while (r->head != NULL) {
        gw_metering_batch_t *b = r->head;
        r->head = b->next;
        gw_metering_batch_free(b);
    }
    gw_metering_entries_dispose(&r->open);
}
