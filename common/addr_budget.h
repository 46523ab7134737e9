/*
 * A budget of something costly that a client can make the gateway do (the
 * custom-domain look-ups in Redis that an unknown host name costs): a token
 * bucket per client address and one for everyone, one object per process,
 * shared by the workers. An IPv6 client is counted by its /64 (one host gets
 * a whole /64 from its network: counting addresses would let it make up new
 * ones); an IPv4-mapped IPv6 address is its IPv4 address. At most
 * GW_ADDR_BUDGET_MAX_CLIENTS addresses are remembered (the one used longest
 * ago goes first: a forgotten address starts with a full bucket, which the
 * bucket for everyone still bounds). One mutex: a take is a hash look-up and
 * a few additions, made only before the costly thing.
 */
#ifndef GW_COMMON_ADDR_BUDGET_H
#define GW_COMMON_ADDR_BUDGET_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#define GW_ADDR_BUDGET_MAX_CLIENTS 16384

typedef struct st_gw_addr_budget_t gw_addr_budget_t;

typedef struct st_gw_addr_budget_conf_t {
    uint64_t per_client_rate;  /* tokens a second per client address; 0: no per-client bound */
    uint64_t per_client_burst; /* a client's full bucket (at least 1) */
    uint64_t total_rate;       /* tokens a second, every client together; 0: no bound */
    uint64_t total_burst;      /* the full bucket of everyone (at least 1) */
} gw_addr_budget_conf_t;

typedef enum {
    GW_ADDR_BUDGET_OK = 0,
    GW_ADDR_BUDGET_CLIENT, /* this client's bucket is empty */
    GW_ADDR_BUDGET_TOTAL,  /* the bucket of everyone is empty */
} gw_addr_budget_result_t;

/* Any thread adds (relaxed atomics); read by the metrics. */
typedef struct st_gw_addr_budget_counters_t {
    atomic_uint_fast64_t taken;
    atomic_uint_fast64_t refused_client;
    atomic_uint_fast64_t refused_total;
} gw_addr_budget_counters_t;

/* Copies conf. Never NULL. */
gw_addr_budget_t *gw_addr_budget_new(const gw_addr_budget_conf_t *conf);
void gw_addr_budget_free(gw_addr_budget_t *b);

/* Takes one token of the client at `sa` (NULL, or not IP: counted as one
 * client, "unknown") and one of everyone's, both or none. Any thread. */
gw_addr_budget_result_t gw_addr_budget_take(gw_addr_budget_t *b, const struct sockaddr *sa, socklen_t len);
/* The same at `now_us` (a monotonic clock, microseconds): tests. */
gw_addr_budget_result_t gw_addr_budget_take_at(gw_addr_budget_t *b, const struct sockaddr *sa, socklen_t len, uint64_t now_us);

gw_addr_budget_counters_t *gw_addr_budget_counters(gw_addr_budget_t *b);

/* Addresses remembered now (tests). */
size_t gw_addr_budget_num_clients(gw_addr_budget_t *b);

#endif
