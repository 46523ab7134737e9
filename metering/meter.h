/*
 * The meter: one worker's byte counts per sandbox, with the sandbox's
 * project. Only the owning thread touches a meter (no lock); every flush
 * interval its counts are handed over to the process-wide queue.
 */
#ifndef GW_METERING_METER_H
#define GW_METERING_METER_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/memory.h>
#include "metering/record.h"

/* Sandboxes one worker's meter remembers (with their project). Beyond it the
 * idle ones seen longest ago are forgotten; counts not yet handed over are
 * never dropped. */
#define GW_METER_MAX_SANDBOXES 100000

typedef struct st_gw_meter_t gw_meter_t;

/* An empty meter; never NULL (out of memory aborts). */
gw_meter_t *gw_meter_new(void);
/* NULL is a no-op. Counts not handed over are lost: submit first. */
void gw_meter_free(gw_meter_t *m);

/* Remembers the project of a sandbox (from its route), used by every
 * record of it from now on. `project` is copied (cleaned). */
void gw_meter_set_project(gw_meter_t *m, const char *sandbox_id, h2o_iovec_t project, uint64_t now_ms);

/* Both from a sandbox's route, in one look-up: its project (as
 * gw_meter_set_project) and its egress_quota (0: none) for its records from
 * now on (metering/quota.h). */
void gw_meter_set_route(gw_meter_t *m, const char *sandbox_id, h2o_iovec_t project, uint64_t quota, uint64_t now_ms);

/* Adds bytes moved for a sandbox at now_ms. A sandbox whose project was
 * never set (or forgotten) is counted with project "". */
void gw_meter_add(gw_meter_t *m, const char *sandbox_id, uint64_t egress, uint64_t ingress, uint64_t now_ms);

/* Calls cb for each sandbox with counts (the record is the meter's, valid
 * during the call), then zeroes those counts: they are the callee's now. */
void gw_meter_hand_over(gw_meter_t *m, void (*cb)(void *arg, const gw_metering_record_t *rec), void *arg);

/* Sandboxes remembered (tests). */
size_t gw_meter_num_sandboxes(const gw_meter_t *m);

#endif
