"""An HTTP/1.1 client's chunked request trailers (CONTRACT.md "Forwarding":
an h2c port gets trailers both ways; docs/grpc.md). libh2o patch 0550 reads
the trailer section into req->trailers; the h2c leg forwards it as the
request's trailers, an HTTP/1.1 port never gets it, and both bill it as
ingress. A section that frames or routes (content-length,
transfer-encoding, host, ...), a malformed one (folded, bare LF, control
character) and one past the head bound are refused (400, 431) with the
connection closed: nothing after it is read as a request. Authentication
fields in a trailer are dropped (the app gets the others).

The client is Node's https.request (req.addTrailers) and the app Node's
http2.createServer, in one Node process (apps/h1_trailers.js) so that the
client waits for what the app saw. curl 7.88 cannot send request trailers
from its command line; the raw-socket cases use Python."""

import json
import os
import shutil
import socket
import ssl
import subprocess
import time

import pytest

import gwtest
from test_h2c_trailers import TrailersApp
from test_metering import mredis, records, start_gw, total  # noqa: F401 - mredis: the fixture

NODE_APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "apps", "h1_trailers.js")
TOKEN_HEADER = "x-lizard-access-token"


def node_cases(g, host, token, ca, cases):
    """Runs apps/h1_trailers.js: its app on a new port registered by
    `host(port)` -> (host, token) unless given, then the client's cases.
    Returns {case name: result}."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    p = subprocess.Popen([node, NODE_APP], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("listening "), line
        h, t = host(int(line.split()[1]))
        p.stdin.write(json.dumps({"host": h, "port": g.tls_port, "token": t, "ca": ca, "cases": cases}) + "\n")
        p.stdin.flush()
        out = {}
        for line in p.stdout:
            if line.strip() == "done":
                return out
            r = json.loads(line)
            out[r["name"]] = r
        raise AssertionError("the Node client stopped early: %r" % out)
    finally:
        gwtest.stop_process(p)


def h2c_host(g, register_sandbox, prefix="h1t"):
    def host(port):
        sid = gwtest.new_sandbox_id(prefix)
        token = register_sandbox(sid, ports={port: "private"}, extra={"proto:%d" % port: "h2c"})
        return g.host(port, sid), token
    return host


TRAILERS = {"x-checksum": "c0ffee", "x-count": "2"}


def test_node_client_trailers_reach_a_node_http2_app(gateway, register_sandbox, certs):
    """Node's client ends a chunked body with trailers, its body streamed (the
    app has the first part before the client sends the rest) or in one go:
    the Node http2 app gets them as trailers (never as headers), with the body."""
    got = node_cases(gateway, h2c_host(gateway, register_sandbox), None, certs["ca"], [
        {"name": "streamed", "path": "/streamed", "parts": ["first,", "second"], "trailers": TRAILERS, "streamed": True},
        {"name": "whole", "path": "/whole", "parts": ["first,", "second"], "trailers": TRAILERS, "streamed": False},
        {"name": "empty", "path": "/empty", "parts": [""], "trailers": TRAILERS, "streamed": False},
    ])
    for name, body in (("streamed", "first,second"), ("whole", "first,second"), ("empty", "")):
        r = got[name]
        assert r["status"] == 200, r
        assert r["got"]["body"] == body and r["got"]["trailers"] == TRAILERS, r
        assert "x-checksum" not in r["got"]["headers"], r
        assert r["got"]["events"][-1] == "end", r
    assert got["streamed"]["firstBeforeRest"] is True, got["streamed"]


def test_node_client_auth_trailers_are_dropped(gateway, register_sandbox, certs):
    """Authorization, Proxy-Authorization and Cookie never go to the app in a
    trailer (the gateway takes its credentials out of the head only); the
    trailer's other fields do."""
    got = node_cases(gateway, h2c_host(gateway, register_sandbox), None, certs["ca"], [
        {"name": "auth", "path": "/auth", "parts": ["x"], "streamed": True,
         "trailers": {"authorization": "Bearer secret-1", "proxy-authorization": "Basic c2VjcmV0", "cookie": "s=secret-2",
                      "x-ok": "1"}},
    ])["auth"]
    assert got["status"] == 200, got
    assert got["got"]["trailers"] == {"x-ok": "1"}, got
    assert "secret" not in json.dumps(got["got"]), got


def test_node_client_forbidden_trailer_is_refused(gateway, register_sandbox, certs):
    """A Content-Length trailer (Node sends what it is given): 400 (or the
    connection closed, had the body streamed), and the app never gets it."""
    got = node_cases(gateway, h2c_host(gateway, register_sandbox), None, certs["ca"], [
        {"name": "cl", "path": "/cl", "parts": ["hello"], "trailers": {"content-length": "40"}, "streamed": False},
    ])["cl"]
    assert got["status"] == 400 or "socket hang up" in str(got["got"]), got
    assert "trailers" not in json.dumps(got["got"]), got


def tls_h1(g, host, ca):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", g.tls_port), timeout=20), server_hostname=host)


def read_until_closed(s):
    out = b""
    while True:
        try:
            data = s.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            break
        if not data:
            break
        out += data
    return out


BIG = "".join("x-field-%03d: %s\r\n" % (i, "v" * 1000) for i in range(70))  # 70 KB: past the 64 KiB head bound

BAD_SECTIONS = {
    "content_length": ("Content-Length: 40\r\n\r\n", 400),
    "transfer_encoding": ("X-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    "host": ("Host: elsewhere.example\r\n\r\n", 400),
    "trailer": ("Trailer: x-a\r\n\r\n", 400),
    "connection": ("Connection: close\r\n\r\n", 400),
    "folded": ("X-A: 1\r\n folded\r\n\r\n", 400),
    "bare_lf": ("X-A: 1\nX-B: 2\r\n\r\n", 400),
    "control_char": ("X-A: 1\x0b2\r\n\r\n", 400),
    "too_large": (BIG + "\r\n", 431),
}


@pytest.fixture
def h2_app(gateway, register_sandbox):
    app = TrailersApp()
    sid = gwtest.new_sandbox_id("h1tr")
    token = register_sandbox(sid, ports={app.port: "private"}, extra={"proto:%d" % app.port: "h2c"})
    try:
        yield app, gateway, gateway.host(app.port, sid), token
    finally:
        app.stop()


def paths_seen(app):
    return sorted(g["headers"].get(":path") for g in app.got.values())


@pytest.mark.parametrize("bad", sorted(BAD_SECTIONS))
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_bad_trailer_section_is_refused_and_nothing_after_it_is_a_request(h2_app, certs, bad, streamed):
    """A refused trailer section with a second request glued after it in the
    same write: the connection closed, after one answer (400 or 431) when
    the body came whole (the app never saw the request), after none when it
    was streaming to the app (the app saw the first request, never its
    end); the app never saw the second request."""
    app, g, host, token = h2_app
    section, status = BAD_SECTIONS[bad]
    head = ("POST /first HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
            % (host, TOKEN_HEADER, token)).encode()
    rest = ("0\r\n%sPOST /glued HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nContent-Length: 2\r\n\r\nhi"
            % (section, host, TOKEN_HEADER, token)).encode()
    with tls_h1(g, host, certs["ca"]) as s:
        if streamed:
            s.sendall(head)
            app.wait(lambda e: e[1] == "data")  # the app has the first chunk: the body streams
            s.sendall(rest)
        else:
            s.sendall(head + rest)
        answer = read_until_closed(s)
    if streamed:
        assert answer == b"", answer[:300]
    else:
        # a 70 KB section may come in several reads after a whole body: then it is refused while the body streams
        assert answer.startswith(b"HTTP/1.1 %d " % status) or (bad == "too_large" and answer == b""), answer[:300]
        assert answer.count(b"HTTP/1.1 ") <= 1, answer
    # a request on a new connection, once answered, comes after anything the gateway read from the refused one
    with tls_h1(g, host, certs["ca"]) as s:
        s.sendall(("POST /after HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
                   % (host, TOKEN_HEADER, token)).encode())
        assert read_until_closed(s).startswith(b"HTTP/1.1 200 ")
    # the first request reached the app only when its body streamed (a 70 KB section may arrive in several reads)
    seen = paths_seen(app)
    if bad == "too_large" and not streamed:
        seen = [p for p in seen if p != "/first"]
    assert seen == (["/after", "/first"] if streamed else ["/after"]), app.got
    assert all(g["trailers"] is None for g in app.got.values()), app.got


def test_good_section_then_the_next_request_on_the_connection(h2_app, certs):
    """A good trailer section's bytes are taken exactly: the request glued
    after it is served on the same connection, without the first one's
    trailers."""
    app, g, host, token = h2_app
    req = ("POST /first HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"
           "X-Checksum: c0ffee\r\n\r\n"
           "POST /second HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
           % (host, TOKEN_HEADER, token, host, TOKEN_HEADER, token)).encode()
    with tls_h1(g, host, certs["ca"]) as s:
        s.sendall(req)
        answer = read_until_closed(s)
    assert answer.count(b"HTTP/1.1 200 ") == 2, answer
    by_path = {g["headers"][":path"]: g for g in app.got.values()}
    assert by_path["/first"]["body"] == "hello" and by_path["/first"]["trailers"] == {"x-checksum": "c0ffee"}, by_path
    assert by_path["/second"]["body"] == "hi" and by_path["/second"]["trailers"] is None, by_path


def post_with_trailer(g, host, token, ca, streamed, value):
    """A chunked POST of 100 bytes whose trailer section is x-big: `value`;
    streamed: the body's end a moment after its first chunk. Returns the status."""
    head = ("POST /echo HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            "64\r\n%s\r\n" % (host, TOKEN_HEADER, token, "b" * 100)).encode()
    rest = ("0\r\nx-big: %s\r\n\r\n" % value).encode()
    with tls_h1(g, host, ca) as s:
        s.sendall(head)
        if streamed:
            time.sleep(0.3)  # lets the gateway hand the first chunk on (the path, not an assertion)
        s.sendall(rest)
        answer = read_until_closed(s)
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize("port_kind", ["h2c", "http1"])
def test_trailers_count_as_ingress(gw_factory, mredis, certs, upstream, port_kind):  # noqa: F811
    """An HTTP/1.1 client's trailer section is part of what it sent: ingress
    counts it on an h2c port (where the app gets it) and on an HTTP/1.1 port
    (where it does not), after a streamed body as after a whole one."""
    g = start_gw(gw_factory, mredis)
    app = TrailersApp() if port_kind == "h2c" else None
    try:
        sid = gwtest.new_sandbox_id("h1tm")
        port = app.port if app else upstream.port
        extra = {"proto:%d" % port: "h2c"} if app else {}
        token = gwtest.register_sandbox(mredis, sid, ports={port: "private"}, extra=extra)
        host = g.host(port, sid)
        assert post_with_trailer(g, host, token, certs["ca"], True, "s" * 10000) == 200
        assert post_with_trailer(g, host, token, certs["ca"], False, "w" * 10000) == 200
        if app:
            assert sorted(len(x["trailers"]["x-big"]) for x in app.got.values()) == [10000, 10000], app.got
    finally:
        if app:
            app.stop()
    gwtest.wait_for(lambda: total(records(mredis, sid), "ingress") >= 2 * 10100, 20, what="ingress billed")
    recs = records(mredis, sid)
    assert 2 * (100 + 10000) <= total(recs, "ingress") < 2 * (100 + 10000 + 1024), recs
