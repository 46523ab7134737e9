"""Browser access end to end in a real browser: Debian's headless Chromium,
driven by playwright-core (browser/e2e.js), opens a preview URL with
?lizard_token=, lands on the app with the token gone from the address bar,
follows a link, makes a fetch() and opens a WebSocket to the same preview
host (wss, exchanging a message) with only the gateway's cookie; with
auth.cookie_same_site "none" the same works inside an iframe on a page of
another origin. Issue 15: from a page of another origin, a fetch() and an
EventSource with ?lizard_token= work (accepted in place, no redirect); an open
WebSocket is closed by each kind of revocation publish while another
sandbox's stays open; the default (lax) iframe explains that embedding needs
auth.cookie_same_site "none".

Needs /usr/bin/chromium (Debian package chromium; CHROMIUM overrides the
path), node, and `npm ci --prefix tests/integration/browser`. Outside CI a
missing Chromium skips these tests; in CI (CI=true) it is a failure."""

import base64
import hashlib
import json
import os
import select
import shutil
import struct
import subprocess
import time

import pytest

import browser_helpers as bh
import gwtest

HERE = os.path.dirname(os.path.abspath(__file__))
BROWSER_DIR = os.path.join(HERE, "browser")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


@pytest.fixture(scope="module")
def browser_env():
    if not os.access(CHROMIUM, os.X_OK):
        msg = "%s is missing (apt-get install chromium)" % CHROMIUM
        if IN_CI:
            pytest.fail(msg + " - required in CI", pytrace=False)
        pytest.skip(msg)
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing (apt-get install nodejs npm)", pytrace=False)
    if not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        pytest.fail("playwright-core is not installed: run npm ci --prefix tests/integration/browser", pytrace=False)
    return {"node": node, "chromium": CHROMIUM}


# --- the sandbox's app ---------------------------------------------------------

HOME = (b"<!doctype html><html><head><meta charset=utf-8><title>app home</title></head><body>"
        b"<h1 id=title>home</h1><p>Hello from the sandbox.</p>"
        b"<a id=next href=\"/page2?from=home&amp;n=1\">next page</a></body></html>")
PAGE2 = (b"<!doctype html><html><head><meta charset=utf-8><title>page two</title></head><body>"
         b"<h1 id=title>page two</h1></body></html>")


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _ws_echo(app, h):
    """The app's WebSocket endpoint: the handshake, then every text message is
    echoed back prefixed with "echo: ", until the browser closes."""
    key = h.headers.get("Sec-WebSocket-Key")
    if (h.headers.get("Upgrade") or "").lower() != "websocket" or not key:
        return 400, [("Content-Type", "text/plain")], b"not a websocket upgrade"
    accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
    h.send_response(101)
    h.send_header("Upgrade", "websocket")
    h.send_header("Connection", "Upgrade")
    h.send_header("Sec-WebSocket-Accept", accept)
    h.end_headers()
    h.wfile.flush()
    h.close_connection = True
    try:
        while True:
            hdr = h.rfile.read(2)
            if len(hdr) < 2:
                return None
            opcode, n = hdr[0] & 0x0F, hdr[1] & 0x7F
            if n == 126:
                n = struct.unpack("!H", h.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", h.rfile.read(8))[0]
            mask = h.rfile.read(4) if hdr[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(h.rfile.read(n)))
            if opcode == 0x8:  # close: answer it
                h.wfile.write(bytes([0x88, len(data[:2])]) + data[:2])
                h.wfile.flush()
                return None
            if opcode == 0x1:
                with app.lock:
                    app.ws_messages.append(data.decode("utf-8", "replace"))
                out = b"echo: " + data
                frame = bytes([0x81, len(out)]) if len(out) < 126 else bytes([0x81, 126]) + struct.pack("!H", len(out))
                h.wfile.write(frame + out)
                h.wfile.flush()
    except OSError:
        return None


def _app_handler(app, h):
    path = h.path.split("?", 1)[0]
    if h.command == "GET" and path == "/ws":
        return _ws_echo(app, h)
    if h.command == "GET" and path == "/":
        return 200, [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"),
                     ("Set-Cookie", "app_pref=blue; Path=/; SameSite=Lax")], HOME
    if h.command == "GET" and path == "/page2":
        return 200, [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")], PAGE2
    if path == "/api/data":
        got = app.requests[-1]["body"].decode("utf-8", "replace")
        # readable from other origins (the cross-origin fetch of the "query" scenario)
        return 200, [("Content-Type", "application/json"), ("Access-Control-Allow-Origin", "*")], json.dumps(
            {"ok": True, "method": h.command, "got": got}).encode()
    if path == "/events":
        return 200, [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
                     ("Access-Control-Allow-Origin", "*")], b"retry: 60000\ndata: hello from events\n\n"
    return 404, [("Content-Type", "text/plain")], b"not here"


@pytest.fixture
def app():
    a = bh.RecordingApp(_app_handler)
    a.ws_messages = []
    a.start()
    yield a
    a.stop()


@pytest.fixture
def parent_site():
    """A page of another origin (http://127.0.0.1:PORT) that embeds
    parent.iframe_src in an iframe."""

    def handler(app, h):
        if h.path.startswith("/blank.html"):
            return 200, [("Content-Type", "text/html; charset=utf-8")], b"<!doctype html><title>other origin</title>"
        if h.path.startswith("/parent.html"):
            page = ("<!doctype html><html><head><meta charset=utf-8><title>parent</title></head><body>"
                    "<h1>another origin</h1><iframe id=preview width=800 height=600 src=\"%s\"></iframe>"
                    "</body></html>" % app.iframe_src.replace("&", "&amp;"))
            return 200, [("Content-Type", "text/html; charset=utf-8")], page.encode()
        return 404, [("Content-Type", "text/plain")], b"no"

    a = bh.RecordingApp(handler)
    a.iframe_src = "about:blank"
    a.start()
    yield a
    a.stop()


def browser_cfg(env, tmp_path, scenario, url, preview_host, parent_url=None, **extra):
    cfg = {"executablePath": env["chromium"], "userDataDir": str(tmp_path / ("profile-" + scenario)),
           "resolverRules": "MAP *.%s 127.0.0.1" % gwtest.DOMAIN, "scenario": scenario, "url": url,
           "parentUrl": parent_url, "previewHost": preview_host, "timeoutMs": 15000}
    cfg.update(extra)
    return cfg


def run_browser(env, tmp_path, scenario, url, preview_host, parent_url=None, **extra):
    cfg = browser_cfg(env, tmp_path, scenario, url, preview_host, parent_url, **extra)
    r = subprocess.run([env["node"], os.path.join(BROWSER_DIR, "e2e.js"), json.dumps(cfg)], capture_output=True,
                       timeout=180, cwd=BROWSER_DIR)
    lines = [ln for ln in r.stdout.decode("utf-8", "replace").splitlines() if ln.startswith("{")]
    assert lines, "e2e.js printed nothing (exit %d): %s" % (r.returncode, r.stderr.decode("utf-8", "replace")[-3000:])
    return json.loads(lines[-1])


def gateway_cookie(out):
    return [c for c in out.get("cookies") or [] if c["name"] == bh.COOKIE_NAME]


def assert_app_saw_no_credentials(app, token):
    reqs = app.snapshot()
    assert reqs, "the app got no request"
    for req in reqs:
        bh.assert_no_credentials(req, token)
    return reqs


def assert_app_got_websocket(app):
    """The page's WebSocket reached the app as an upgrade of /ws?via=page
    (credentials are checked by assert_app_saw_no_credentials) and its
    message came through."""
    ups = [r for r in app.snapshot() if r["path"] == "/ws?via=page"]
    assert len(ups) == 1, [r["path"] for r in app.snapshot()]
    hdrs = dict(ups[0]["headers"])
    assert hdrs.get("upgrade", "").lower() == "websocket", ups[0]["headers"]
    assert app.ws_messages == ["hello over websocket"], app.ws_messages


def assert_walkthrough(out, base, token):
    """The landing, the link and the fetch all worked with the cookie."""
    assert not out.get("error"), "browser run failed: %s\nresponses: %s" % (out.get("error"), out.get("responses"))
    assert out["landed_url"] == base + "/?ref=e2e", "the address bar must lose only the token: %r" % out["landed_url"]
    assert token not in out["landed_url"]
    assert out["landed_title"] == "home", out
    assert out["after_click_url"] == base + "/page2?from=home&n=1", out
    assert out["after_click_title"] == "page two", out
    assert out["fetch"]["status"] == 200, "fetch() with the cookie only: %r" % out["fetch"]
    assert json.loads(out["fetch"]["body"]) == {"ok": True, "method": "POST", "got": '{"hello":"gateway"}'}, out["fetch"]
    assert bh.COOKIE_NAME not in out["document_cookie"], "the gateway's cookie must be HttpOnly"
    ws = out.get("websocket") or {}
    assert ws.get("url") == "wss://%s/ws?via=page" % base.split("//", 1)[1], ws
    assert ws.get("echo") == "echo: hello over websocket", "a WebSocket with the cookie only: %r" % ws
    # the token was turned into the cookie by a 302 (and never went anywhere else)
    preview = [r for r in out["responses"] if r["url"].startswith(base + "/")]
    first = preview[0]
    assert first["status"] == 302 and token in first["url"], preview[:3]
    assert token not in (first["location"] or ""), first
    for r in preview[1:]:
        assert token not in r["url"], "the token was sent again: %r" % r


def test_browser_top_level_preview(browser_env, tmp_path, app, register_sandbox, gateway):
    sid = gwtest.new_sandbox_id("web")
    token = register_sandbox(sid, ports={app.port: "private"})
    host = gateway.host(app.port, sid)
    base = "https://%s:%d" % (host, gateway.tls_port)
    out = run_browser(browser_env, tmp_path, "top", base + "/?lizard_token=%s&ref=e2e" % token, host)
    assert_walkthrough(out, base, token)
    cs = gateway_cookie(out)
    assert len(cs) == 1, out.get("cookies")
    c = cs[0]
    assert c["httpOnly"] and c["secure"] and c["sameSite"] == "Lax" and c["path"] == "/", c
    assert c["domain"] == host, "host-only cookie expected: %r" % c
    reqs = assert_app_saw_no_credentials(app, token)
    assert_app_got_websocket(app)
    paths = [(r["method"], r["path"]) for r in reqs]
    assert ("GET", "/?ref=e2e") in paths and ("GET", "/page2?from=home&n=1") in paths, paths
    assert ("POST", "/api/data?via=fetch") in paths, paths
    # the app's own cookie set on the landing page comes back to the app unchanged
    page2 = [r for r in reqs if r["path"].startswith("/page2")][0]
    assert [v for k, v in page2["headers"] if k == "cookie"] == ["app_pref=blue"], page2["headers"]


def test_browser_iframe_preview_with_same_site_none(browser_env, tmp_path, app, parent_site, register_sandbox,
                                                    gw_factory):
    g = gw_factory({"auth": {"cookie_same_site": "none"}})
    sid = gwtest.new_sandbox_id("frame")
    token = register_sandbox(sid, ports={app.port: "private"})
    host = g.host(app.port, sid)
    base = "https://%s:%d" % (host, g.tls_port)
    parent_site.iframe_src = base + "/?lizard_token=%s&ref=e2e" % token
    parent = "http://127.0.0.1:%d/parent.html" % parent_site.port
    out = run_browser(browser_env, tmp_path, "iframe", parent_site.iframe_src, host, parent_url=parent)
    assert out.get("parent_url") == parent, out
    assert_walkthrough(out, base, token)
    cs = gateway_cookie(out)
    assert len(cs) == 1, out.get("cookies")
    assert cs[0]["sameSite"] == "None" and cs[0]["secure"] and cs[0]["httpOnly"], cs[0]
    assert cs[0]["partitionKey"], "the cookie should be partitioned (CHIPS): %r" % cs[0]
    assert_app_saw_no_credentials(app, token)
    assert_app_got_websocket(app)


def test_browser_iframe_needs_same_site_none(browser_env, tmp_path, app, parent_site, register_sandbox, gateway):
    """Control for the test above: with the default SameSite=Lax the browser
    drops the cookie in a cross-site iframe, so the frame gets the gateway's
    401 page (this shows the iframe test really runs cross-site)."""
    sid = gwtest.new_sandbox_id("lax")
    token = register_sandbox(sid, ports={app.port: "private"})
    host = gateway.host(app.port, sid)
    base = "https://%s:%d" % (host, gateway.tls_port)
    parent_site.iframe_src = base + "/?lizard_token=%s&ref=e2e" % token
    out = run_browser(browser_env, tmp_path, "iframe", parent_site.iframe_src, host,
                      parent_url="http://127.0.0.1:%d/parent.html" % parent_site.port)
    assert out.get("landed_url") == base + "/?ref=e2e", out
    text = out.get("landed_text", "")
    assert "missing_token" in text, "expected the gateway's 401 page in the frame: %r" % out
    # the frame says why, and what would make it work (issue 15)
    assert "cannot be shown inside another site" in text and "blocked" in text, text
    assert 'auth.cookie_same_site: "none"' in text, text
    assert not [r for r in app.snapshot() if r["path"] == "/?ref=e2e"], "the app must not be reached without a cookie"


def test_browser_query_token_from_another_origin(browser_env, tmp_path, app, parent_site, register_sandbox, gateway):
    """A page of another origin (no cookie can exist) uses ?lizard_token= in
    a cross-origin fetch() and an EventSource: both are accepted in place,
    not redirected (a 302 has no CORS headers, and EventSource cannot send
    headers), and the token never reaches the app."""
    sid = gwtest.new_sandbox_id("qry")
    token = register_sandbox(sid, ports={app.port: "private"})
    host = gateway.host(app.port, sid)
    base = "https://%s:%d" % (host, gateway.tls_port)
    out = run_browser(browser_env, tmp_path, "query", None, host,
                      parent_url="http://127.0.0.1:%d/blank.html" % parent_site.port,
                      fetchUrl=base + "/api/data?via=xfetch&lizard_token=" + token,
                      eventsUrl=base + "/events?via=es&lizard_token=" + token)
    assert not out.get("error"), out
    assert out["fetch"].get("status") == 200, "cross-origin fetch with ?lizard_token=: %r" % out["fetch"]
    assert json.loads(out["fetch"]["body"])["method"] == "GET", out["fetch"]
    assert out["eventsource"].get("data") == "hello from events", "EventSource with ?lizard_token=: %r" % out
    preview = [r for r in out["responses"] if r["url"].startswith(base + "/")]
    assert preview and all(r["status"] != 302 for r in preview), preview
    reqs = assert_app_saw_no_credentials(app, token)
    paths = [r["path"] for r in reqs]
    assert "/api/data?via=xfetch" in paths and "/events?via=es" in paths, paths


class BrowserSession:
    """e2e.js running a scenario that takes commands on stdin and reports
    JSON lines on stdout."""

    def __init__(self, env, cfg):
        self.proc = subprocess.Popen([env["node"], os.path.join(BROWSER_DIR, "e2e.js"), json.dumps(cfg)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     cwd=BROWSER_DIR)
        self.buf = b""
        self.lines = []

    def expect(self, key, timeout=60):
        """The next JSON line that has `key` (or the final one with an error)."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                if line.startswith(b"{"):
                    obj = json.loads(line)
                    self.lines.append(obj)
                    if key in obj:
                        return obj
                    assert "scenario" not in obj, "the browser run ended: %r" % obj
            left = deadline - time.monotonic()
            assert left > 0, "no %r from the browser within %d s; stderr: %s" % (key, timeout, self.stderr())
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, "the browser run ended early: %r %s" % (self.lines, self.stderr())
                self.buf += chunk

    def send(self, line):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def stderr(self):
        if self.proc.poll() is None:
            return "(running)"
        return self.proc.stderr.read().decode("utf-8", "replace")[-3000:]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()


# the revocation publishes of issue 15, in the order the browser meets them
REVOCATIONS = ["unexpose", "stop", "rotate", "lifecycle"]
# The contract says one round trip of the publish; the bound is x5 the issue's
# one second because the 2-core machine is shared with other test runs (the
# measured times are printed: a few ms).
REVOKE_BOUND_MS = 5000


def test_browser_websocket_closed_by_revocation(browser_env, tmp_path, app, register_sandbox, gateway, redis):
    sid, other = gwtest.new_sandbox_id("rvk"), gwtest.new_sandbox_id("oth")
    token = register_sandbox(sid, ports={app.port: "private"})
    other_token = register_sandbox(other, ports={app.port: "private"})
    host, other_host = gateway.host(app.port, sid), gateway.host(app.port, other)
    base = "https://%s:%d" % (host, gateway.tls_port)
    cfg = browser_cfg(browser_env, tmp_path, "revoke", base + "/?lizard_token=" + token, "%s:%d" % (host, gateway.tls_port),
                      otherWsUrl="wss://%s:%d/ws?via=other&lizard_token=%s" % (other_host, gateway.tls_port, other_token),
                      rounds=len(REVOCATIONS), waitMs=REVOKE_BOUND_MS * 2)
    session = BrowserSession(browser_env, cfg)
    k = "lizard:sbx:{%s}" % sid
    took = {}
    try:
        for n, kind in enumerate(REVOCATIONS):
            ready = session.expect("ready")
            assert ready["open"] == "open" and ready["echo"] == "echo: before %d" % n, ready
            assert ready["other"] == "echo: other before %d" % n, ready
            if kind == "unexpose":
                redis.cmd("HDEL", k, "port:%d" % app.port)
            elif kind == "stop":
                redis.cmd("HSET", k, "state", "stopped")
            elif kind == "rotate":
                redis.cmd("HSET", k, "token_sha256", gwtest.sha256_hex("rotated-" + token))
            else:
                redis.cmd("HSET", k, "lifecycle", "lc-next-%d" % n)
            # written, not published: the browser's tunnel still works just before the publish
            session.send("check")
            checked = session.expect("checked")
            assert checked["echo"] == "echo: unpublished %d" % n, (kind, checked)
            t0 = time.monotonic()
            redis.cmd("PUBLISH", "lizard:routes", sid)
            session.send("go")
            result = session.expect("round")["result"]
            took[kind] = (time.monotonic() - t0) * 1000
            closed = result["closed"]
            assert closed["ms"] >= 0, "%s: the browser's WebSocket was not closed after the publish: %r" % (kind, result)
            assert closed["ms"] < REVOKE_BOUND_MS, (kind, result)
            assert result["other_after"] == "echo: other after %d" % n, "%s: the other sandbox's tunnel: %r" % (kind, result)
            # the sandbox as it was, with the same token: the browser's cookie is valid again
            register_sandbox(sid, ports={app.port: "private"}, token=token)
            session.send("next")
        final = session.expect("scenario")
        assert not final.get("error"), final
    finally:
        session.close()
    print("browser WebSocket closed after the publish: %s ms from the publish to the browser's report, %s ms "
          "after the browser got 'go'" % ({k: round(v, 1) for k, v in took.items()},
                                          [r["closed"]["ms"] for r in final["rounds"]]))
    assert_app_saw_no_credentials(app, token)


# --- the demo, as a new user meets it (issue 15) -------------------------------------


def _nssdb_trusting(home, ca):
    """An NSS database under home/.pki/nssdb that trusts `ca` for servers:
    where Chromium on Linux reads the user's own roots."""
    if shutil.which("certutil") is None:
        msg = "certutil is missing (apt-get install libnss3-tools)"
        if IN_CI:
            pytest.fail(msg + " - required in CI", pytrace=False)
        pytest.skip(msg)
    db = os.path.join(home, ".pki", "nssdb")
    os.makedirs(db, exist_ok=True)
    subprocess.run(["certutil", "-N", "-d", "sql:" + db, "--empty-password"], check=True, capture_output=True, timeout=30)
    subprocess.run(["certutil", "-A", "-d", "sql:" + db, "-t", "C,,", "-n", "lizard-demo-ca", "-i", ca], check=True,
                   capture_output=True, timeout=30)


def test_browser_demo_url_and_a_second_sandbox_with_the_demo_ca(browser_env, tmp_path, curl_runner):
    """deploy/demo.sh (on free ports, with the built gateway) prints a preview
    URL under *.lizard.localhost; a second sandbox registered as docs/getting-started.md
    says is served under the same certificate. Both load in Chromium with
    only the demo CA trusted (no certificate error ignored), and with curl
    --cacert."""
    run_dir = str(tmp_path / "demo-run")
    ports = {k: gwtest.free_port() for k in ("DEMO_TLS_PORT", "DEMO_PLAIN_PORT", "DEMO_ADMIN_PORT", "DEMO_APP_PORT",
                                             "DEMO_APP2_PORT", "DEMO_REDIS_PORT")}
    env = dict(os.environ, DEMO_RUN=run_dir, DEMO_GATEWAY=gwtest.gateway_binary(), DEMO_NO_INSTALL="1",
               **{k: str(v) for k, v in ports.items()})
    env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=0")
    demo = os.path.join(gwtest.REPO, "deploy", "demo.sh")
    try:
        r = subprocess.run(["bash", demo], env=env, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, "demo.sh failed: %s\n%s" % (r.stdout, r.stderr)
        # the demo app's URL (the second app's, on DEMO_APP2_PORT, is printed too)
        urls = [w for w in r.stdout.split() if w.startswith("https://%d-demo." % ports["DEMO_APP_PORT"])
                and "lizard_token=" in w]
        assert len(urls) == 1, r.stdout
        demo_url = urls[0]
        assert demo_url.startswith("https://%d-demo.lizard.localhost:%d/?lizard_token=" % (
            ports["DEMO_APP_PORT"], ports["DEMO_TLS_PORT"])), demo_url
        # docs/getting-started.md, "Registering another sandbox in the demo"
        token = "second-" + os.urandom(12).hex()
        rc = gwtest.RespClient(ports["DEMO_REDIS_PORT"])
        rc.cmd("HSET", "lizard:sbx:{other}", "state", "running", "addr", "127.0.0.1", "lifecycle", "l1", "project", "p1",
               "token_sha256", gwtest.sha256_hex(token), "port:%d" % ports["DEMO_APP_PORT"], "private")
        rc.cmd("PUBLISH", "lizard:routes", "other")
        rc.close()
        other_url = "https://%d-other.lizard.localhost:%d/?lizard_token=%s" % (ports["DEMO_APP_PORT"],
                                                                             ports["DEMO_TLS_PORT"], token)
        ca = os.path.join(run_dir, "ca.pem")
        # curl resolves *.localhost to loopback by itself and checks the name against the certificate
        for u in (demo_url, other_url):
            host = u.split("//", 1)[1].split(":", 1)[0]
            resp = gwtest.Curl(str(tmp_path / "curl"), ca).request(
                u.split("?", 1)[0], headers={"X-Lizard-Access-Token": u.split("lizard_token=", 1)[1]},
                resolve=["%s:%d:127.0.0.1" % (host, ports["DEMO_TLS_PORT"])])
            assert resp.status == 200 and b"Sandbox demo" in resp.body, resp

        home = str(tmp_path / "home")
        _nssdb_trusting(home, ca)
        out = run_browser(browser_env, tmp_path, "load", None, None, urls=[demo_url, other_url], resolverRules=None,
                          browserEnv={"HOME": home})
        assert not out.get("error"), out
        for load, u in zip(out["loads"], (demo_url, other_url)):
            assert not load.get("error"), "Chromium with the demo CA trusted could not load %s: %r" % (u, load)
            assert load["title"] == "Sandbox demo", load
            assert load["landed_url"] == u.split("?", 1)[0], "the token should be gone from the address bar: %r" % load
    finally:
        subprocess.run(["bash", demo, "stop"], env=env, capture_output=True, timeout=60)
