"""A real L4 balancer in front of the PROXY protocol listeners: Debian's
HAProxy in `mode tcp`, `send-proxy-v2` to the gateway's TLS listener (TLS
passes through HAProxy to the gateway) and `send-proxy` (v1) to its trusted
plain listener. The client connects to HAProxy from 127.0.0.7; HAProxy
connects to the gateway from 127.0.0.1. What a user of such a deployment
notices: the sandbox's X-Forwarded-For and the access log name the client
(127.0.0.7), not the balancer, over HTTP/1.1 and HTTP/2, and HAProxy's own
health checks (`check-send-proxy`) keep the server up without being proxied
to any sandbox."""

import os
import subprocess

import pytest

import gwtest

CLIENT = "127.0.0.7"  # the client's source address (all of 127.0.0.0/8 is loopback)


@pytest.fixture(scope="module")
def lbgw(workdir, certs, redis):
    g = gwtest.Gateway(os.path.join(workdir, "pp-haproxy"), certs, redis.port, name="gw-pph")
    g.pp_tls_port, g.pp_plain_port = gwtest.free_port(), gwtest.free_port()
    g.overrides = {"listen": g.base_config()["listen"] + [
        {"address": "127.0.0.1:%d" % g.pp_tls_port, "tls": True, "proxy_protocol": True},
        {"address": "127.0.0.1:%d" % g.pp_plain_port, "tls": False, "trusted": True, "proxy_protocol": True},
    ]}
    g.start()
    yield g
    rc = g.stop()
    reports = g.collect_sanitizer_reports()
    assert not reports, "sanitizer reports:\n" + "\n\n".join(reports)
    assert rc == 0, gwtest.tail(g.log)


@pytest.fixture(scope="module")
def haproxy(workdir, lbgw):
    exe = "/usr/sbin/haproxy"
    if not os.path.exists(exe):
        pytest.fail("haproxy is missing (tests/lib/deps.sh installs it)", pytrace=False)
    d = os.path.join(workdir, "haproxy")
    os.makedirs(d, exist_ok=True)
    tls_port, plain_port = gwtest.free_port(), gwtest.free_port()
    cfg = os.path.join(d, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write("""global
    maxconn 200
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend tls_in
    bind 127.0.0.1:%d
    default_backend gw_tls
backend gw_tls
    server gw 127.0.0.1:%d send-proxy-v2 check check-send-proxy inter 200ms
frontend plain_in
    bind 127.0.0.1:%d
    default_backend gw_plain
backend gw_plain
    server gw 127.0.0.1:%d send-proxy check check-send-proxy inter 200ms
""" % (tls_port, lbgw.pp_tls_port, plain_port, lbgw.pp_plain_port))
    log = open(os.path.join(d, "haproxy.log"), "w")
    proc = subprocess.Popen([exe, "-db", "-f", cfg], stdout=log, stderr=subprocess.STDOUT)
    try:
        gwtest.wait_for(lambda: proc.poll() is not None or (gwtest.port_open(tls_port) and gwtest.port_open(plain_port)),
                        30, interval=0.1, what="haproxy listening")
        assert proc.poll() is None, "haproxy exited: %s" % gwtest.tail(log.name)
        proc.tls_port, proc.plain_port, proc.log_path = tls_port, plain_port, log.name
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def sandbox(redis, upstream):
    sid = gwtest.new_sandbox_id("pph")
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    yield sid
    gwtest.unregister_sandbox(redis, sid)


def log_line(g, path):
    return gwtest.access_log_line(g, path)


def forwarded_for(r):
    assert r.status == 200, r
    return [v for k, v in r.json()["headers"] if k.lower() == "x-forwarded-for"]


@pytest.mark.parametrize("http2", [False, True])
def test_client_behind_haproxy_send_proxy_v2_over_tls(lbgw, haproxy, sandbox, upstream, curl, http2):
    host = lbgw.host(upstream.port, sandbox)
    path = "/echo/pph-tls-%d-%s" % (http2, gwtest.new_sandbox_id())
    r = curl(host, path, gw=lbgw, port=haproxy.tls_port, http2=http2, headers={"X-Forwarded-For": "192.0.2.66"},
             extra_args=("--interface", CLIENT))
    assert r.http_version == ("2" if http2 else "1.1"), r.http_version
    assert forwarded_for(r) == [CLIENT]
    assert log_line(lbgw, path)["client"] == CLIENT


def test_client_behind_haproxy_send_proxy_v1_on_the_trusted_plain_listener(lbgw, haproxy, sandbox, upstream, curl):
    host = lbgw.host(upstream.port, sandbox)
    path = "/echo/pph-plain-%s" % gwtest.new_sandbox_id()
    r = curl(host, path, gw=lbgw, port=haproxy.plain_port, plain=True, extra_args=("--interface", CLIENT))
    assert forwarded_for(r) == [CLIENT]
    assert log_line(lbgw, path)["client"] == CLIENT


def accepted(g):
    status, body = g.admin_get("/metrics")
    assert status == 200
    for ln in body.decode().splitlines():
        if ln.startswith('lizard_proxy_protocol_connections_total{result="accepted"} '):
            return int(ln.split()[1])
    raise AssertionError("no lizard_proxy_protocol_connections_total{result=\"accepted\"}")


def test_haproxy_health_checks_are_accepted_connections(lbgw, haproxy, sandbox, upstream, curl):
    """HAProxy's checks (`check-send-proxy`: a connection with its PROXY header,
    then closed) are PROXY connections the gateway accepts, not refusals: with
    no request sent, the accepted count grows by the check rounds (every 200 ms
    on two backends), no connection is counted invalid, timed out or closed
    early, HAProxy never marks the gateway down, and requests still pass."""
    first = accepted(lbgw)
    gwtest.wait_for(lambda: accepted(lbgw) >= first + 6, 30, what="HAProxy's health checks accepted")
    status, body = lbgw.admin_get("/metrics")
    assert status == 200
    for ln in body.decode().splitlines():
        if ln.startswith("lizard_proxy_protocol_connections_total{") and 'result="accepted"' not in ln:
            assert ln.endswith(" 0"), ln
    host = lbgw.host(upstream.port, sandbox)
    for port, plain in ((haproxy.tls_port, False), (haproxy.plain_port, True)):
        r = curl(host, "/echo/pph-after-checks", gw=lbgw, port=port, plain=plain, extra_args=("--interface", CLIENT))
        assert forwarded_for(r) == [CLIENT]
    with open(haproxy.log_path) as f:
        text = f.read()
    assert "is DOWN" not in text, text[-2000:]
