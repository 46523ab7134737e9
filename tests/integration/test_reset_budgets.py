"""Resets that reach the app (issue 36, findings 1 and 2): a request whose
client leaves, or makes the gateway reset its stream, keeps its client's and
its sandbox's slots until the app is done with it (upstream/orphan.c), and
the streams the gateway resets for a client's own protocol errors
(MadeYouReset) are budgeted per client address across its connections and
the workers, refilled by time, never by served requests (libh2o patch 0300,
limits.max_stream_errors_per_client).

The attacker is 127.0.0.1; the well-behaved client (test_h2_security's
WellBehavedClient) is another address, 127.0.0.2, fetching from the same
sandbox's app throughout: each test asserts the defence AND its count of
answers and its slowest (p99 printed). The app is upstream.py, which counts
the requests it is working on at once (peak_in_flight)."""

import json
import os
import struct
import time

import pytest

import gwtest
from test_h2_security import (CANCEL, ENHANCE_YOUR_CALM, GOAWAY, HEADERS, RST_STREAM, WINDOW_UPDATE, RawH2,
                              WellBehavedClient, frame, goaway_code, h2_event, metrics)

PROTOCOL_ERROR = 0x1
SLOW_MS = 1500  # how long the app works on each attacking request
ATTACK_S = 4.0
CLIENT_SLOTS = 20  # limits.max_connections_per_client in these tests
# The attacks' connections keep Nagle (RawH2's nodelay=False), as these tests were measured with: their batches'
# timing against the gateway's reads is what the races in reset_round's docstring are about. Without it (measured
# on an ASan build: the first round's 90 requests reached the app and were reset, the 2,250 after were all refused
# 429, none reset: http/phase_limits.c refuses the new requests of an address with less than half its budget left,
# so none is reset again) the budget test sees no GOAWAY; the refusals are that defence too.


@pytest.fixture(scope="module")
def app(workdir):
    """The attacked sandbox's app, of this module alone: its counts are the attack's and the bystander's."""
    u = gwtest.Upstream(os.path.join(workdir, "reset-budgets-app"))
    u.start()
    yield u
    u.stop()


def make_gw(gw_factory, register_sandbox, app, **limits):
    g = gw_factory({"limits": dict({"max_connections_per_client": CLIENT_SLOTS}, **limits)})
    g.sid = gwtest.new_sandbox_id("rst")
    register_sandbox(g.sid, ports={app.port: "public"})
    g.sbx_host = g.host(app.port, g.sid)
    return g


def reset_round(g, ca, path, n=90, wait=0.03, refused_first=False):
    """One attacking connection: n requests, then (once they are at the app) a WINDOW_UPDATE of 0 on each, which
    the gateway answers with RST_STREAM(PROTOCOL_ERROR); closed after. Returns the frames it got. refused_first:
    the WINDOW_UPDATEs wait for the first answer (a 429 of the slot limit) too, so that a loaded gateway, which
    reads both batches at once if the second follows within `wait`, still puts the requests through its limits
    first (CI saw a round of 90 reset before any reached the limits phase, no 429 in a whole attack)."""
    c = RawH2(g, g.sbx_host, g.ca, nodelay=False)
    try:
        hdrs = c.request_headers("GET", path)
        sids = [c.new_sid() for _ in range(n)]
        c.send(b"".join(c.headers_frame(s, hdrs) for s in sids))
        if refused_first:
            c.wait_for(lambda f: f.type == HEADERS, 10)
        time.sleep(wait)
        c.send(b"".join(frame(WINDOW_UPDATE, 0, s, struct.pack(">I", 0)) for s in sids))
        c.wait_for(lambda f: f.type == GOAWAY, 0.1)
        return c.frames
    finally:
        c.close()


def live_resets(frames):
    """Streams of one connection reset with PROTOCOL_ERROR before any answer: requests the gateway reset while they
    were open (a RST_STREAM after an answer is one of a closed stream, which spends nothing)."""
    answered = {f.sid for f in frames if f.type == HEADERS}
    return sum(1 for f in frames if f.type == RST_STREAM and f.sid not in answered and
               struct.unpack(">I", f.payload[:4])[0] == PROTOCOL_ERROR)


def attack(g, path, seconds=ATTACK_S, refused_first=False):
    """Reconnects every 90 provoked resets for `seconds`: the finding's attack. Returns (rounds, frames of all,
    resets of open streams)."""
    frames, rounds, live = [], 0, 0
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        got = reset_round(g, g.ca, path, refused_first=refused_first)
        frames += got
        live += live_resets(got)
        rounds += 1
    return rounds, frames, live


def statuses(frames):
    return [int(v) for f in frames if f.type == HEADERS for k, v in f.headers if k == ":status"]


def report(name, **figures):
    print("%s: %s" % (name, json.dumps(figures)))


def test_made_you_reset_across_reconnections_keeps_slots_until_the_app_is_done(gw_factory, register_sandbox, app, certs):
    """Finding 1, the slots: with the per-address budget off, an address that makes the gateway reset 90 streams per
    connection and reconnects keeps at most its limits.max_connections_per_client requests at the app: a reset stream
    keeps its slots until the app answers. Before, each reset gave the slots back at once while the app went on
    working: one address kept 2,299-3,202 requests in flight at the app."""
    g = make_gw(gw_factory, register_sandbox, app, max_stream_errors_per_client=0)
    g.ca = certs["ca"]
    app.get_json("/_reset")
    with WellBehavedClient(g, g.sbx_host, certs["ca"]) as good:
        ok_before = good.ok
        rounds, frames, _ = attack(g, "/slow-head/%d" % SLOW_MS, refused_first=True)
        served = good.ok - ok_before
    good.assert_served(during_attack=served)
    peak = app.stats()["peak_in_flight"]
    report("slots", rounds=rounds, peak_in_flight=peak, refused_429=statuses(frames).count(429), bystander_ok=good.ok,
           bystander_p99_ms=round(good.p99() * 1000, 1))
    # the attacker's slots, the bystander's one request, and what another worker may admit racing for the last slot
    assert peak <= CLIENT_SLOTS + 1 + 1, "%d requests at the app at once (%d rounds)" % (peak, rounds)
    assert statuses(frames).count(429) > 0, "no attacking request was refused"
    assert metrics(g)["lizard_orphaned_requests_total"] > 0
    # the orphans give their slots back once the app has answered them
    gwtest.wait_for(lambda: metrics(g)["lizard_orphaned_requests"] == 0, 30, what="the orphans to end")
    assert app.stats()["in_flight"] == 0


def test_made_you_reset_across_reconnections_is_budgeted_per_address(gw_factory, register_sandbox, app, certs):
    """Finding 1, the budget: the streams the gateway resets for one address's protocol errors are counted across
    its connections: past limits.max_stream_errors_per_client (100, then 10 a second) its connection gets
    GOAWAY(ENHANCE_YOUR_CALM) and its new requests 429 too_many_connections until the budget earns one back. Before,
    each connection stayed under its own budget of 100: no GOAWAY, no 429, ever."""
    g = make_gw(gw_factory, register_sandbox, app, max_connections_per_client=256)
    g.ca = certs["ca"]
    app.get_json("/_reset")
    with WellBehavedClient(g, g.sbx_host, certs["ca"]) as good:
        ok_before = good.ok
        t0 = time.monotonic()
        rounds, frames, resets = attack(g, "/slow-head/%d" % SLOW_MS)
        elapsed = time.monotonic() - t0
        served = good.ok - ok_before
        at_app = app.stats()["endpoints"].get("slow-head", 0)  # the attacker's (the bystander fetches /bytes/100)
    good.assert_served(during_attack=served)
    goaways = [f for f in frames if f.type == GOAWAY]
    refused = statuses(frames).count(429)
    report("budget", rounds=rounds, elapsed_s=round(elapsed, 2), provoked_resets=resets, attacker_requests_at_app=at_app,
           goaways=len(goaways), refused_429=refused, bystander_ok=good.ok, bystander_p99_ms=round(good.p99() * 1000, 1))
    assert goaways and all(goaway_code(f) == ENHANCE_YOUR_CALM for f in goaways), goaways[:3]
    assert any(b"too many stream errors from this client" in f.payload for f in goaways)
    assert h2_event(g, "client_stream_errors_exceeded") >= 1
    # the attack's own 429s depend on whether its requests reach the limits phase before their WINDOW_UPDATEs do (a
    # loaded gateway reads both at once, and only GOAWAYs show: CI once saw 74 of 75 rounds so); a well-formed request
    # from the address right after is refused whatever the timing, as the budget needs 5 s to earn half back
    if refused == 0:
        c = RawH2(g, g.sbx_host, g.ca, nodelay=False)
        try:
            status, _, body = c.get("/bytes/100", timeout=30)
        finally:
            c.close()
        assert status == 429 and b"too_many_connections" in body, (status, body[:200])
    # the budget and what it earned meanwhile, and the one reset per connection whose refused token closed it
    assert resets <= 100 + 10 * elapsed + len(goaways) + 4, "%d provoked resets in %.1f s (%d rounds)" % (resets, elapsed,
                                                                                                          rounds)
    # new requests wait for half the budget (5 s): a round of 90 gets through at first and then once per 5 s at most
    assert at_app <= 90 * (2 + elapsed / 5), "%d attacking requests reached the app in %.1f s" % (at_app, elapsed)


def test_served_requests_do_not_refill_the_address_budget(gw_factory, register_sandbox, app, certs):
    """Finding 2: one provoked reset paired with one cheap served GET, on one connection, kept 0100's per-connection
    budget full (810 resets in 5 s, no GOAWAY, 339 requests in flight at the app). The address's budget earns back
    only with time: once half of it is spent (about 50 pairs) the address's requests are refused with 429, provoked
    ones included, so nothing more of it reaches the app."""
    g = make_gw(gw_factory, register_sandbox, app, max_connections_per_client=256)
    c = RawH2(g, g.sbx_host, certs["ca"], nodelay=False)
    pairs, status, body = 0, 200, b""
    t0 = time.monotonic()
    try:
        hdrs = c.request_headers("GET", "/slow-head/100")
        while pairs < 500 and status == 200:
            sid = c.new_sid()
            c.send(c.headers_frame(sid, hdrs) + frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", 0)))
            pairs += 1
            status, _, body = c.get("/bytes/10")
        elapsed = time.monotonic() - t0
        report("refill", pairs=pairs, elapsed_s=round(elapsed, 2))
        assert status == 429, "no refusal after %d provoked resets, each paired with a served request" % pairs
        err = json.loads(body)["error"]
        assert err["code"] == "too_many_connections" and "broke the protocol" in err["message"], err
        assert pairs <= 50 + 10 * elapsed + 4, "%d pairs in %.1f s" % (pairs, elapsed)
        # from now on nothing of this address reaches the app: neither the provoked requests nor the others
        before = app.stats()["requests"]
        for _ in range(20):
            sid = c.new_sid()
            c.send(c.headers_frame(sid, hdrs) + frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", 0)))
            assert c.get("/bytes/10")[0] == 429
        assert app.stats()["requests"] - before == 1  # the first /_stats
    finally:
        c.close()


def test_a_reset_request_keeps_its_slots_until_the_app_answers(gw_factory, register_sandbox, app, certs):
    """A client that cancels requests the app is working on (RST_STREAM(CANCEL)) cannot start new ones in their
    place until the app has answered them: the sixth request of an address with 5 slots is refused while the five
    cancelled ones are still at the app, and served once the app answered them."""
    g = make_gw(gw_factory, register_sandbox, app, max_connections_per_client=5, max_stream_errors_per_client=0)
    app.get_json("/_reset")
    c = RawH2(g, g.sbx_host, certs["ca"], nodelay=False)
    try:
        hdrs = c.request_headers("GET", "/slow-head/3000")
        sids = [c.new_sid() for _ in range(5)]
        c.send(b"".join(c.headers_frame(s, hdrs) for s in sids))
        gwtest.wait_for(lambda: app.stats()["in_flight"] == 5, 15, what="the five requests at the app")
        c.send(b"".join(frame(RST_STREAM, 0, s, struct.pack(">I", CANCEL)) for s in sids))
        gwtest.wait_for(lambda: metrics(g)["lizard_orphaned_requests"] == 5, 15, what="five orphans")
        status, headers, body = c.get("/bytes/10")
        assert status == 429, (status, body[:200])
        assert json.loads(body)["error"]["code"] == "too_many_connections"
        # the app answers them (3 s): their slots come back
        gwtest.wait_for(lambda: metrics(g)["lizard_orphaned_requests"] == 0, 30, what="the orphans to end")
        status, _, body = c.get("/bytes/10")
        assert status == 200 and len(body) == 10, status
    finally:
        c.close()
    assert metrics(g)["lizard_orphaned_requests_total"] == 5
