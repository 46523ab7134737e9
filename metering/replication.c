/*
 * INFO replication, read (metering/replication.h): the fields are
 * "key:value" lines; replicas are "slaveN:ip=..,port=..,state=..,offset=..,lag=..".
 */
#include <stdio.h>
#include <string.h>
#include "metering/replication.h"

/* The value of "key:" on a line of its own, as [*v, *v + *vlen). 0 or -1. */
static int field(const char *text, size_t len, const char *key, const char **v, size_t *vlen)
{
    size_t klen = strlen(key), i = 0;

    while (i < len) {
        const char *line = text + i, *eol = memchr(line, '\n', len - i);
        size_t n = eol != NULL ? (size_t)(eol - line) : len - i;
        if (n != 0 && line[n - 1] == '\r')
            --n;
        if (n > klen && memcmp(line, key, klen) == 0 && line[klen] == ':') {
            *v = line + klen + 1;
            *vlen = n - klen - 1;
            return 0;
        }
        i += (eol != NULL ? (size_t)(eol - line) + 1 : len - i);
    }
    return -1;
}

/* Decimal digits only (no sign); 0 or -1. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;

    if (len == 0 || len > 19)
        return -1;
    for (i = 0; i != len; ++i) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

static int copy_id(const char *s, size_t len, char *out)
{
    size_t i;

    if (len == 0 || len > GW_METERING_REPLID_MAX)
        return -1;
    for (i = 0; i != len; ++i)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return -1;
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

/* "ip=..,port=..,state=online,offset=N,lag=.." of slaveN: the acknowledged offset of an online replica. */
static int replica_ack(const char *v, size_t vlen, uint64_t *ack)
{
    const char *p = v, *end = v + vlen;
    int online = 0, have = 0;

    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p)), *e = comma != NULL ? comma : end;
        size_t n = (size_t)(e - p);
        if (n == sizeof("state=online") - 1 && memcmp(p, "state=online", n) == 0)
            online = 1;
        else if (n > 7 && memcmp(p, "offset=", 7) == 0)
            have = parse_u64(p + 7, n - 7, ack) == 0;
        p = e + 1;
    }
    return online && have ? 0 : -1;
}

int gw_repl_info_parse(const char *text, size_t len, gw_repl_info_t *out)
{
    const char *v;
    size_t vlen, i;
    char key[32];

    memset(out, 0, sizeof(*out));
    if (text == NULL || field(text, len, "role", &v, &vlen) != 0)
        return -1;
    out->is_primary = vlen == 6 && memcmp(v, "master", 6) == 0;
    if (field(text, len, "master_replid", &v, &vlen) != 0 || copy_id(v, vlen, out->replid) != 0)
        return -1;
    if (field(text, len, "master_repl_offset", &v, &vlen) != 0 || parse_u64(v, vlen, &out->offset) != 0)
        return -1;
    /* an all-zero replid2 and second_repl_offset -1 mean "none" */
    if (field(text, len, "master_replid2", &v, &vlen) == 0 && copy_id(v, vlen, out->replid2) == 0 &&
        strspn(out->replid2, "0") == strlen(out->replid2))
        out->replid2[0] = '\0';
    if (field(text, len, "second_repl_offset", &v, &vlen) != 0 || parse_u64(v, vlen, &out->second_offset) != 0)
        out->second_offset = 0;
    for (i = 0; i != 1000; ++i) {
        uint64_t ack = 0;
        snprintf(key, sizeof(key), "slave%zu", i);
        if (field(text, len, key, &v, &vlen) != 0)
            break;
        if (replica_ack(v, vlen, &ack) != 0)
            continue;
        ++out->online_replicas;
        if (ack > out->best_ack)
            out->best_ack = ack;
    }
    return 0;
}

int gw_repl_holds(const gw_repl_info_t *now, const char *replid, uint64_t offset)
{
    if (replid[0] == '\0')
        return 0;
    if (strcmp(now->replid, replid) == 0)
        return offset == GW_METERING_OFFSET_UNKNOWN || offset <= now->offset;
    /* promoted from that history: it holds that history's bytes below second_repl_offset (its
     * offset at promotion plus one); an offset we never learnt cannot be placed */
    return now->replid2[0] != '\0' && strcmp(now->replid2, replid) == 0 && now->second_offset != 0 && offset != 0 &&
           offset != GW_METERING_OFFSET_UNKNOWN && offset < now->second_offset;
}

int gw_repl_lacks(const gw_repl_info_t *now, const char *replid, uint64_t offset)
{
    return now->replid2[0] != '\0' && strcmp(now->replid2, replid) == 0 && now->second_offset != 0 && offset != 0 &&
           offset != GW_METERING_OFFSET_UNKNOWN && offset >= now->second_offset;
}

int gw_repl_acked(const gw_repl_info_t *now, const char *replid, uint64_t offset)
{
    return now->online_replicas != 0 && strcmp(now->replid, replid) == 0 && offset != GW_METERING_OFFSET_UNKNOWN &&
           offset <= now->best_ack;
}
