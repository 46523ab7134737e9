/*
 * The frame budget of a WebSocket tunnel's client (ws_budget.h), as h2o
 * patch 0160's budget of HTTP/2 frames that do no work: a starting
 * allowance, earned back with time and with useful bytes, so that a real
 * app streaming many small frames keeps a full budget while a flood of
 * empty frames runs it out within GW_WS_BUDGET_SECONDS of its rate.
 */
#include "upstream/ws_budget.h"

#define UNIT GW_WS_BUDGET_BYTES_PER_FRAME

static uint64_t cap(const gw_ws_budget_t *b)
{
    return b->conf->frames_per_second * GW_WS_BUDGET_SECONDS * UNIT;
}

void gw_ws_budget_init(gw_ws_budget_t *b, const gw_ws_budget_conf_t *conf, uint64_t now_ms)
{
    b->conf = conf;
    b->credit = cap(b);
    b->refilled_at = now_ms;
    b->message = 0;
}

/* Adds what the time since the last refill earned, up to the cap. */
static void refill(gw_ws_budget_t *b, uint64_t now_ms)
{
    uint64_t elapsed, full = cap(b);

    if (now_ms <= b->refilled_at)
        return;
    elapsed = now_ms - b->refilled_at;
    b->refilled_at = now_ms;
    /* past the saving period the budget is full anyway (and the product below stays far from overflowing) */
    if (elapsed >= GW_WS_BUDGET_SECONDS * 1000) {
        b->credit = full;
        return;
    }
    b->credit += elapsed * b->conf->frames_per_second * UNIT / 1000;
    if (b->credit > full)
        b->credit = full;
}

static uint16_t charge_frame(gw_ws_budget_t *b, const gw_ws_header_t *h, uint64_t now_ms)
{
    uint64_t full = cap(b);

    refill(b, now_ms);
    /* the payload's bytes earn before the frame is paid for: a frame of UNIT bytes or more costs nothing */
    b->credit += h->payload_len < full ? h->payload_len : full;
    if (b->credit < UNIT)
        return GW_WS_CLOSE_POLICY;
    b->credit -= UNIT;
    if (b->credit > full)
        b->credit = full;
    return 0;
}

static uint16_t charge_message(gw_ws_budget_t *b, const gw_ws_header_t *h)
{
    uint64_t max = b->conf->max_message_bytes;

    if (max == 0 || h->opcode >= GW_WS_OP_CLOSE)
        return 0;
    /* a continuation adds to the message in progress, any other data frame starts one */
    if (h->opcode != GW_WS_OP_CONTINUATION)
        b->message = 0;
    if (h->payload_len > max || b->message > max - h->payload_len)
        return GW_WS_CLOSE_TOO_BIG;
    b->message = h->fin ? 0 : b->message + h->payload_len;
    return 0;
}

uint16_t gw_ws_budget_charge(gw_ws_budget_t *b, const gw_ws_header_t *h, uint64_t now_ms)
{
    uint16_t code;

    if ((code = charge_message(b, h)) != 0)
        return code;
    if (b->conf->frames_per_second != 0 && (code = charge_frame(b, h, now_ms)) != 0)
        return code;
    return 0;
}
