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
import secrets
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


def two_ports(gateway, register_sandbox, flask_app, upstream, prefix):
    """A sandbox with flask_app on a localhost port and upstream.py on a preserve
    port: (app host, preserve host)."""
    sid = gwtest.new_sandbox_id(prefix)
    register_sandbox(sid, ports={flask_app.port: "public", upstream.port: "public"},
                     extra={"host:%d" % flask_app.port: "localhost", "host:%d" % upstream.port: "preserve"})
    return gateway.host(flask_app.port, sid), gateway.host(upstream.port, sid)


@H1_H2
def test_localhost_origin_and_referer(gateway, register_sandbox, curl, flask_app, upstream, http2):
    """On a localhost port the app sees Origin and Referer on its own origin
    http://localhost:<n> when the browser sent them on the preview origin;
    other origins pass unchanged, and so does everything on a preserve port.
    X-Forwarded-Host and -Proto still say where the browser is."""
    app_host, other_host = two_ports(gateway, register_sandbox, flask_app, upstream, "ho")
    preview = "https://%s:%d" % (app_host, gateway.tls_port)
    r = curl(app_host, "/echo", http2=http2, headers={"Origin": preview, "Referer": preview + "/page?q=1#top"})
    h = seen(r)
    assert h["host"] == "localhost:%d" % flask_app.port, h
    assert h["origin"] == "http://localhost:%d" % flask_app.port, h
    assert h["referer"] == "http://localhost:%d/page?q=1#top" % flask_app.port, h
    assert h["x-forwarded-host"] == "%s:%d" % (app_host, gateway.tls_port), h
    assert h["x-forwarded-proto"] == "https", h

    # another origin (a page of another sandbox, another site) is not the app's own
    for origin in ("https://evil.example", "https://%s:%d" % (other_host, gateway.tls_port), "null"):
        h = seen(curl(app_host, "/echo", http2=http2, headers={"Origin": origin, "Referer": origin + "/x"}))
        assert h["origin"] == origin and h["referer"] == origin + "/x", h

    other = "https://%s:%d" % (other_host, gateway.tls_port)
    h = seen(curl(other_host, "/echo", http2=http2, headers={"Origin": other, "Referer": other + "/p"}))
    assert h["host"] == "%s:%d" % (other_host, gateway.tls_port), h
    assert h["origin"] == other and h["referer"] == other + "/p", h


@H1_H2
def test_localhost_absolute_urls_come_back_as_the_preview(gateway, register_sandbox, curl, flask_app, upstream, http2):
    """Flask's redirect(url_for(..., _external=True)) builds
    http://localhost:<n>/... from Host: the client gets the preview URL, and
    following it lands on the app. Content-Location and Refresh alike."""
    app_host, _ = two_ports(gateway, register_sandbox, flask_app, upstream, "hr")
    preview = "https://%s:%d" % (app_host, gateway.tls_port)
    r = curl(app_host, "/go", http2=http2)
    assert r.status == 302, r
    assert r.headers["location"] == preview + "/landing?x=1", r.headers
    assert r.headers["location"].startswith("https://%s:%d/" % (app_host, gateway.tls_port))
    path = r.headers["location"][len(preview):]
    r = curl(app_host, path, http2=http2)
    assert r.status == 200 and r.body == b"landed", r

    r = curl(app_host, "/moved", http2=http2)
    assert r.status == 201, r
    assert r.headers["content-location"] == preview + "/landing", r.headers
    assert r.headers["refresh"] == "0; url=" + preview + "/landing", r.headers


@H1_H2
def test_localhost_cors_allows_the_preview_origin(gateway, register_sandbox, curl, flask_app, upstream, http2):
    """An app that allows its own origin (Origin == http://<Host>) answers
    Access-Control-Allow-Origin: http://localhost:<n>; the browser gets the
    preview origin, the one it sent, so the response is readable."""
    app_host, _ = two_ports(gateway, register_sandbox, flask_app, upstream, "hk")
    preview = "https://%s:%d" % (app_host, gateway.tls_port)
    r = curl(app_host, "/cors", http2=http2, headers={"Origin": preview})
    assert r.status == 200, r
    assert r.headers.get("access-control-allow-origin") == preview, r.headers
    r = curl(app_host, "/cors", http2=http2, headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers, r.headers


def cookies_of(r):
    """Set-Cookie headers by cookie name: {name: [attribute, ...]} (lowercase attribute names)."""
    out = {}
    for v in r.get_all("set-cookie"):
        parts = [p.strip() for p in v.split(";")]
        name = parts[0].split("=", 1)[0]
        assert name not in out, r.header_list
        out[name] = [p.split("=", 1)[0].lower() + ("=" + p.split("=", 1)[1] if "=" in p else "") for p in parts[1:]]
    return out


@pytest.mark.parametrize("mode", ["localhost", "preserve"])
@H1_H2
def test_sandbox_cookies(gateway, register_sandbox, curl, flask_app, http2, mode):
    """A sandbox's Set-Cookie with a Domain covering the preview domain (the
    domain itself, .domain, a parent) becomes host-only: it cannot reach other
    sandboxes' hosts. The gateway's own cookie names never reach the client
    from a sandbox. Both in every mode; in localhost mode Domain=localhost and
    Domain=127.0.0.1 become host-only too (the browser would refuse them)."""
    sid = gwtest.new_sandbox_id("hk")
    register_sandbox(sid, ports={flask_app.port: "public"}, extra={"host:%d" % flask_app.port: mode})
    r = curl(gateway.host(flask_app.port, sid), "/cookies", http2=http2)
    assert r.status == 200, r
    c = cookies_of(r)
    assert "__Host-lizard_access" not in c and "__Host-lizard_consent" not in c, r.header_list
    assert not [v for v in r.get_all("set-cookie") if "lizard_" in v], r.header_list
    for name in ("preview", "dotted", "parent"):
        assert name in c, r.header_list
        assert not [a for a in c[name] if a.startswith("domain")], (name, c[name])
    assert "path=/" in c["dotted"] and "httponly" in c["dotted"], c["dotted"]
    assert "path=/" in c["plain"] and not [a for a in c["plain"] if a.startswith("domain")], c["plain"]
    for name in ("loc", "ip"):
        domains = [a for a in c[name] if a.startswith("domain")]
        assert domains == ([] if mode == "localhost" else [{"loc": "domain=localhost", "ip": "domain=127.0.0.1"}[name]]), c


def test_websocket_upgrade_sees_localhost(gateway, register_sandbox, ws_up, certs):
    """A WebSocket upgrade to a localhost port carries Host and Origin as a
    plain request does (an app checking Origin against Host accepts it); on a
    preserve port both stay the browser's."""
    sid = gwtest.new_sandbox_id("hw")
    register_sandbox(sid, ports={ws_up.port: "public"}, extra={"host:%d" % ws_up.port: "localhost"})
    host = gateway.host(ws_up.port, sid)
    preview = "https://%s:%d" % (host, gateway.tls_port)

    def upgrade(cid, origin):
        async def go():
            async with ws_connect(gateway, host, "/echo?id=" + cid, certs["ca"], origin=origin) as ws:
                await ws.send("hi")
                return await ws.recv()

        assert run(go()) == "hi"
        return {k.lower(): v for k, v in ws_up.wait_closed(cid)["headers"]}

    h = upgrade("hw-l-" + sid, preview)
    assert h["host"] == "localhost:%d" % ws_up.port, h
    assert h["origin"] == "http://localhost:%d" % ws_up.port, h
    assert h["x-forwarded-host"] == "%s:%d" % (host, gateway.tls_port), h
    h = upgrade("hw-e-" + sid, "https://evil.example")
    assert h["origin"] == "https://evil.example", h

    register_sandbox(sid, ports={ws_up.port: "public"}, extra={"host:%d" % ws_up.port: "preserve"})
    gwtest.wait_for(lambda: upgrade("hw-p%s-%s" % (secrets.token_hex(3), sid), preview)["origin"] == preview, 5,
                    what="the preserve mode")
    h = upgrade("hw-p-" + sid, preview)
    assert h["host"] == "%s:%d" % (host, gateway.tls_port) and h["origin"] == preview, h
