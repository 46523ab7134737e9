/*
 * Who may reach a sandbox and how much (../shared/CONTRACT.md, Redis:
 * ingress_allow, ingress_deny, req_rate, egress_quota; docs/access-control.md, "Who may
 * reach a sandbox, and how much"): the fields parsed once per route fetch,
 * with the sandbox's record, so that a request only compares addresses.
 */
#ifndef GW_ROUTING_INGRESS_H
#define GW_ROUTING_INGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis/hiredis.h>
#include "common/netaddr.h"

/* Networks in one ingress list; a longer list is malformed (refused). */
#define GW_INGRESS_MAX_CIDRS 256

/* The ingress lists of one sandbox; NULL in the record when it has neither. */
typedef struct st_gw_ingress_t {
    int malformed;    /* a list did not parse: every client is refused */
    int has_allow;    /* ingress_allow is present: only its networks pass */
    size_t num_deny;  /* cidrs[0 .. num_deny) */
    size_t num_allow; /* cidrs[num_deny .. num_deny + num_allow) */
    gw_cidr_t cidrs[];
} gw_ingress_t;

/* Parses the record's ingress_deny and ingress_allow values (NULL: absent)
 * into a new gw_ingress_t (free()), or NULL when both are absent. A
 * malformed list gives a record with `malformed` set and writes one operator
 * line to stderr naming the sandbox, the field and what is wrong (the
 * lists are the platform's: they never reach a client). */
gw_ingress_t *gw_ingress_parse(const char *sandbox_id, const redisReply *deny, const redisReply *allow);

/* 1 when a client at `sa` may reach the sandbox: not inside a deny network,
 * and inside an allow network when there is an allow list. NULL rules: 1. */
int gw_ingress_admits(const gw_ingress_t *rules, const struct sockaddr *sa);

/* Parses a req_rate value: a decimal 1 .. max, no sign. Returns the value,
 * or 0 (unlimited) with one operator line to stderr when malformed. */
uint64_t gw_ingress_parse_limit(const char *sandbox_id, const char *field, const redisReply *v, uint64_t max);

/* A sandbox without an egress_quota (no running total ever reaches it: Redis
 * integers stop at 2^63 - 1). */
#define GW_EGRESS_QUOTA_NONE UINT64_MAX

/* Parses an egress_quota value: a decimal 0 .. 2^63 - 1 (0: every request is
 * refused), no sign. Returns it, or GW_EGRESS_QUOTA_NONE (unlimited) with one
 * operator line to stderr when malformed, as for req_rate. */
uint64_t gw_ingress_parse_quota(const char *sandbox_id, const redisReply *v);

/* The running total <prefix>egress:{<id>} from a GET reply: a decimal
 * string (INCRBY's). Anything else (no key, a negative or malformed value,
 * an error) is 0: the total is not known to have reached anything. */
uint64_t gw_ingress_parse_total(const redisReply *v);

#endif
