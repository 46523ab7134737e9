/*
 * A worker's metering (see worker_meter.h): the meter and the activity of
 * one thread, and their hand-over to the process's queue on a timer.
 */
#include <stdlib.h>
#include <time.h>
#include "common/engine.h"
#include "common/loop_timeout.h"
#include "metering/activity.h"
#include "metering/flusher.h"
#include "metering/meter.h"
#include "metering/queue.h"
#include "metering/worker_meter.h"
#include "routing/ingress.h"

struct st_gw_worker_meter_t {
    gw_metering_t *metering;
    gw_redis_t *redis;
    const char *prefix;
    int runs_flusher;
    h2o_loop_t *loop;
    gw_meter_t *meter;
    gw_activity_t *activity;
    gw_timeout_t *tick_timeout; /* the loop's (common/loop_timeout.h) */
    gw_timer_t tick;
    uint64_t flush_interval_ms;
    uint64_t next_flush_at; /* h2o_now: the next tick at or after it seals */
};

static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Every tick (half the journal interval, or the flush interval if shorter):
 * this worker's counts go to the shared queue, where the journal's thread
 * finds them. Every flush interval the flusher's worker also seals them
 * into a batch, and the activity is written. */
static void on_tick(gw_timer_t *entry)
{
    gw_worker_meter_t *wm = H2O_STRUCT_FROM_MEMBER(gw_worker_meter_t, tick, entry);
    uint64_t now = h2o_now(wm->loop);
    int flush = now >= wm->next_flush_at;

    gw_metering_submit(wm->metering, wm->meter, now);
    if (wm->runs_flusher)
        gw_metering_flush(wm->metering, flush); /* between seals: acknowledgements, a retry */
    if (flush) {
        gw_activity_flush(wm->activity, wm->redis, wm->prefix);
        /* a tick a few ms early must not wait a whole interval more */
        wm->next_flush_at = now + wm->flush_interval_ms - wm->flush_interval_ms / 10;
    }
    gw_timer_link(wm->loop, wm->tick_timeout, &wm->tick);
}

gw_worker_meter_t *gw_worker_meter_new(h2o_loop_t *loop, const gw_worker_meter_conf_t *conf)
{
    gw_worker_meter_t *wm = h2o_mem_alloc(sizeof(*wm));

    *wm = (gw_worker_meter_t){.metering = conf->metering,
                              .redis = conf->redis,
                              .prefix = conf->prefix,
                              .runs_flusher = conf->flusher_redis != NULL,
                              .loop = loop,
                              .meter = gw_meter_new(),
                              .activity = gw_activity_new(),
                              .flush_interval_ms = conf->flush_interval_ms};
    /* half the journal interval here and half in the journal's thread: a count is on disk within one */
    uint64_t half = conf->journal_interval_ms / 2 != 0 ? conf->journal_interval_ms / 2 : 1;
    uint64_t tick_ms = conf->journal_interval_ms != 0 && half < conf->flush_interval_ms ? half : conf->flush_interval_ms;
    wm->next_flush_at = h2o_now(loop) + conf->flush_interval_ms - conf->flush_interval_ms / 10;
    wm->tick_timeout = gw_loop_timeout_acquire(loop, tick_ms);
    wm->tick.cb = on_tick;
    gw_timer_link(loop, wm->tick_timeout, &wm->tick);
    if (wm->runs_flusher) /* the flusher copies the settings */
        gw_metering_start_flusher(conf->metering, loop, conf->flusher_redis);
    return wm;
}

void gw_worker_meter_set_route(gw_worker_meter_t *wm, const char *sandbox_id, h2o_iovec_t project, uint64_t egress_quota)
{
    gw_meter_set_route(wm->meter, sandbox_id, project, egress_quota != GW_EGRESS_QUOTA_NONE ? egress_quota : 0, h2o_now(wm->loop));
}

void gw_worker_meter_add(gw_worker_meter_t *wm, const char *sandbox_id, uint64_t egress, uint64_t ingress, int no_activity)
{
    gw_meter_add(wm->meter, sandbox_id, egress, ingress, h2o_now(wm->loop));
    if (!no_activity)
        gw_activity_touch(wm->activity, sandbox_id, wall_ms());
}

void gw_worker_meter_touch(gw_worker_meter_t *wm, const char *sandbox_id)
{
    gw_activity_touch(wm->activity, sandbox_id, wall_ms());
}

void gw_worker_meter_stop_tick(gw_worker_meter_t *wm)
{
    if (gw_timer_is_linked(&wm->tick))
        gw_timer_unlink(&wm->tick);
}

void gw_worker_meter_free(gw_worker_meter_t *wm)
{
    if (wm == NULL)
        return;
    gw_worker_meter_stop_tick(wm);
    gw_loop_timeout_release(wm->loop, wm->tick_timeout);
    gw_metering_submit(wm->metering, wm->meter, wall_ms());
    gw_metering_submit_activity(wm->metering, wm->activity); /* the last interval's ZADD, by the final flush */
    gw_meter_free(wm->meter);
    gw_activity_free(wm->activity);
    if (wm->runs_flusher)
        gw_metering_stop_flusher(wm->metering);
    free(wm);
}
