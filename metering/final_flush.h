/*
 * The final flush: at exit, with no event loop running, everything still
 * pending is written to Redis over a blocking hiredis connection within a
 * deadline, and what Redis did not take stays in the journal.
 */
#ifndef GW_METERING_FINAL_FLUSH_H
#define GW_METERING_FINAL_FLUSH_H

#include <stdint.h>
#include "metering/queue.h"
#include "common/redis.h"

/* Seals everything and writes it to Redis (to conf->addr, or to the
 * primary the sentinels name; with conf's passwords), all within
 * timeout_ms: first the workers' last activity (ZADD GT, best-effort), then
 * every batch the primary does not hold already; a batch counts as written
 * as in the flusher (EXEC answered; with Sentinel once a replica
 * acknowledged it, which a WAIT 1 hastens). What is left stays in the
 * journal (rewritten) for the next start; with nothing left the journal is
 * removed. Call after the flusher stopped. Returns 0 when everything was
 * written or journaled, -1 when records were lost (reported on stderr,
 * counted in records_lost). */
int gw_metering_final_flush(gw_metering_t *m, const gw_redis_conf_t *conf, uint64_t timeout_ms);

/* The same blocking connection for a one-off command outside the server
 * (sign-link reads link_epoch with it): conf->addr, or the primary the
 * sentinels name, AUTH done, every call bounded by timeout_ms from now.
 * Returns the context (redisFree it), or NULL with the reason in why
 * (why_size bytes, never a password). */
redisContext *gw_metering_connect_blocking(const gw_redis_conf_t *conf, uint64_t timeout_ms, char *why, size_t why_size);

#endif
