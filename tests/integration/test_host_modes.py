"""The sandbox's view of its address (CONTRACT.md, Forwarding), per port
(`host:<n>`), with a real Flask application (Debian's python3-flask) as the
sandbox: on a `localhost` port the app believes it is served at
http://localhost:<n> (Host, Origin, Referer), and what it builds from that
belief (absolute redirects, Content-Location, Refresh, CORS answers, cookies
for localhost) reaches the browser as the preview origin; a `preserve` port
beside it sees the preview host untouched. WebSocket upgrades alike
(ws_upstream.py, python3-websockets), HTTP/1.1 and HTTP/2 alike. In every
mode, a sandbox cannot set cookies for other sandboxes (a Domain covering the
preview domain) nor the gateway's own cookies."""

import json
import os
import subprocess

import pytest

import gwtest
from test_proxy import WsUpstream, run, ws_connect

H1_H2 = pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])


class FlaskApp:
    """flask_app.py (python3-flask) as a process on a free port."""

    def __init__(self, workdir):
        os.makedirs(workdir, exist_ok=True)
        self.log = os.path.join(workdir, "flask_app.log")
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([gwtest.PYTHON, os.path.join(gwtest.HERE, "flask_app.py"), "--port", "0",
                                      "--domain", gwtest.DOMAIN], stdout=subprocess.PIPE, stderr=logf,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening "):
            gwtest.stop_process(self.proc)
            raise RuntimeError("flask_app did not start: %r %s" % (line, gwtest.tail(self.log)))
        self.port = int(line.split()[1])

    def stop(self):
        gwtest.stop_process(self.proc)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def flask_app(workdir):
    a = FlaskApp(os.path.join(workdir, "flask-app"))
    yield a
    a.stop()


@pytest.fixture(scope="module")
def ws_up(workdir):
    u = WsUpstream(os.path.join(workdir, "ws-upstream-hostmodes"))
    yield u
    u.stop()


def seen(r):
    """What the app saw of the request (flask_app.py /echo or upstream.py /echo)."""
    assert r.status == 200, r
    j = r.json()
    return {k.lower(): v for k, v in j["headers"]}


def test_host_per_port(gateway, register_sandbox, curl, flask_app, upstream):
    """host:<n> localhost beside a port without the field (upstream.host_header,
    "preserve" here): each port sees its own mode, on one sandbox."""
    sid = gwtest.new_sandbox_id("hp")
    register_sandbox(sid, ports={flask_app.port: "public", upstream.port: "public"},
                     extra={"host:%d" % flask_app.port: "localhost"})
    app_host, other_host = gateway.host(flask_app.port, sid), gateway.host(upstream.port, sid)
    for http2 in (False, True):
        h = seen(curl(app_host, "/echo", http2=http2))
        assert h["host"] == "localhost:%d" % flask_app.port, h
        assert h["x-forwarded-host"] == "%s:%d" % (app_host, gateway.tls_port), h
        assert h["x-forwarded-proto"] == "https", h
        h = seen(curl(other_host, "/echo", http2=http2))
        assert h["host"] == "%s:%d" % (other_host, gateway.tls_port), h


def test_host_preserve_overrides_gateway_default(gw_factory, register_sandbox, curl, flask_app, upstream):
    """With upstream.host_header "localhost", host:<n> preserve keeps the
    preview host for that port; a value that is neither (here "Localhost") is
    the gateway's default, and the operator is told once."""
    g = gw_factory({"upstream": {"host_header": "localhost"}})
    sid = gwtest.new_sandbox_id("hq")
    register_sandbox(sid, ports={flask_app.port: "public", upstream.port: "public"},
                     extra={"host:%d" % upstream.port: "preserve", "host:%d" % flask_app.port: "Localhost"})
    app_host, other_host = g.host(flask_app.port, sid), g.host(upstream.port, sid)
    for http2 in (False, True):
        h = seen(curl(other_host, "/echo", http2=http2, gw=g))
        assert h["host"] == "%s:%d" % (other_host, g.tls_port), h
        h = seen(curl(app_host, "/echo", http2=http2, gw=g))
        assert h["host"] == "localhost:%d" % flask_app.port, h
    gwtest.wait_for(lambda: 'host:%d is "Localhost"' % flask_app.port in gwtest.tail(g.log, 1000), 5,
                    what="the log line about host:%d" % flask_app.port)
    lines = [ln for ln in gwtest.tail(g.log, 1000).splitlines() if "host:%d is" % flask_app.port in ln]
    assert 1 <= len(lines) <= g.config()["workers"], lines  # once per worker that read the record


def test_host_mode_change_follows_publish(gateway, register_sandbox, curl, flask_app):
    """host:<n> is part of the cached route: a change reaches the next request
    after the publish, not at the next TTL."""
    sid = gwtest.new_sandbox_id("hc")
    token = register_sandbox(sid, ports={flask_app.port: "public"}, extra={"host:%d" % flask_app.port: "localhost"})
    host = gateway.host(flask_app.port, sid)
    assert seen(curl(host, "/echo"))["host"] == "localhost:%d" % flask_app.port
    register_sandbox(sid, ports={flask_app.port: "public"}, token=token, extra={"host:%d" % flask_app.port: "preserve"})
    # the publish reaches each worker's subscription on its own: the first
    # requests may still come before it
    want = "%s:%d" % (host, gateway.tls_port)
    gwtest.wait_for(lambda: seen(curl(host, "/echo"))["host"] == want, 5, what="the new host mode")
