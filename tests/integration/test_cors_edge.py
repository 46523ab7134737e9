"""CORS at the edge (CONTRACT.md, "CORS at the edge"; issue 38): a port with
cors:<n> = edge gets its CORS from the gateway. Browser code on a listed
origin calls the sandbox with credentials and an Mcp-Session-Id request
header and reads the answer and its Mcp-Session-Id; another origin cannot;
the app's own Access-Control-* never appear beside the gateway's.

Headless Chromium (playwright-core, browser/cors.js) from pages served on
two origins (http://127.0.0.1:P listed, http://localhost:P not), curl for
the raw headers, a real gateway and redis-server, and an app that sets its
own (wrong) CORS headers, as Daytona users' apps do."""

import json
import os
import secrets
import shutil
import subprocess

import pytest

import browser_helpers as bh
import gwtest

HERE = os.path.dirname(os.path.abspath(__file__))
BROWSER_DIR = os.path.join(HERE, "browser")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


def app_handler(app, h):
    """The sandbox's API: its own CORS headers (a wildcard and another origin, both wrong with credentials), an
    exposed header of its own, and the MCP session header."""
    if h.command == "OPTIONS":
        return 204, [("Access-Control-Allow-Origin", "*"), ("Access-Control-Allow-Headers", "*")], b""
    return 200, [("Content-Type", "application/json"), ("Access-Control-Allow-Origin", "*"),
                 ("Access-Control-Allow-Origin", "https://someone-else.example"),
                 ("Access-Control-Expose-Headers", "X-App-Trace"), ("X-App-Trace", "t-42"),
                 ("Mcp-Session-Id", "session-from-the-app"), ("X-Not-Exposed", "1")], json.dumps({"path": h.path}).encode()


@pytest.fixture
def app():
    a = bh.RecordingApp(app_handler)
    a.start()
    yield a
    a.stop()


@pytest.fixture
def pages():
    """Pages of other origins: the same server is http://127.0.0.1:P and http://localhost:P."""
    a = bh.RecordingApp(lambda app, h: (200, [("Content-Type", "text/html")], b"<!doctype html><title>other origin</title>"))
    a.start()
    yield a
    a.stop()


def edge_sandbox(redis, app, origins, access="private"):
    sid = gwtest.new_sandbox_id("cors")
    token = gwtest.register_sandbox(redis, sid, ports={app.port: access},
                                    extra={"cors:%d" % app.port: "edge", "cors_origins:%d" % app.port: origins})
    return sid, token


def browser(cfg):
    if not os.access(CHROMIUM, os.X_OK):
        if IN_CI:
            pytest.fail("%s is missing - required in CI" % CHROMIUM, pytrace=False)
        pytest.skip("%s is missing" % CHROMIUM)
    if not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        pytest.fail("playwright-core is not installed: run npm ci --prefix tests/integration/browser", pytrace=False)
    cfg = dict(cfg, executablePath=CHROMIUM, resolverRules="MAP *.%s 127.0.0.1" % gwtest.DOMAIN)
    r = subprocess.run([shutil.which("node"), os.path.join(BROWSER_DIR, "cors.js"), json.dumps(cfg)], capture_output=True,
                       timeout=120, cwd=BROWSER_DIR)
    lines = [ln for ln in r.stdout.decode("utf-8", "replace").splitlines() if ln.startswith("{")]
    assert lines, "cors.js printed nothing: %s" % r.stderr.decode("utf-8", "replace")[-3000:]
    out = json.loads(lines[-1])
    assert not out.get("error"), out
    return out


def mcp_fetch(url, token):
    return {"url": url, "read": ["mcp-session-id", "x-app-trace", "x-not-exposed"],
            "init": {"method": "POST", "credentials": "include", "body": '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
                     "headers": {"Authorization": "Bearer " + token, "Mcp-Session-Id": "session-of-the-page",
                                 "Content-Type": "application/json"}}}


def test_browser_code_on_a_listed_origin_reads_the_answer(gateway, redis, app, pages):
    listed = "http://127.0.0.1:%d" % pages.port
    sid, token = edge_sandbox(redis, app, "https://app.example.com, " + listed)
    url = "https://%s:%d/api/call" % (gateway.host(app.port, sid), gateway.tls_port)
    out = browser({"pageUrl": listed + "/page.html", "fetches": [mcp_fetch(url, token)]})
    res = out["results"][0]
    assert res.get("status") == 200, out
    # the gateway's exposed header and the app's own: readable; others are not
    assert res["headers"] == {"mcp-session-id": "session-from-the-app", "x-app-trace": "t-42", "x-not-exposed": None}
    assert json.loads(res["body"]) == {"path": "/api/call"}
    seen = app.snapshot()
    # the preflight was the gateway's: only the POST reached the app, with the page's session header, without the token
    assert [r["method"] for r in seen] == ["POST"], seen
    headers = dict(seen[0]["headers"])
    assert headers["mcp-session-id"] == "session-of-the-page"
    assert "authorization" not in headers
    bh.assert_no_credentials(seen[0], token)


def test_browser_code_on_another_origin_is_refused(gateway, redis, app, pages):
    sid, token = edge_sandbox(redis, app, "http://127.0.0.1:%d" % pages.port)
    url = "https://%s:%d/api/call" % (gateway.host(app.port, sid), gateway.tls_port)
    out = browser({"pageUrl": "http://localhost:%d/page.html" % pages.port, "fetches": [mcp_fetch(url, token)]})
    assert "error" in out["results"][0], out  # a TypeError: the browser refused it, the page learns nothing
    assert app.snapshot() == []


@pytest.fixture
def raw(gateway, curl_runner):
    def go(host, path="/api", method=None, headers=None):
        u = "https://%s:%d%s" % (host, gateway.tls_port, path)
        return curl_runner.request(u, resolve=["%s:%d:127.0.0.1" % (host, gateway.tls_port)], method=method,
                                   headers=headers)
    return go


def cors_headers(r):
    return sorted((k, v) for k, v in r.header_list if k.startswith("access-control-") or k == "vary")


def test_raw_headers_replaced_never_doubled(gateway, redis, app, raw):
    origin = "https://app.example.com"
    sid, token = edge_sandbox(redis, app, origin)
    host = gateway.host(app.port, sid)
    r = raw(host, headers={"Origin": origin, "X-Lizard-Access-Token": token})
    assert r.status == 200
    assert cors_headers(r) == [("access-control-allow-credentials", "true"), ("access-control-allow-origin", origin),
                               ("access-control-expose-headers", "Mcp-Session-Id, WWW-Authenticate, Retry-After, X-App-Trace"),
                               ("vary", "Origin")], r.raw_head
    # an origin not listed: none of them, the app's included
    r = raw(host, headers={"Origin": "https://evil.example", "X-Lizard-Access-Token": token})
    assert r.status == 200 and cors_headers(r) == [("vary", "Origin")], r.raw_head
    # the preflight is answered here: 204, the requested method and headers, never the app
    r = raw(host, method="OPTIONS", headers={"Origin": origin, "Access-Control-Request-Method": "DELETE",
                                             "Access-Control-Request-Headers": "authorization,mcp-session-id"})
    assert r.status == 204
    assert cors_headers(r) == [("access-control-allow-credentials", "true"),
                               ("access-control-allow-headers", "authorization,mcp-session-id"),
                               ("access-control-allow-methods", "DELETE"), ("access-control-allow-origin", origin),
                               ("access-control-max-age", "600"), ("vary", "Origin")], r.raw_head
    r = raw(host, method="OPTIONS", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
    assert r.status == 403 and r.error_code() == "origin_not_allowed"
    assert cors_headers(r) == [("vary", "Origin")], r.raw_head
    # the gateway's own 401 to an allowed origin can be read, its challenge too
    r = raw(host, headers={"Origin": origin})
    assert r.status == 401 and r.error_code() == "missing_token"
    assert ("access-control-allow-origin", origin) in cors_headers(r)
    assert ("access-control-allow-credentials", "true") in cors_headers(r)
    assert [v for k, v in r.header_list if k == "access-control-allow-origin"] == [origin]
    assert all(req["method"] != "OPTIONS" for req in app.snapshot()), app.snapshot()


def test_star_null_and_garbage_origins(gateway, redis, app, raw):
    # "*": any origin, echoed, never with credentials
    sid, token = edge_sandbox(redis, app, "*", access="public")
    host = gateway.host(app.port, sid)
    r = raw(host, headers={"Origin": "https://anyone.example"})
    assert ("access-control-allow-origin", "https://anyone.example") in cors_headers(r)
    assert not any(k == "access-control-allow-credentials" for k, _ in cors_headers(r))
    # Origin: null is never allowed, not even by "*"
    r = raw(host, headers={"Origin": "null"})
    assert r.status == 200 and cors_headers(r) == [("vary", "Origin")]
    r = raw(host, method="OPTIONS", headers={"Origin": "null", "Access-Control-Request-Method": "GET"})
    assert r.status == 403 and r.error_code() == "origin_not_allowed"
    # garbage entries are ignored one by one; the valid ones hold; the operator is told once per (sandbox, lifecycle)
    marker = secrets.token_hex(4)
    sid, token = edge_sandbox(redis, app, "garbage-%s, null, https://ok.example, ftp:/x,,https://a.example/path" % marker)
    host = gateway.host(app.port, sid)
    for _ in range(6):
        r = raw(host, headers={"Origin": "https://ok.example", "X-Lizard-Access-Token": token})
        assert r.status == 200 and ("access-control-allow-origin", "https://ok.example") in cors_headers(r)
        r = raw(host, headers={"Origin": "https://a.example", "X-Lizard-Access-Token": token})
        assert r.status == 200 and cors_headers(r) == [("vary", "Origin")]
    with open(gateway.log, "rb") as f:
        lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if "garbage-" + marker in ln]
    # each worker that fetched the record says it once
    assert 1 <= len(lines) <= int(gateway.config()["workers"]), lines
    assert "cors_origins:%d" % app.port in lines[0] and "ignored" in lines[0]


def test_ports_without_cors_edge_are_as_before(gateway, redis, app, raw):
    """cors:<n> absent (or app): the preflight goes to the app, whose headers pass as they are."""
    sid = gwtest.new_sandbox_id("cors")
    token = gwtest.register_sandbox(redis, sid, ports={app.port: "private"}, extra={"cors:%d" % app.port: "app"})
    host = gateway.host(app.port, sid)
    r = raw(host, method="OPTIONS", headers={"Origin": "https://x.example", "Access-Control-Request-Method": "POST"})
    assert r.status == 204 and app.snapshot()[-1]["method"] == "OPTIONS"
    r = raw(host, headers={"Origin": "https://x.example", "X-Lizard-Access-Token": token})
    assert [v for k, v in r.header_list if k == "access-control-allow-origin"] == ["*", "https://someone-else.example"]


def test_websocket_and_http2_through_an_edge_port(gateway, redis, upstream, curl, certs):
    """An edge port still tunnels WebSocket (the upgrade's head goes through the same prefilter) and serves HTTP/2
    with the same headers."""
    import asyncio

    from test_browser_revocation import echo, ws_connect

    origin = "https://app.example.com"
    sid = gwtest.new_sandbox_id("cors")
    token = gwtest.register_sandbox(redis, sid, ports={upstream.port: "private"},
                                    extra={"cors:%d" % upstream.port: "edge", "cors_origins:%d" % upstream.port: origin})
    host = gateway.host(upstream.port, sid)

    async def go():
        async with ws_connect(gateway, host, "/ws", certs["ca"], headers={"Origin": origin, "X-Lizard-Access-Token": token}) as ws:
            await echo(ws, "through an edge port")

    asyncio.run(go())
    r = curl(host, "/echo", http2=True, headers={"Origin": origin, "X-Lizard-Access-Token": token})
    assert r.status == 200 and r.http_version == "2"
    assert [v for k, v in r.header_list if k == "access-control-allow-origin"] == [origin]
    r = curl(host, "/echo", http2=True, method="OPTIONS",
             headers={"Origin": origin, "Access-Control-Request-Method": "PUT"})
    assert r.status == 204 and r.headers["access-control-allow-methods"] == "PUT"
