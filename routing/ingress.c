/*
 * The ingress lists and limits of a sandbox's record (routing/ingress.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "routing/ingress.h"

/* Longest network text: an IPv6 address with a /128 and some spaces. */
#define CIDR_TEXT_MAX 64

/* Networks in a comma-separated list (an upper bound: commas + 1), 0 for an empty value. */
static size_t count_items(const redisReply *v)
{
    size_t n = 1, i;

    if (v == NULL || v->len == 0)
        return 0;
    for (i = 0; i != (size_t)v->len; ++i)
        n += v->str[i] == ',';
    return n;
}

/* Parses one list into out (room for count_items); returns the count, or -1 with *err. */
static ssize_t parse_list(const redisReply *v, gw_cidr_t *out, const char **err)
{
    const char *p = v->str, *end = v->str + v->len;
    size_t n = 0;

    if (v->len == 0)
        return 0; /* an empty list: no network */
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p)), *s = p, *e = comma != NULL ? comma : end;
        char buf[CIDR_TEXT_MAX];
        while (s < e && (*s == ' ' || *s == '\t'))
            ++s;
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            --e;
        if (e == s) {
            *err = "an empty entry";
            return -1;
        }
        if ((size_t)(e - s) >= sizeof(buf)) {
            *err = "an entry too long to be a network";
            return -1;
        }
        memcpy(buf, s, (size_t)(e - s));
        buf[e - s] = '\0';
        if (gw_cidr_parse(buf, out + n, err) != 0)
            return -1;
        ++n;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return (ssize_t)n;
}

gw_ingress_t *gw_ingress_parse(const char *sandbox_id, const redisReply *deny, const redisReply *allow)
{
    size_t nd = count_items(deny), na = count_items(allow);
    const char *err = NULL, *field = "ingress_deny";
    gw_ingress_t *r;
    ssize_t got;

    if (deny == NULL && allow == NULL)
        return NULL;
    if ((r = calloc(1, sizeof(*r) + (nd + na) * sizeof(gw_cidr_t))) == NULL)
        abort();
    r->has_allow = allow != NULL;
    if (nd > GW_INGRESS_MAX_CIDRS || na > GW_INGRESS_MAX_CIDRS) {
        field = nd > GW_INGRESS_MAX_CIDRS ? "ingress_deny" : "ingress_allow";
        err = "more than 256 networks";
    } else if (deny != NULL && (got = parse_list(deny, r->cidrs, &err)) >= 0) {
        r->num_deny = (size_t)got;
    }
    if (err == NULL && allow != NULL) {
        field = "ingress_allow";
        if ((got = parse_list(allow, r->cidrs + r->num_deny, &err)) >= 0)
            r->num_allow = (size_t)got;
    }
    if (err != NULL) {
        r->malformed = 1;
        r->num_deny = r->num_allow = 0;
        fprintf(stderr,
                "route: sandbox %s: %s is malformed (%s): every client is refused with ip_not_allowed until the "
                "control plane fixes it\n",
                sandbox_id, field, err);
    }
    return r;
}

int gw_ingress_admits(const gw_ingress_t *rules, const struct sockaddr *sa)
{
    if (rules == NULL)
        return 1;
    if (rules->malformed || sa == NULL)
        return 0;
    if (gw_cidr_list_contains(rules->cidrs, rules->num_deny, sa))
        return 0;
    return !rules->has_allow || gw_cidr_list_contains(rules->cidrs + rules->num_deny, rules->num_allow, sa);
}

/* A decimal 0 .. max without sign into *out: 0, or -1 (empty, not a digit, too large). */
static int parse_decimal(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t n = 0;
    size_t i;

    if (len == 0)
        return -1;
    for (i = 0; i != len; ++i) {
        if (s[i] < '0' || s[i] > '9' || n > (max - (uint64_t)(s[i] - '0')) / 10)
            return -1;
        n = n * 10 + (uint64_t)(s[i] - '0');
    }
    *out = n;
    return 0;
}

uint64_t gw_ingress_parse_limit(const char *sandbox_id, const char *field, const redisReply *v, uint64_t max)
{
    uint64_t n = 0;

    if (parse_decimal(v->str, (size_t)v->len, max, &n) != 0)
        n = 0;
    if (n == 0)
        fprintf(stderr, "route: sandbox %s: %s is not a decimal from 1 to %llu: it is ignored (unlimited)\n", sandbox_id, field,
                (unsigned long long)max);
    return n;
}

uint64_t gw_ingress_parse_quota(const char *sandbox_id, const redisReply *v)
{
    uint64_t n;

    if (parse_decimal(v->str, (size_t)v->len, INT64_MAX, &n) == 0)
        return n;
    fprintf(stderr, "route: sandbox %s: egress_quota is not a decimal from 0 to %lld: it is ignored (unlimited)\n", sandbox_id,
            (long long)INT64_MAX);
    return GW_EGRESS_QUOTA_NONE;
}

uint64_t gw_ingress_parse_total(const redisReply *v)
{
    uint64_t n;

    if (v == NULL)
        return 0;
    if (v->type == REDIS_REPLY_INTEGER)
        return v->integer > 0 ? (uint64_t)v->integer : 0;
    if (v->type != REDIS_REPLY_STRING || parse_decimal(v->str, (size_t)v->len, INT64_MAX, &n) != 0)
        return 0;
    return n;
}
