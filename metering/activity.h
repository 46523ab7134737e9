/*
 * Activity (../shared/CONTRACT.md, "Activity"): when each sandbox last had
 * traffic through this worker (a request forwarded, bytes moved either way
 * through a response or a WebSocket tunnel), written with each metering
 * flush as ZADD <prefix>activity GT <unix-ms> <id>, so that the control
 * plane can keep in-use sandboxes alive and end idle ones. Best-effort: a
 * failed write is not retried, and nothing is spilled.
 */
#ifndef GW_METERING_ACTIVITY_H
#define GW_METERING_ACTIVITY_H

#include <stddef.h>
#include <stdint.h>
#include "common/redis.h"

/* Sandboxes one worker remembers between two flushes; traffic of more is
 * not recorded until the next flush (counted in dropped). */
#define GW_ACTIVITY_MAX_SANDBOXES 100000
/* Members per ZADD: a flush with more sends several. */
#define GW_ACTIVITY_MAX_PER_COMMAND 500
/* Deadline of one ZADD. */
#define GW_ACTIVITY_TIMEOUT_MS 5000

typedef struct st_gw_activity_t gw_activity_t;

/* Per worker (no lock: only its thread touches it). Never NULL (aborts on
 * OOM). NULL is a no-op for free. */
gw_activity_t *gw_activity_new(void);
void gw_activity_free(gw_activity_t *a);

/* Records traffic of sandbox_id (copied) at unix_ms; the latest time wins. */
void gw_activity_touch(gw_activity_t *a, const char *sandbox_id, uint64_t unix_ms);

/* Sends what was recorded since the last flush on `redis` as ZADD
 * "<prefix>activity" GT ... and forgets it (sent or not). Returns the number
 * of sandboxes sent. */
size_t gw_activity_flush(gw_activity_t *a, gw_redis_t *redis, const char *prefix);

/* Takes one ZADD command (argv's strings live only until it returns).
 * Returns 0, or -1 when it could not be sent. */
typedef int (*gw_activity_emit_cb)(void *arg, int argc, const char **argv, const size_t *argvlen);
/* The same ZADD commands handed to emit (the final flush's blocking
 * connection); forgets what was recorded. Returns the commands emit took. */
size_t gw_activity_emit(gw_activity_t *a, const char *prefix, gw_activity_emit_cb emit, void *arg);

/* Moves what `from` recorded into `into` (the latest time wins), leaving
 * `from` empty. The caller keeps both to one thread at a time. */
void gw_activity_merge(gw_activity_t *into, gw_activity_t *from);

/* Sandboxes recorded since the last flush (tests). */
size_t gw_activity_num_pending(const gw_activity_t *a);
/* Touches of new sandboxes refused at GW_ACTIVITY_MAX_SANDBOXES. */
uint64_t gw_activity_dropped(const gw_activity_t *a);

#endif
