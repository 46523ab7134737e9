"""Browser access (issue 3), at the HTTP level with curl and raw clients:
?lizard_token= turned into the gateway's signed cookie, the cookie's
binding, expiry and rotation, credentials never reaching the sandbox, CORS
preflights, and error responses a browser can read. Each test states one
promise of CONTRACT.md (Authentication, Errors) and fails when the gateway
breaks it."""

import base64
import hashlib
import os
import secrets
import subprocess
import time
import urllib.parse

import pytest

import browser_helpers as bh
import gwtest

H1_H2 = pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])


def echo_request(resp):
    """What the upstream's /echo saw, as a request dict for bh.assert_no_credentials."""
    assert resp.status == 200, resp
    body = resp.json()
    return {"path": body["path"], "headers": [(k.lower(), v) for k, v in body["headers"]]}


def header_values(req, name):
    return [v for k, v in req["headers"] if k == name]


def assert_error(resp, status, code):
    assert resp.status == status, resp
    assert "no-store" in resp.headers.get("cache-control", ""), resp
    if resp.headers.get("content-type", "").startswith("application/json"):
        assert resp.json()["error"]["code"] == code, resp
    else:
        assert ("<code>%s</code>" % code).encode() in resp.body or code.encode() in resp.body, resp


def assert_cookie_cleared(resp, name=bh.COOKIE_NAME):
    cleared = [c for c in bh.set_cookies(resp, name) if c.attrs.get("max-age") == "0" or "expires" in c.attrs]
    assert cleared, "a refused cookie must be cleared with Set-Cookie (Max-Age=0): %r" % resp.get_all("set-cookie")
    c = cleared[0]
    assert c.value == "", c
    assert c.attrs.get("path") == "/" and "secure" in c.attrs, "the clearing cookie must match the issued one: %r" % c


def issue_cookie(curl, host, token, path="/echo", gw=None, http2=False):
    """Opens path?lizard_token=token (GET) and returns (response, SetCookie)."""
    sep = "&" if "?" in path else "?"
    r = curl(host, path + sep + "lizard_token=" + token, gw=gw, http2=http2, headers=bh.NAVIGATION)
    assert r.status == 302, "GET with ?lizard_token= must answer 302: %r" % r
    cs = bh.set_cookies(r)
    assert len(cs) == 1, "expected one Set-Cookie %s: %r" % (bh.COOKIE_NAME, r.get_all("set-cookie"))
    return r, cs[0]


def with_cookie(value, name=bh.COOKIE_NAME, extra=None):
    h = {"Cookie": "%s=%s" % (name, value)}
    if extra:
        h.update(extra)
    return h


# --- ?lizard_token= on GET/HEAD: 302 with the cookie --------------------------


@H1_H2
def test_query_token_get_redirects_with_cookie(curl, sandbox, gateway, http2):
    r = curl(sandbox.host, "/echo/page?a=1&lizard_token=%s&b=2" % sandbox.token, http2=http2, headers=bh.NAVIGATION)
    assert r.status == 302, r
    assert bh.location_target(r, sandbox.host) == "/echo/page?a=1&b=2", r.headers.get("location")
    assert sandbox.token not in r.headers.get("location", ""), "the token is in the Location"
    assert "no-store" in r.headers.get("cache-control", ""), r
    assert r.headers.get("referrer-policy", "").lower() == "no-referrer", r
    cs = bh.set_cookies(r)
    assert len(cs) == 1, r.get_all("set-cookie")
    c = cs[0]
    assert c.value and sandbox.token not in c.value, "the cookie value must not be the token: %r" % c
    assert c.attrs.get("path") == "/", c
    assert "secure" in c.attrs and "httponly" in c.attrs, c
    assert c.attrs.get("samesite", "").lower() == "lax", c
    assert "partitioned" not in c.attrs, c
    assert "domain" not in c.attrs, "the cookie must be host-only: %r" % c
    assert c.attrs.get("max-age") == "86400", c


def test_query_token_head_redirects_with_cookie(curl, sandbox):
    r = curl(sandbox.host, "/echo?lizard_token=%s&x=y" % sandbox.token, method="HEAD", extra_args=("-I",),
             headers=bh.NAVIGATION)
    assert r.status == 302, r
    assert bh.location_target(r, sandbox.host) == "/echo?x=y"
    assert len(bh.set_cookies(r)) == 1, r
    assert r.headers.get("referrer-policy", "").lower() == "no-referrer", r
    assert "no-store" in r.headers.get("cache-control", ""), r


def test_issued_cookie_has_documented_format(curl, sandbox, gateway):
    """The cookie binds sandbox, port, expiry and the token's hash, signed
    with the first secret (the format the forging tests below rely on)."""
    t0 = int(time.time())
    _, c = issue_cookie(curl, sandbox.host, sandbox.token)
    ver, sid, port, expires, sig = bh.cookie_fields(c.value)
    assert (ver, sid, port) == ("v1", sandbox.id, str(sandbox.port)), c
    assert t0 + 86400 - 5 <= int(expires) <= t0 + 86400 + 5, c
    assert c.value == bh.sign_cookie(gateway.cookie_secret, sid, int(port), int(expires),
                                     gwtest.sha256_hex(sandbox.token)), "not signed as documented in auth/cookie.c"


# (request target with the token, what the sandbox must see)
STRIP_CASES = [
    ("/echo?lizard_token=T", "/echo"),
    ("/echo/?lizard_token=T", "/echo/"),
    ("/echo/p?a=1&lizard_token=T", "/echo/p?a=1"),
    ("/echo/p?lizard_token=T&a=1", "/echo/p?a=1"),
    ("/echo/p?a=1&lizard_token=T&b=2", "/echo/p?a=1&b=2"),
    ("/echo/p?a=%20x&lizard_token=T&b=%2F&c", "/echo/p?a=%20x&b=%2F&c"),
    ("/echo/p?z=1&a=2&lizard_token=T&a=3&m=", "/echo/p?z=1&a=2&a=3&m="),
    ("/echo/p?a=+b%2Bc&lizard_token=T", "/echo/p?a=+b%2Bc"),
    ("/echo/p?x=lizard_token&lizard_token=T", "/echo/p?x=lizard_token"),
    ("/echo/p?lizard_tokens=1&lizard_token=T&xlizard_token=2&lizard_toke=3", "/echo/p?lizard_tokens=1&xlizard_token=2&lizard_toke=3"),
    ("/echo/p?lizard_token=T&a=1&lizard_token=T", "/echo/p?a=1"),
    ("/echo/a%2Fb/%7Ec?q=%E2%9C%93&lizard_token=T", "/echo/a%2Fb/%7Ec?q=%E2%9C%93"),
    ("/echo/p?a=1;b=2&lizard_token=T", "/echo/p?a=1;b=2"),
]


@pytest.mark.parametrize("target,expected", STRIP_CASES, ids=[c[0].replace("/echo", "") for c in STRIP_CASES])
def test_query_token_stripping(curl, sandbox, target, expected):
    """Only lizard_token goes; every other parameter stays, in order, byte for
    byte, in the redirect and then at the sandbox."""
    r = curl(sandbox.host, target.replace("=T", "=" + sandbox.token), headers=bh.NAVIGATION)
    assert r.status == 302, r
    loc = bh.location_target(r, sandbox.host)
    assert loc == expected, "Location %r, expected %r" % (loc, expected)
    c = bh.set_cookies(r)[0]
    r2 = curl(sandbox.host, loc, headers=with_cookie(c.value))
    req = echo_request(r2)
    assert req["path"] == expected
    bh.assert_no_credentials(req, sandbox.token, [c.value])


def test_wrong_query_token_403_without_cookie(curl, sandbox):
    for method in ("GET", "HEAD", "POST"):
        extra = ("-I",) if method == "HEAD" else ()
        r = curl(sandbox.host, "/echo?lizard_token=wrong-%s" % sandbox.token, method=method, extra_args=extra,
                 data=b"x" if method == "POST" else None)
        assert r.status == 403, (method, r)
        if method != "HEAD":
            assert r.error_code() == "invalid_token", r
        assert bh.set_cookies(r) == [], "a wrong query token must not get a cookie: %r" % r


def test_empty_query_token_is_not_accepted(curl, sandbox):
    for target in ("/echo?lizard_token=", "/echo?lizard_token"):
        r = curl(sandbox.host, target)
        assert r.status in (401, 403), (target, r)
        assert bh.set_cookies(r) == [], r


# --- ?lizard_token= on other methods and upgrades: accepted in place --------


@H1_H2
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_query_token_other_methods_accepted_and_stripped(curl, sandbox, method, http2):
    r = curl(sandbox.host, "/echo/api?a=1&lizard_token=%s&b=2" % sandbox.token, method=method, http2=http2,
             data=b"payload" if method != "DELETE" else None)
    assert r.status == 200, "a %s with ?lizard_token= is accepted in place: %r" % (method, r)
    assert bh.set_cookies(r) == [], "no cookie outside GET/HEAD: %r" % r
    req = echo_request(r)
    assert req["path"] == "/echo/api?a=1&b=2", "lizard_token must be removed before forwarding: %r" % req["path"]
    assert r.json()["method"] == method
    bh.assert_no_credentials(req, sandbox.token)


class WsRecorder:
    """An upstream that answers WebSocket upgrades with 101 and echoes text
    frames, recording the request heads it got."""

    def __init__(self):
        def handle(app, h):
            key = h.headers.get("Sec-WebSocket-Key")
            if (h.headers.get("Upgrade") or "").lower() != "websocket" or not key:
                return 400, [("Content-Type", "text/plain")], b"not an upgrade"
            acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
            h.send_response(101)
            h.send_header("Upgrade", "websocket")
            h.send_header("Connection", "Upgrade")
            h.send_header("Sec-WebSocket-Accept", acc.decode())
            h.end_headers()
            h.wfile.flush()
            h.close_connection = True
            # echo one unmasked text frame per client frame, until close
            try:
                while True:
                    hdr = h.rfile.read(2)
                    if len(hdr) < 2:
                        return None
                    n = hdr[1] & 0x7F
                    mask = h.rfile.read(4) if hdr[1] & 0x80 else b"\0\0\0\0"
                    data = bytes(b ^ mask[i % 4] for i, b in enumerate(h.rfile.read(n)))
                    if hdr[0] & 0x0F == 0x8:
                        return None
                    h.wfile.write(bytes([0x81, len(data)]) + data)
                    h.wfile.flush()
            except OSError:
                return None

        self.app = bh.RecordingApp(handle)


@pytest.fixture
def ws_app():
    w = WsRecorder()
    w.app.start()
    yield w.app
    w.app.stop()


def test_query_token_websocket_upgrade_accepted_and_stripped(ws_app, register_sandbox, gateway, certs):
    sid = gwtest.new_sandbox_id("ws")
    token = register_sandbox(sid, ports={ws_app.port: "private"})
    host = gateway.host(ws_app.port, sid)
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET /chat?room=1&lizard_token=%s&x=%%2F HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
           "Origin: https://%s\r\n\r\n" % (token, host, gateway.tls_port, key, host)).encode()
    head, sock = bh.h1_raw(gateway.tls_port, host, req, certs["ca"])
    try:
        status_line = head.split(b"\r\n", 1)[0]
        assert b" 101 " in status_line + b" ", "a WebSocket upgrade with ?lizard_token= is accepted in place: %r" % head
        assert b"set-cookie" not in head.lower(), head
        sock.sendall(bh.ws_frame(b"hello"))
        got = b""
        deadline = time.monotonic() + 5
        while len(got) < 7 and time.monotonic() < deadline:
            d = sock.recv(100)
            if not d:
                break
            got += d
        assert got[2:7] == b"hello", "the tunnel does not work: %r" % got
    finally:
        sock.close()
    seen = [r for r in ws_app.snapshot() if r["path"].startswith("/chat")]
    assert len(seen) == 1, seen
    assert seen[0]["path"] == "/chat?room=1&x=%2F", "lizard_token must be removed from an upgrade: %r" % seen[0]["path"]
    bh.assert_no_credentials(seen[0], token)


def test_websocket_upgrade_with_cookie(ws_app, register_sandbox, gateway, certs, curl):
    sid = gwtest.new_sandbox_id("wsc")
    token = register_sandbox(sid, ports={ws_app.port: "private"})
    host = gateway.host(ws_app.port, sid)
    _, c = issue_cookie(curl, host, token, path="/")
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET /live HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nCookie: app=1; %s=%s; theme=dark\r\n\r\n"
           % (host, gateway.tls_port, key, bh.COOKIE_NAME, c.value)).encode()
    head, sock = bh.h1_raw(gateway.tls_port, host, req, certs["ca"])
    sock.close()
    assert b" 101 " in head.split(b"\r\n", 1)[0] + b" ", head
    seen = [r for r in ws_app.snapshot() if r["path"] == "/live"]
    assert len(seen) == 1
    bh.assert_no_credentials(seen[0], token, [c.value])
    assert header_values(seen[0], "cookie") == ["app=1; theme=dark"], seen[0]["headers"]


# --- the cookie ----------------------------------------------------------------


@H1_H2
def test_cookie_alone_gives_access(curl, sandbox, http2):
    r, c = issue_cookie(curl, sandbox.host, sandbox.token, http2=http2)
    for path in ("/echo", "/echo/other/page?q=1"):
        r2 = curl(sandbox.host, path, http2=http2, headers=with_cookie(c.value))
        req = echo_request(r2)
        assert req["path"] == path
        bh.assert_no_credentials(req, sandbox.token, [c.value])
        assert header_values(req, "cookie") == [], "only the gateway's cookie was sent: no Cookie upstream"
    # POST with only the cookie (fetch() from the page)
    r3 = curl(sandbox.host, "/echo/api", http2=http2, method="POST", data=b"{}", headers=with_cookie(c.value))
    assert r3.status == 200 and r3.json()["method"] == "POST", r3


@H1_H2
def test_app_cookies_pass_unchanged(curl, sandbox, http2):
    _, c = issue_cookie(curl, sandbox.host, sandbox.token)
    cookie = "sid=abc%%3D%%3D; %s=%s; theme=dark; empty=; q=\"quoted value\"" % (bh.COOKIE_NAME, c.value)
    r = curl(sandbox.host, "/echo", http2=http2, headers={"Cookie": cookie})
    req = echo_request(r)
    bh.assert_no_credentials(req, sandbox.token, [c.value])
    assert header_values(req, "cookie") == ["sid=abc%3D%3D; theme=dark; empty=; q=\"quoted value\""], req["headers"]


def test_h2_cookie_fields_rebuilt(sandbox, gateway, certs, curl):
    """HTTP/2 browsers send one cookie field per cookie: the gateway finds its
    own among them and forwards the others as one Cookie header, in order."""
    _, c = issue_cookie(curl, sandbox.host, sandbox.token)
    authority = "%s:%d" % (sandbox.host, gateway.tls_port)
    hdrs = [("cookie", "first=1"), ("cookie", "%s=%s" % (bh.COOKIE_NAME, c.value)), ("cookie", "second=2"),
            ("cookie", "third=x y"), ("accept", "application/json")]
    status, _, body = bh.h2_request(gateway.tls_port, authority, "/echo", hdrs, certs["ca"])
    assert status == 200, (status, body)
    req = {"path": bh.json_body(body)["path"],
           "headers": [(k.lower(), v) for k, v in bh.json_body(body)["headers"]]}
    bh.assert_no_credentials(req, sandbox.token, [c.value])
    assert header_values(req, "cookie") == ["first=1; second=2; third=x y"], req["headers"]
    # the gateway's cookie as the only field: no Cookie upstream at all
    status, _, body = bh.h2_request(gateway.tls_port, authority, "/echo",
                                    [("cookie", "%s=%s" % (bh.COOKIE_NAME, c.value))], certs["ca"])
    assert status == 200, (status, body)
    assert [v for k, v in bh.json_body(body)["headers"] if k.lower() == "cookie"] == []


def test_h2_gateway_cookie_among_fields_without_token_is_401_not_forwarded(sandbox, gateway, certs):
    authority = "%s:%d" % (sandbox.host, gateway.tls_port)
    status, hdrs, body = bh.h2_request(gateway.tls_port, authority, "/echo", [("cookie", "a=1"), ("cookie", "b=2")],
                                       certs["ca"])
    assert status == 401, (status, body)


@H1_H2
def test_all_three_credentials_never_reach_sandbox(curl, sandbox, http2):
    _, c = issue_cookie(curl, sandbox.host, sandbox.token)
    for method in ("GET", "POST"):
        r = curl(sandbox.host, "/echo/x?lizard_token=%s&k=v" % sandbox.token, http2=http2, method=method,
                 data=b"body" if method == "POST" else None,
                 headers={"X-Lizard-Access-Token": sandbox.token, "Cookie": "a=1; %s=%s" % (bh.COOKIE_NAME, c.value)})
        if r.status == 302:  # a GET may still be turned into the cookie
            assert bh.location_target(r, sandbox.host) == "/echo/x?k=v"
            continue
        req = echo_request(r)
        assert req["path"] == "/echo/x?k=v", "lizard_token reached the sandbox (%s): %r" % (method, req["path"])
        bh.assert_no_credentials(req, sandbox.token, [c.value])
        assert header_values(req, "cookie") == ["a=1"], req["headers"]


def test_lizard_token_on_public_port_not_forwarded(curl, register_sandbox, gateway, upstream):
    """The parameter never reaches a sandbox, also on a public port."""
    sid = gwtest.new_sandbox_id("pub")
    token = register_sandbox(sid, ports={upstream.port: "public"})
    host = gateway.host(upstream.port, sid)
    r = curl(host, "/echo?a=1&lizard_token=%s" % token, method="POST", data=b"x")
    req = echo_request(r)
    bh.assert_no_credentials(req, token)
    assert req["path"] == "/echo?a=1", req


def test_cookie_from_other_sandbox_refused(curl, register_sandbox, gateway, upstream, sandbox):
    """A cookie issued for another host is refused even when both sandboxes
    have the same token (the binding, not only the token hash, counts)."""
    other = gwtest.new_sandbox_id("other")
    register_sandbox(other, ports={upstream.port: "private"}, token=sandbox.token)
    _, c = issue_cookie(curl, gateway.host(upstream.port, other), sandbox.token)
    r = curl(sandbox.host, "/echo", headers=with_cookie(c.value))
    assert_error(r, 403, "invalid_token")
    assert_cookie_cleared(r)


def test_cookie_for_other_port_refused(curl, register_sandbox, gateway, upstream):
    sid = gwtest.new_sandbox_id("ports")
    p2 = gwtest.free_port()
    token = register_sandbox(sid, ports={upstream.port: "private", p2: "private"})
    _, c = issue_cookie(curl, gateway.host(upstream.port, sid), token)
    r = curl(gateway.host(p2, sid), "/", headers=with_cookie(c.value))
    assert_error(r, 403, "invalid_token")
    assert_cookie_cleared(r)
    # and the cookie still works on its own port
    assert curl(gateway.host(upstream.port, sid), "/echo", headers=with_cookie(c.value)).status == 200


def _tampered(value, what, sandbox):
    ver, sid, port, expires, sig = bh.cookie_fields(value)
    if what == "signature":
        return bh.replace_field(value, 4, bh.flip_char(sig))
    if what == "signature-first-char":
        return bh.replace_field(value, 4, bh.flip_char(sig, 0))
    if what == "expiry-later":
        return bh.replace_field(value, 3, str(int(expires) + 3600))
    if what == "expiry-past":
        return bh.replace_field(value, 3, str(int(time.time()) - 10))
    if what == "sandbox":
        return bh.replace_field(value, 1, sid[:-1] + ("x" if sid[-1] != "x" else "y"))
    if what == "port":
        return bh.replace_field(value, 2, str(int(port) + 1))
    if what == "version":
        return bh.replace_field(value, 0, "v2")
    if what == "truncated":
        return value[:-1]
    if what == "extra-field":
        return value + ".x"
    if what == "garbage":
        return "not-a-cookie"
    if what == "token-as-cookie":
        return sandbox.token
    raise AssertionError(what)


TAMPER = ["signature", "signature-first-char", "expiry-later", "expiry-past", "sandbox", "port", "version",
          "truncated", "extra-field", "garbage", "token-as-cookie"]


@pytest.mark.parametrize("what", TAMPER)
def test_tampered_cookie_refused_and_cleared(curl, sandbox, what):
    _, c = issue_cookie(curl, sandbox.host, sandbox.token)
    bad = _tampered(c.value, what, sandbox)
    assert bad != c.value
    r = curl(sandbox.host, "/echo", headers=with_cookie(bad, extra={"Accept": "application/json"}))
    assert_error(r, 403, "invalid_token")
    assert_cookie_cleared(r)
    # the real one still works
    assert curl(sandbox.host, "/echo", headers=with_cookie(c.value)).status == 200


def test_forged_cookie_with_known_secret(curl, sandbox, gateway):
    """Signed here with the test secret: valid until its expiry, refused
    once expired (cookie_ttl_s is enforced through the signed expiry)."""
    th = gwtest.sha256_hex(sandbox.token)
    now = int(time.time())
    good = bh.sign_cookie(gateway.cookie_secret, sandbox.id, sandbox.port, now + 120, th)
    assert curl(sandbox.host, "/echo", headers=with_cookie(good)).status == 200
    expired = bh.sign_cookie(gateway.cookie_secret, sandbox.id, sandbox.port, now - 1, th)
    r = curl(sandbox.host, "/echo", headers=with_cookie(expired))
    assert_error(r, 403, "invalid_token")
    assert_cookie_cleared(r)
    # signed with another secret
    other = bh.sign_cookie(secrets.token_hex(32), sandbox.id, sandbox.port, now + 120, th)
    assert_error(curl(sandbox.host, "/echo", headers=with_cookie(other)), 403, "invalid_token")
    # signed for the wrong token hash
    wrong = bh.sign_cookie(gateway.cookie_secret, sandbox.id, sandbox.port, now + 120, gwtest.sha256_hex("x"))
    assert_error(curl(sandbox.host, "/echo", headers=with_cookie(wrong)), 403, "invalid_token")


def test_cookie_expires_in_real_time(gw_factory, curl, register_sandbox, upstream):
    """cookie_ttl_s: 60 -> Max-Age=60 and an expiry 60 s ahead; a cookie whose
    expiry passed (signed here, since waiting 60 s is too slow) is refused."""
    g = gw_factory({"auth": {"cookie_ttl_s": 60}})
    sid = gwtest.new_sandbox_id("ttl")
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    t0 = int(time.time())
    _, c = issue_cookie(curl, host, token, gw=g)
    assert c.attrs.get("max-age") == "60", c
    expires = int(bh.cookie_fields(c.value)[3])
    assert t0 + 55 <= expires <= t0 + 65, (t0, expires)
    assert curl(host, "/echo", gw=g, headers=with_cookie(c.value)).status == 200
    # the same cookie with its expiry moved back is a forgery
    moved = bh.replace_field(c.value, 3, str(t0 - 1))
    assert_error(curl(host, "/echo", gw=g, headers=with_cookie(moved)), 403, "invalid_token")
    past = bh.sign_cookie(g.cookie_secret, sid, upstream.port, int(time.time()), gwtest.sha256_hex(token))
    r = curl(host, "/echo", gw=g, headers=with_cookie(past))
    assert_error(r, 403, "invalid_token")
    assert_cookie_cleared(r)


def test_token_rotation_revokes_cookies(curl, register_sandbox, gateway, upstream):
    sid = gwtest.new_sandbox_id("rot")
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = gateway.host(upstream.port, sid)
    _, c1 = issue_cookie(curl, host, token)
    _, c2 = issue_cookie(curl, host, token, path="/echo/other")
    assert curl(host, "/echo", headers=with_cookie(c1.value)).status == 200
    new_token = register_sandbox(sid, ports={upstream.port: "private"})  # publishes
    for c in (c1, c2):
        r = curl(host, "/echo", headers=with_cookie(c.value))
        assert_error(r, 403, "invalid_token")
        assert_cookie_cleared(r)
    # the old query token is refused too; the new one issues a working cookie
    assert curl(host, "/echo?lizard_token=" + token).status == 403
    _, c3 = issue_cookie(curl, host, new_token)
    assert curl(host, "/echo", headers=with_cookie(c3.value)).status == 200


def test_cookie_for_public_port_not_needed_and_not_forwarded(curl, register_sandbox, gateway, upstream, sandbox):
    _, c = issue_cookie(curl, sandbox.host, sandbox.token)
    # make the same port public: the cookie is not needed and still not forwarded
    register_sandbox(sandbox.id, ports={upstream.port: "public"}, token=sandbox.token)
    r = curl(sandbox.host, "/echo", headers={"Cookie": "a=1; %s=%s" % (bh.COOKIE_NAME, c.value)})
    req = echo_request(r)
    bh.assert_no_credentials(req, sandbox.token, [c.value])
    assert header_values(req, "cookie") == ["a=1"], req["headers"]


def test_header_token_accepted_wrong_header_403_without_cookie(curl, sandbox):
    r = curl(sandbox.host, "/echo", headers={"X-Lizard-Access-Token": sandbox.token})
    assert r.status == 200
    r = curl(sandbox.host, "/echo", headers={"X-Lizard-Access-Token": "wrong"})
    assert_error(r, 403, "invalid_token")
    assert bh.set_cookies(r) == [] or all(x.value == "" for x in bh.set_cookies(r)), r


# --- secrets: rotation and configuration --------------------------------------


def test_cookie_secret_rotation(gw_factory, curl, register_sandbox, upstream):
    """The first secret signs, every listed secret verifies: S1 -> "S2,S1"
    keeps S1 cookies working and signs with S2 -> "S2" drops S1 cookies."""
    s1, s2 = "one-" + secrets.token_hex(20), "two-" + secrets.token_hex(20)
    g = gw_factory(start=False)
    g.cookie_secret = s1
    g.start()
    sid = gwtest.new_sandbox_id("sec")
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    th = gwtest.sha256_hex(token)
    _, c1 = issue_cookie(curl, host, token, gw=g)
    f = bh.cookie_fields(c1.value)
    assert c1.value == bh.sign_cookie(s1, sid, upstream.port, int(f[3]), th), "not signed with the only secret"

    g.cookie_secret = "%s,%s" % (s2, s1)
    g.restart()
    assert curl(host, "/echo", gw=g, headers=with_cookie(c1.value)).status == 200, "an S1 cookie must still verify"
    _, c2 = issue_cookie(curl, host, token, gw=g)
    f = bh.cookie_fields(c2.value)
    assert c2.value == bh.sign_cookie(s2, sid, upstream.port, int(f[3]), th), "the first secret must sign"
    assert curl(host, "/echo", gw=g, headers=with_cookie(c2.value)).status == 200

    g.cookie_secret = " %s , %s " % (s2, s1)  # spaces around commas are layout
    g.restart()
    assert curl(host, "/echo", gw=g, headers=with_cookie(c1.value)).status == 200
    assert curl(host, "/echo", gw=g, headers=with_cookie(c2.value)).status == 200

    g.cookie_secret = s2
    g.restart()
    r = curl(host, "/echo", gw=g, headers=with_cookie(c1.value))
    assert_error(r, 403, "invalid_token")
    assert_cookie_cleared(r)
    assert curl(host, "/echo", gw=g, headers=with_cookie(c2.value)).status == 200


def _check(gateway_obj, env_value, tmp_path, env_name="LIZARD_COOKIE_SECRETS"):
    path = gateway_obj.write_config(str(tmp_path / "c.json"))
    env = dict(gateway_obj.env())
    if env_value is None:
        env.pop(env_name, None)
    else:
        env[env_name] = env_value
    return subprocess.run([gwtest.gateway_binary(), "-c", path, "--check"], capture_output=True, timeout=20, env=env)


@pytest.mark.parametrize("value,ok", [
    ("a" * 32, True),
    ("a" * 31, False),
    ("a" * 32 + "," + "b" * 31, False),
    ("a" * 32 + "," + "b" * 40, True),
    ("", False),
    (None, False),
], ids=["32", "31", "second-short", "two", "empty", "unset"])
def test_cookie_secrets_validated(gateway, tmp_path, value, ok):
    r = _check(gateway, value, tmp_path)
    if ok:
        assert r.returncode == 0, r.stderr.decode()
    else:
        assert r.returncode != 0, "--check accepted cookie secrets %r" % value
        assert b"cookie_secrets" in r.stderr or b"LIZARD_COOKIE_SECRETS" in r.stderr, r.stderr


def test_cookie_secrets_env_name_configurable(gw_factory, curl, register_sandbox, upstream):
    g = gw_factory({"auth": {"cookie_secrets_env": "MY_GW_SECRETS"}}, start=False)
    secret = "custom-" + secrets.token_hex(20)
    orig_env = g.env

    def env():
        e = orig_env()
        e.pop("LIZARD_COOKIE_SECRETS", None)
        e["MY_GW_SECRETS"] = secret
        return e

    g.env = env
    g.start()
    sid = gwtest.new_sandbox_id("env")
    token = register_sandbox(sid, ports={upstream.port: "private"})
    _, c = issue_cookie(curl, g.host(upstream.port, sid), token, gw=g)
    f = bh.cookie_fields(c.value)
    assert c.value == bh.sign_cookie(secret, sid, upstream.port, int(f[3]), gwtest.sha256_hex(token))


@pytest.mark.parametrize("value,attr,partitioned", [
    ("lax", "Lax", False), ("strict", "Strict", False), ("none", "None", True)])
def test_cookie_same_site_config(gw_factory, curl, register_sandbox, upstream, value, attr, partitioned):
    g = gw_factory({"auth": {"cookie_same_site": value}})
    sid = gwtest.new_sandbox_id("ss")
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = g.host(upstream.port, sid)
    _, c = issue_cookie(curl, host, token, gw=g)
    assert c.attrs.get("samesite") == attr, c
    assert ("partitioned" in c.attrs) == partitioned, c
    assert "secure" in c.attrs and "httponly" in c.attrs and c.attrs.get("path") == "/", c
    assert "domain" not in c.attrs, c
    assert curl(host, "/echo", gw=g, headers=with_cookie(c.value)).status == 200
    r = curl(host, "/echo", gw=g, headers=with_cookie(bh.flip_char(c.value)))
    assert r.status == 403
    cleared = bh.set_cookies(r)
    assert cleared and cleared[0].attrs.get("samesite") == attr, "the clearing cookie must have the same attributes"
    assert ("partitioned" in cleared[0].attrs) == partitioned, cleared


def test_cookie_same_site_bad_value_rejected(gateway, tmp_path):
    path = gateway.write_config(str(tmp_path / "ss.json"),
                                gwtest.deep_merge(gateway.config(), {"auth": {"cookie_same_site": "sometimes"}}))
    r = subprocess.run([gwtest.gateway_binary(), "-c", path, "--check"], capture_output=True, timeout=20,
                       env=gateway.env())
    assert r.returncode != 0 and b"cookie_same_site" in r.stderr, r


# --- CORS ----------------------------------------------------------------------


def _cors_handler(app, h):
    origin = h.headers.get("Origin")
    if h.command == "OPTIONS" and h.path.startswith("/allow"):
        return 204, [("Access-Control-Allow-Origin", origin or "*"), ("Access-Control-Allow-Methods", "GET, POST"),
                     ("Access-Control-Allow-Headers", "content-type, x-app-header"),
                     ("Access-Control-Max-Age", "600"), ("Vary", "Origin")], b""
    if h.command == "OPTIONS" and h.path.startswith("/star"):
        return 204, [("Access-Control-Allow-Origin", "*"), ("Access-Control-Allow-Methods", "POST")], b""
    if h.command == "OPTIONS" and h.path.startswith("/deny"):
        return 204, [("Allow", "GET")], b""
    return 200, [("Content-Type", "application/json")], b'{"app":true}'


@pytest.fixture
def cors_app():
    a = bh.RecordingApp(_cors_handler).start()
    yield a
    a.stop()


@pytest.fixture
def cors_sandbox(cors_app, register_sandbox, gateway):
    sid = gwtest.new_sandbox_id("cors")
    token = register_sandbox(sid, ports={cors_app.port: "private"})
    return sid, token, gateway.host(cors_app.port, sid)


@H1_H2
def test_preflight_passes_without_token(curl, cors_app, cors_sandbox, http2):
    sid, token, host = cors_sandbox
    origin = "https://studio.example.com"
    r = curl(host, "/allow/api", method="OPTIONS", http2=http2, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, x-lizard-access-token"})
    assert r.status == 204, "a preflight must reach the sandbox without a token: %r" % r
    assert r.headers.get("access-control-allow-origin") == origin, r
    seen = [q for q in cors_app.snapshot() if q["method"] == "OPTIONS"]
    assert seen and seen[-1]["path"] == "/allow/api", seen
    bh.assert_no_credentials(seen[-1], token)


@H1_H2
def test_preflight_allowed_gets_token_header_added(curl, cors_sandbox, http2):
    """When the sandbox's answer allows the origin, the gateway adds
    x-lizard-access-token to Access-Control-Allow-Headers, keeping the app's."""
    sid, token, host = cors_sandbox
    origin = "https://studio.example.com"
    r = curl(host, "/allow/api", method="OPTIONS", http2=http2, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, x-lizard-access-token"})
    assert r.status == 204, r
    allowed = [h.strip().lower() for v in r.get_all("access-control-allow-headers") for h in v.split(",")]
    assert "x-lizard-access-token" in allowed, "the gateway must add x-lizard-access-token: %r" % r
    assert "content-type" in allowed and "x-app-header" in allowed, "the app's allowed headers must stay: %r" % r
    # a wildcard origin counts as allowing it
    r = curl(host, "/star", method="OPTIONS", http2=http2, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "x-lizard-access-token"})
    allowed = [h.strip().lower() for v in r.get_all("access-control-allow-headers") for h in v.split(",")]
    assert "x-lizard-access-token" in allowed, r


def test_preflight_not_allowed_gets_nothing_added(curl, cors_sandbox):
    sid, token, host = cors_sandbox
    r = curl(host, "/deny", method="OPTIONS", headers={
        "Origin": "https://evil.example.com", "Access-Control-Request-Method": "POST"})
    assert r.status == 204, r
    assert "access-control-allow-origin" not in r.headers, r
    assert "x-lizard-access-token" not in r.headers.get("access-control-allow-headers", "").lower(), r


def test_options_that_is_not_a_preflight_needs_token(curl, cors_sandbox):
    sid, token, host = cors_sandbox
    assert curl(host, "/allow", method="OPTIONS").status == 401
    assert curl(host, "/allow", method="OPTIONS", headers={"Origin": "https://a.example"}).status == 401
    assert curl(host, "/allow", method="OPTIONS", headers={"Access-Control-Request-Method": "GET"}).status == 401
    # a preflight does not open the other methods
    r = curl(host, "/allow", method="POST", data=b"x", headers={
        "Origin": "https://a.example", "Access-Control-Request-Method": "POST"})
    assert r.status == 401, r


def test_cross_origin_fetch_with_header_token(curl, cors_sandbox, cors_app):
    sid, token, host = cors_sandbox
    r = curl(host, "/data", headers={"Origin": "https://studio.example.com", "X-Lizard-Access-Token": token})
    assert r.status == 200 and r.json() == {"app": True}, r
    bh.assert_no_credentials(cors_app.snapshot()[-1], token)


# --- errors a browser can read -----------------------------------------------------


@pytest.mark.parametrize("case", ["missing", "wrong-header", "wrong-query", "bad-cookie", "not-exposed",
                                  "not-running", "unknown-sandbox", "bad-host", "unknown-host"])
def test_error_responses_carry_cors_headers(curl, sandbox, register_sandbox, gateway, upstream, case):
    origin = "https://studio.example.com"
    h = {"Origin": origin}
    host, path, expect = sandbox.host, "/echo", (401, "missing_token")
    extra = ()
    if case == "wrong-header":
        h["X-Lizard-Access-Token"] = "nope"
        expect = (403, "invalid_token")
    elif case == "wrong-query":
        path = "/echo?lizard_token=nope"
        expect = (403, "invalid_token")
    elif case == "bad-cookie":
        h["Cookie"] = "%s=v1.x.1.1.%s" % (bh.COOKIE_NAME, "A" * 43)
        expect = (403, "invalid_token")
    elif case == "not-exposed":
        host = gateway.host(upstream.port + 1 if upstream.port < 65535 else 1, sandbox.id)
        expect = (404, "port_not_exposed")
    elif case == "not-running":
        sid = gwtest.new_sandbox_id("stop")
        tok = register_sandbox(sid, state="stopped", ports={upstream.port: "private"})
        host, h["X-Lizard-Access-Token"] = gateway.host(upstream.port, sid), tok
        expect = (503, "sandbox_not_running")
    elif case == "unknown-sandbox":
        host = gateway.host(upstream.port, gwtest.new_sandbox_id("none"))
        expect = (404, "sandbox_not_found")
    elif case == "bad-host":
        host, expect, extra = "03000-abc.lizard.test", (400, "bad_host"), ("-k",)
    elif case == "unknown-host":
        host, expect, extra = "3000-abc.example.com", (404, "unknown_host"), ("-k",)
    for http2 in (False, True):
        r = curl(host, path, headers=h, http2=http2, extra_args=extra)
        assert_error(r, *expect)
        assert r.headers.get("access-control-allow-origin") == origin, r
        assert "origin" in [v.strip().lower() for v in r.headers.get("vary", "").split(",")], r
        assert r.headers.get("content-type", "").startswith("application/json"), r


def test_error_without_origin_has_no_cors_headers(curl, sandbox):
    r = curl(sandbox.host, "/echo", headers={"X-Lizard-Access-Token": "nope"})
    assert_error(r, 403, "invalid_token")
    assert "access-control-allow-origin" not in r.headers, r


@pytest.mark.parametrize("headers,html", [
    ({"Sec-Fetch-Mode": "navigate"}, True),
    ({"Sec-Fetch-Mode": "navigate", "Accept": "*/*"}, True),
    ({"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}, True),
    ({"Accept": "text/html"}, True),
    ({"Accept": "application/json, text/html;q=0.5"}, False),
    ({"Accept": "application/json"}, False),
    ({"Accept": "*/*"}, False),
    ({}, False),
    ({"Sec-Fetch-Mode": "cors", "Accept": "*/*"}, False),
    ({"Sec-Fetch-Mode": "no-cors"}, False),
], ids=["sfm-navigate", "sfm-navigate-any", "browser-accept", "accept-html", "json-preferred", "accept-json",
        "accept-any", "nothing", "sfm-cors", "sfm-no-cors"])
def test_error_html_for_navigations_json_otherwise(curl, sandbox, headers, html):
    for case in ("missing", "bad-cookie"):
        h = dict(headers)
        if case == "bad-cookie":
            h["Cookie"] = "%s=garbage" % bh.COOKIE_NAME
        r = curl(sandbox.host, "/echo", headers=h)
        assert r.status == (401 if case == "missing" else 403), r
        ct = r.headers.get("content-type", "")
        assert "no-store" in r.headers.get("cache-control", ""), r
        if html:
            assert ct.startswith("text/html"), (headers, r)
            page = r.body.decode("utf-8")
            assert "<html" in page.lower(), page
            code = "missing_token" if case == "missing" else "invalid_token"
            assert code in page, "the page should name the error code"
            assert sandbox.token not in page
        else:
            assert ct.startswith("application/json"), (headers, r)
            assert r.error_code() == ("missing_token" if case == "missing" else "invalid_token"), r


def test_html_error_page_escapes_reflected_values(curl, sandbox, register_sandbox, gateway, upstream):
    """Whatever the request carries that could end up in the page (path,
    query, headers) appears only escaped; the page says what to do."""
    evil = "<script>alert(1)</script>"
    q = urllib.parse.quote(evil, safe="")
    nav = {"Sec-Fetch-Mode": "navigate", "Accept": "text/html", "User-Agent": evil, "Referer": "https://x/" + q,
           "Origin": "https://a.example"}
    for host, path in ((sandbox.host, "/%s/\"'><img src=x onerror=alert(1)>?x=%s" % (q, q)),
                       (sandbox.host, "/p?lizard_token=%s%s" % (q, evil.replace("<", "%3C"))),
                       (gateway.host(upstream.port, gwtest.new_sandbox_id("no")), "/" + q)):
        r = curl(host, path.replace(" ", "%20"), headers=nav)
        assert r.status in (401, 403, 404), r
        assert r.headers.get("content-type", "").startswith("text/html"), r
        page = r.body.decode("utf-8")
        assert "<script>alert" not in page and "onerror=alert" not in page.replace("&quot;", ""), page
        assert "<img" not in page, page
    # what is reflected (the sandbox id and port) is there, as text
    r = curl(sandbox.host, "/", headers={"Sec-Fetch-Mode": "navigate"})
    page = r.body.decode("utf-8")
    assert sandbox.id in page and "lizard_token" in page, "the 401 page should say how to get in: %s" % page


def test_browser_navigation_with_bad_cookie_gets_html_and_cleared_cookie(curl, sandbox):
    r = curl(sandbox.host, "/", headers={"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document",
                                         "Accept": "text/html,*/*;q=0.8",
                                         "Cookie": "%s=v1.%s.%d.1.%s" % (bh.COOKIE_NAME, sandbox.id, sandbox.port,
                                                                         "A" * 43)})
    assert r.status == 403 and r.headers.get("content-type", "").startswith("text/html"), r
    assert_cookie_cleared(r)


# --- secrets stay out of logs -------------------------------------------------------


def test_no_credential_in_logs(curl, sandbox, gateway):
    _, c = issue_cookie(curl, sandbox.host, sandbox.token, path="/echo/log?k=v")
    curl(sandbox.host, "/echo", headers=with_cookie(c.value))
    curl(sandbox.host, "/echo", headers=with_cookie(bh.flip_char(c.value)))
    curl(sandbox.host, "/echo?lizard_token=" + sandbox.token, method="POST", data=b"x")
    curl(sandbox.host, "/echo?lizard_token=bad-" + sandbox.token)
    sig = bh.cookie_fields(c.value)[4]
    time.sleep(0.5)
    for path in (gateway.log, gateway.config()["log"]["access"]):
        if path and os.path.exists(path):
            with open(path, "rb") as f:
                text = f.read()
            assert sandbox.token.encode() not in text, "the token is in %s" % path
            assert sig.encode() not in text, "the cookie is in %s" % path


# --- ?lizard_token= is turned into a cookie only on navigations (issue 15) --------

NOT_NAVIGATIONS = {
    "curl": {},
    "fetch-cors": {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Sec-Fetch-Site": "cross-site",
                   "Origin": "https://studio.example.com", "Accept": "*/*"},
    "fetch-same-origin": {"Sec-Fetch-Mode": "same-origin", "Sec-Fetch-Dest": "empty", "Accept": "*/*"},
    "eventsource": {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Accept": "text/event-stream",
                    "Origin": "https://studio.example.com"},
    "img": {"Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image", "Accept": "image/avif,image/webp,*/*"},
    "video": {"Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "video", "Accept": "*/*"},
    # html accepted, but Fetch Metadata says it is not a navigation
    "xhr-html": {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Accept": "text/html"},
    "accept-json": {"Accept": "application/json"},
}


@H1_H2
@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize("what", sorted(NOT_NAVIGATIONS))
def test_query_token_accepted_in_place_when_not_a_navigation(curl, sandbox, what, method, http2):
    """fetch, XHR, EventSource, media and curl cannot use a 302 that sets a
    cookie: their ?lizard_token= is accepted in place, removed before
    forwarding, and no cookie is set."""
    extra = ("-I",) if method == "HEAD" else ()
    r = curl(sandbox.host, "/echo/api?a=1&lizard_token=%s&b=2" % sandbox.token, method=method, http2=http2,
             headers=NOT_NAVIGATIONS[what], extra_args=extra)
    assert r.status == 200, "a %s %s with ?lizard_token= must be accepted in place: %r" % (what, method, r)
    assert bh.set_cookies(r) == [], "no cookie for a request that is not a navigation: %r" % r
    assert "location" not in r.headers, r
    if method == "GET":
        req = echo_request(r)
        assert req["path"] == "/echo/api?a=1&b=2", req["path"]
        bh.assert_no_credentials(req, sandbox.token)


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Mode": "navigate"},
    {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe", "Sec-Fetch-Site": "cross-site", "Accept": "*/*"},
    {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"},
], ids=["sec-fetch-mode", "iframe", "accept-html-without-fetch-metadata"])
def test_query_token_navigation_becomes_cookie(curl, sandbox, headers):
    r = curl(sandbox.host, "/echo?lizard_token=%s&x=1" % sandbox.token, headers=headers)
    assert r.status == 302, r
    assert bh.location_target(r, sandbox.host) == "/echo?x=1"
    assert len(bh.set_cookies(r)) == 1, r


def test_wrong_query_token_not_a_navigation_403(curl, sandbox):
    r = curl(sandbox.host, "/echo?lizard_token=wrong", headers=NOT_NAVIGATIONS["fetch-cors"])
    assert_error(r, 403, "invalid_token")
    assert bh.set_cookies(r) == [], r
    assert r.headers.get("access-control-allow-origin") == "https://studio.example.com", r


# --- 401 names its scheme (issue 15) --------------------------------------------


@H1_H2
@pytest.mark.parametrize("nav", [False, True], ids=["json", "html"])
def test_401_carries_www_authenticate(curl, sandbox, http2, nav):
    r = curl(sandbox.host, "/echo", http2=http2, headers=bh.NAVIGATION if nav else {})
    assert r.status == 401, r
    assert r.get_all("www-authenticate") == ["Lizard-Token"], r.header_list
    r = curl(sandbox.host, "/echo", http2=http2, headers={"X-Lizard-Access-Token": "wrong"})
    assert r.status == 403 and "www-authenticate" not in r.headers, r


# --- a lax cookie in another site's frame (issue 15) ------------------------------

FRAME = {"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
         "Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


def _embedding_explained(text):
    return "cookie_same_site" in text and "none" in text and "blocked" in text and "another site" in text


@pytest.mark.parametrize("fmt", ["html", "json"])
def test_cross_site_frame_without_cookie_says_embedding_needs_same_site_none(curl, sandbox, fmt):
    h = dict(FRAME)
    if fmt == "json":
        h.pop("Sec-Fetch-Mode")
        h["Accept"] = "application/json"
    r = curl(sandbox.host, "/?ref=frame", headers=h)
    assert r.status == 401, r
    text = r.body.decode("utf-8").replace("&quot;", '"')
    if fmt == "json":
        assert r.error_code() == "missing_token", r
        text = r.json()["error"]["message"]
    else:
        assert r.headers.get("content-type", "").startswith("text/html"), r
    assert _embedding_explained(text), "the page must say the cookie was blocked in another site's frame and " \
                                       "that embedding needs auth.cookie_same_site \"none\": %s" % text
    assert "?lizard_token=" not in text.split("Technical")[0], "do not send the embedder back to the link they used"


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate"},
    {"Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"},
    {"Sec-Fetch-Mode": "navigate"},
], ids=["same-site-frame", "top-level", "no-dest"])
def test_other_401s_do_not_talk_about_embedding(curl, sandbox, headers):
    r = curl(sandbox.host, "/", headers=headers)
    assert r.status == 401, r
    assert "cookie_same_site" not in r.body.decode("utf-8"), r.body


def test_cross_site_frame_with_same_site_none_gets_the_usual_401(gw_factory, curl, register_sandbox, upstream):
    g = gw_factory({"auth": {"cookie_same_site": "none"}})
    sid = gwtest.new_sandbox_id("fr")
    register_sandbox(sid, ports={upstream.port: "private"})
    r = curl(g.host(upstream.port, sid), "/", gw=g, headers=FRAME)
    assert r.status == 401, r
    assert "cookie_same_site" not in r.body.decode("utf-8"), r.body


# --- what a person reads (issue 15) -------------------------------------------------


def _page_parts(r):
    """(what happened + what to do, technical detail) of an HTML error page."""
    page = r.body.decode("utf-8")
    assert 'class="tech"' in page, page
    human, tech = page.split('class="tech"', 1)
    return human, tech


def test_401_page_tells_a_person_where_to_get_a_link(curl, sandbox):
    r = curl(sandbox.host, "/", headers=bh.NAVIGATION)
    assert r.status == 401, r
    human, tech = _page_parts(r)
    assert "preview link" in human and "ask" in human, human
    assert "X-Lizard-Access-Token" not in human, "a header a browser user cannot set belongs below: %s" % human
    assert "X-Lizard-Access-Token" in tech and "lizard_token" in tech, tech
    assert sandbox.id in human


@pytest.mark.parametrize("what,words", [
    ("signature", ["no longer valid"]),
    ("sandbox", ["not valid", "another preview", "cleared"]),
    ("port", ["not valid", "another preview", "cleared"]),
    ("garbage", ["not valid", "another preview", "cleared"]),
    ("expiry-past", ["expired"]),
])
def test_403_cookie_page_says_what_happened(curl, sandbox, gateway, what, words):
    _, c = issue_cookie(curl, sandbox.host, sandbox.token)
    bad = _tampered(c.value, what, sandbox)
    if what == "expiry-past":  # signed by the gateway's secret, expired: the real "expired" case
        bad = bh.sign_cookie(gateway.cookie_secret, sandbox.id, sandbox.port, int(time.time()) - 5,
                             gwtest.sha256_hex(sandbox.token))
    r = curl(sandbox.host, "/", headers=with_cookie(bad, extra=bh.NAVIGATION))
    assert r.status == 403, r
    human, tech = _page_parts(r)
    assert "may have been rotated" not in human, human
    for w in words:
        assert w in human, (w, human)
    assert "link" in human, "say where to get access again: %s" % human
    assert "cookie" in tech, tech
    assert_cookie_cleared(r)


def test_403_after_token_rotation_says_access_was_changed(curl, register_sandbox, gateway, upstream):
    sid = gwtest.new_sandbox_id("rw")
    token = register_sandbox(sid, ports={upstream.port: "private"})
    host = gateway.host(upstream.port, sid)
    _, c = issue_cookie(curl, host, token)
    register_sandbox(sid, ports={upstream.port: "private"})  # a new token, published
    r = curl(host, "/", headers=with_cookie(c.value, extra=bh.NAVIGATION))
    assert r.status == 403, r
    human, _ = _page_parts(r)
    assert "token was changed" in human and "new preview link" in human, human
    j = curl(host, "/", headers=with_cookie(c.value, extra={"Accept": "application/json"}))
    assert j.error_code() == "invalid_token" and "token was changed" in j.json()["error"]["message"], j
