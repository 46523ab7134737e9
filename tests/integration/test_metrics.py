"""/metrics says what the gateway did: an operator's dashboard must move when
traffic does."""

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

    after = metrics(g)
    d = {k: after[k] - before.get(k, 0) for k in after}
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
    assert all(re.match(r"^lizard_[a-z_]+(\{[a-z_]+=\"[^\"]*\"\})?$", k) for k in after), "malformed metric names"
