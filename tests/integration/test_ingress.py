"""Who may reach a sandbox, and how much (docs/access-control.md): ingress_deny before
ingress_allow, IPv4 and IPv6, a malformed list refuses (and says so in the
operator log), and req_rate's token bucket across a gateway's 2 workers.
Clients are bound to 127.0.0.2, 127.0.0.3 and ::1 (curl --interface)."""

import threading
import time

import gwtest


def _get(curl_runner, g, host, src, port=None, path="/echo"):
    """A request from source address `src` to gateway g's listener (IPv6 when src is ::1)."""
    p = port or g.tls_port
    dst = "[::1]" if ":" in src else "127.0.0.1"
    return curl_runner.request("https://%s:%d%s" % (host, p, path), resolve=["%s:%d:%s" % (host, p, dst)],
                               extra_args=("--interface", src))


def _v6_gateway(gw_factory, name):
    g = gw_factory(start=False, name=name)
    g.v6_port = gwtest.free_port()
    cfg = g.base_config()
    g.overrides = {"listen": cfg["listen"] + [{"address": "[::1]:%d" % g.v6_port, "tls": True}]}
    g.start()
    return g


def test_deny_wins_allow_lists_and_ipv6(gw_factory, curl_runner, register_sandbox, upstream):
    g = _v6_gateway(gw_factory, "gw-ingress")
    sid, free = gwtest.new_sandbox_id(), gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"},
                     extra={"ingress_allow": "127.0.0.0/8, ::1/128", "ingress_deny": "127.0.0.3/32"})
    register_sandbox(free, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid).split(":")[0]
    assert _get(curl_runner, g, host, "127.0.0.2").status == 200
    r = _get(curl_runner, g, host, "127.0.0.3")  # in the allow list too: deny wins
    assert r.status == 403 and r.error_code() == "ip_not_allowed", r
    assert b"127.0.0" not in r.body and b"::1" not in r.body, "the message never echoes the lists"
    assert _get(curl_runner, g, host, "::1", port=g.v6_port).status == 200
    # an allow list without ::1 refuses it; one without 127.0.0.2 refuses that
    register_sandbox(sid, ports={upstream.port: "public"}, extra={"ingress_allow": "127.0.0.3/32,2001:db8::/32"})
    gwtest.wait_for(lambda: _get(curl_runner, g, host, "127.0.0.2").status == 403, 5, what="the new allow list")
    assert _get(curl_runner, g, host, "127.0.0.3").status == 200
    r = _get(curl_runner, g, host, "::1", port=g.v6_port)
    assert r.status == 403 and r.error_code() == "ip_not_allowed", r
    # an IPv6 deny
    register_sandbox(sid, ports={upstream.port: "public"}, extra={"ingress_deny": "::1/128"})
    gwtest.wait_for(lambda: _get(curl_runner, g, host, "::1", port=g.v6_port).status == 403, 5, what="the v6 deny")
    assert _get(curl_runner, g, host, "127.0.0.2").status == 200
    # a sandbox without rules is open to all
    fhost = g.host(upstream.port, free).split(":")[0]
    assert _get(curl_runner, g, fhost, "127.0.0.3").status == 200
    assert _get(curl_runner, g, fhost, "::1", port=g.v6_port).status == 200
    metrics = g.admin_get("/metrics")[1]
    metrics = metrics.decode() if isinstance(metrics, bytes) else metrics
    assert 'lizard_errors_total{code="ip_not_allowed"}' in metrics


def test_malformed_list_refuses_and_logs(gw_factory, curl_runner, register_sandbox, upstream):
    g = gw_factory({"routing": {"cache_ttl_ms": 600000}}, name="gw-ingress-bad")  # no expiry refetch mid-test
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"}, extra={"ingress_allow": "127.0.0.0/8,not-a-network"})
    host = g.host(upstream.port, sid).split(":")[0]
    for src in ("127.0.0.2", "127.0.0.3"):
        r = _get(curl_runner, g, host, src)
        assert r.status == 403 and r.error_code() == "ip_not_allowed", r

    def lines():
        with open(g.log) as f:
            return [ln for ln in f if sid in ln and "ingress_allow is malformed" in ln]

    assert "not-a-network" not in r.body.decode()
    for _ in range(8):
        assert _get(curl_runner, g, host, "127.0.0.2").status == 403
    # one line per route fetch (each of the 2 workers fetches once), not one per request (10)
    assert 1 <= len(lines()) <= 2, lines()


def test_req_rate_across_two_workers(gw_factory, curl_runner, register_sandbox, upstream):
    g = gw_factory({"workers": 2}, name="gw-rate")
    sid = gwtest.new_sandbox_id()
    rate = 2
    register_sandbox(sid, ports={upstream.port: "public"}, extra={"req_rate": str(rate)})
    host = g.host(upstream.port, sid).split(":")[0]
    results = []
    lock = threading.Lock()

    def client(src):
        for _ in range(15):
            r = _get(curl_runner, g, host, src)
            with lock:
                results.append(r)

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(s,)) for s in ("127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.3")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    elapsed = time.monotonic() - t0
    ok = [r for r in results if r.status == 200]
    limited = [r for r in results if r.status == 429]
    assert len(ok) + len(limited) == len(results), [r.status for r in results]
    assert all(r.error_code() == "rate_limited" and int(r.headers["retry-after"]) >= 1 for r in limited)
    # every connection is a new one, spread over both workers: one bucket lets
    # at least the burst through, and never more than the burst plus the rate
    # times the elapsed time measured here (which starts before the first
    # request, so it is an upper bound of the gateway's; +1 for rounding)
    assert len(ok) >= 2 * rate, len(ok)
    assert len(ok) <= 2 * rate + rate * elapsed + 1, (len(ok), elapsed)
    assert limited, "60 requests must exceed 2/s unless they took over 28 s"


def test_req_rate_counts_only_requests_let_through(gw_factory, register_sandbox, upstream, certs):
    """req_rate is what the gateway lets through to the sandbox: requests
    refused before it (no token: 401, a wrong one: 403) never spend the
    sandbox's tokens, so a scanner without the token cannot lock its owner
    out with 429s. Ten refused requests on one keep-alive connection (a few
    milliseconds, far inside one second), then the owner's burst of 2 is
    whole."""
    import http.client
    import json
    import socket
    import ssl

    g = gw_factory({}, name="gw-rate-auth")
    sid = gwtest.new_sandbox_id()
    token = register_sandbox(sid, ports={upstream.port: "private"}, extra={"req_rate": "1"})
    host = g.host(upstream.port, sid).split(":")[0]
    ctx = ssl.create_default_context(cafile=certs["ca"])
    conn = http.client.HTTPSConnection("127.0.0.1", g.tls_port, context=ctx, timeout=20)
    # the connection is made here, with the preview host as SNI; http.client then uses it as it is
    conn.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", g.tls_port), timeout=20), server_hostname=host)

    def get(headers):
        conn.request("GET", "/echo", headers=dict({"Host": host}, **headers))
        r = conn.getresponse()
        body = r.read()
        return r.status, (json.loads(body)["error"]["code"] if r.status >= 400 else None)

    refused = [get({}) for _ in range(5)] + [get({"X-Lizard-Access-Token": "wrong"}) for _ in range(5)]
    assert refused == [(401, "missing_token")] * 5 + [(403, "invalid_token")] * 5, refused
    # the burst (2 x req_rate) is still there for the owner, and then the limit holds
    owner = [get({"X-Lizard-Access-Token": token}) for _ in range(3)]
    assert owner[:2] == [(200, None)] * 2, owner
    assert owner[2] in ((429, "rate_limited"), (200, None)), owner
    conn.close()
