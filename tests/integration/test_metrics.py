"""/metrics says what the gateway did: an operator's dashboard must move when
traffic does."""

import json
import re

import gwtest


def metrics(gw):
    status, body = gw.admin_get("/metrics")
    assert status == 200
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def settled(g, before, want):
    """The deltas since `before` once the counters in `want` show it: a
    response is counted when its request is disposed, which can come just
    after the client has the answer. Returns (after, deltas); a counter that
    overshoots fails the caller's asserts, one that never gets there fails here."""
    box = {}

    def check():
        box["after"] = after = metrics(g)
        box["d"] = {k: after[k] - before.get(k, 0) for k in after}
        return all(box["d"].get(k) == v for k, v in want.items()) and after["lizard_in_flight_requests"] == 0

    try:
        gwtest.wait_for(check, 10, what="the counters to show the requests")
    except Exception:  # noqa: BLE001 - the asserts below say which one is off
        pass
    return box["after"], box["d"]


def test_metrics_follow_traffic(gw_factory, curl, register_sandbox, upstream):
    g = gw_factory({}, name="gw-metrics")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    before = metrics(g)

    for _ in range(10):
        r = curl(host, "/bytes/10000", gw=g, headers={"X-Lizard-Access-Token": token})
        assert r.status == 200 and len(r.body) == 10000
    assert curl(host, "/echo", gw=g).status == 401

    after, d = settled(g, before, {"lizard_requests_total": 11, 'lizard_responses_total{class="2xx"}': 10,
                                   'lizard_errors_total{code="missing_token"}': 1})
    assert d["lizard_requests_total"] == 11
    assert d['lizard_responses_total{class="2xx"}'] == 10
    assert d['lizard_errors_total{code="missing_token"}'] == 1
    # keep-alive: 10 requests over curl's separate connections reuse pooled upstream connections
    assert d["lizard_upstream_connects_total"] >= 1
    assert d["lizard_upstream_reuses_total"] >= 5, d
    assert d['lizard_proxied_bytes_total{direction="egress"}'] >= 10 * 10000
    assert d['lizard_proxied_bytes_total{direction="egress"}'] < 10 * 10000 + 10 * 1024
    assert after["lizard_in_flight_requests"] == 0
    assert after["lizard_workers"] == g.config()["workers"]
    assert all(re.match(r"^lizard_[a-z0-9_]+(\{[a-z_]+=\"[^\"]*\"\})?$", k) for k in after), "malformed metric names"


def test_access_log_line_per_request(gw_factory, curl, register_sandbox, upstream):
    g = gw_factory({}, name="gw-log")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    assert curl(host, "/echo?a=1&lizard_token=%s&b=2" % token, gw=g, method="POST", data=b"x").status == 200
    assert curl(host, "/denied", gw=g).status == 401
    assert curl("nowhere.example", "/", gw=g, extra_args=("--insecure",)).status == 404

    gwtest.wait_for(lambda: sum(1 for _ in open(g.config()["log"]["access"])) >= 3, 5, what="three log lines")
    with open(g.config()["log"]["access"]) as f:
        text = f.read()
    lines = [json.loads(ln) for ln in text.splitlines()][-3:]
    # by what they are, not by position: two workers' lines may reach the file in either order
    (ok,) = [ln for ln in lines if ln["status"] == 200]
    (denied,) = [ln for ln in lines if ln["status"] == 401]
    (unknown,) = [ln for ln in lines if ln["status"] == 404]
    assert ok["method"] == "POST" and ok["status"] == 200 and ok["sandbox"] == sid and ok["port"] == upstream.port
    assert ok["path"] == "/echo?a=1&b=2", ok  # the token is never logged
    assert "error" not in ok
    assert denied["status"] == 401 and denied["error"] == "missing_token" and denied["sandbox"] == sid
    assert unknown["status"] == 404 and unknown["error"] == "unknown_host" and "sandbox" not in unknown
    assert token not in text


def test_metrics_over_16_kib_is_whole(gw_factory):
    """/metrics once cut its exposition at 16 KiB: with enough series (here
    two per worker, 128 workers) every line must still be a comment or a
    sample, up to the last series of the last worker."""
    workers = 128
    g = gw_factory({"workers": workers}, name="gw-metrics-big")
    gwtest.wait_for(g.redis_connected, 30, what="every worker connected to Redis")
    status, body = g.admin_get("/metrics")
    assert status == 200
    assert len(body) > 16384, len(body)
    text = body.decode()
    assert text.endswith("\n")
    sample = re.compile(r'^[a-z_][a-z0-9_]*(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [0-9]+$')
    for line in text.splitlines():
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or sample.match(line), line
    assert text.splitlines()[-1] == 'lizard_worker_redis_connected{worker="%d"} 1' % (workers - 1)
    assert metrics(g)["lizard_workers"] == workers


def test_metrics_count_without_an_access_log(gw_factory, curl, register_sandbox, upstream):
    """The access log is only installed when log.access is set; /metrics
    counts responses and error codes either way."""
    g = gw_factory({"log": None}, name="gw-metrics-nolog")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    before = metrics(g)
    assert curl(host, "/echo", gw=g, headers={"X-Lizard-Access-Token": token}).status == 200
    assert curl(host, "/echo", gw=g).status == 401
    assert curl("nowhere.example", "/", gw=g, extra_args=("--insecure",)).status == 404
    after, d = settled(g, before, {"lizard_requests_total": 3, 'lizard_responses_total{class="2xx"}': 1,
                                   'lizard_responses_total{class="4xx"}': 2,
                                   'lizard_errors_total{code="missing_token"}': 1,
                                   'lizard_errors_total{code="unknown_host"}': 1})
    assert d["lizard_requests_total"] == 3
    assert d['lizard_responses_total{class="2xx"}'] == 1
    assert d['lizard_responses_total{class="4xx"}'] == 2
    assert d['lizard_errors_total{code="missing_token"}'] == 1
    assert d['lizard_errors_total{code="unknown_host"}'] == 1
    assert after["lizard_access_log_lines_total"] == 0
