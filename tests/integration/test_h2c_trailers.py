"""Request trailers to a proto:<n> = h2c port (CONTRACT.md "Forwarding":
trailers both ways; docs/grpc.md): a python3-h2 client sends a body and
trailers through the gateway, a python3-h2 app (prior knowledge, as the
sandbox's app) reports what it got: the head, the body and the trailers, as
a JSON answer. h2o's server hands the trailers to the gateway after the body
(libh2o patch 0540), its client sends them after the body to the app (patch
0541). HTTP/1.1 clients' chunked trailers are test_h1_trailers.py's (patch
0550), and the app's response trailers are test_grpc.py's."""

import json
import threading
import time

import pytest

import gwtest
from test_h2_security import GOAWAY, HEADERS, PROTOCOL_ERROR, RST_STREAM, RawH2, rst_code
from test_grpc import H2App
from test_metering import mredis, records, start_gw, total  # noqa: F401 - mredis: the fixture

h2 = pytest.importorskip("h2")

TOKEN_HEADER = "x-lizard-access-token"


class TrailersApp(H2App):
    """An HTTP/2 app (python3-h2, prior knowledge; test_grpc.py's H2App
    accepting): each request is answered, once its stream ended, with 200 and
    the JSON {"headers", "body", "trailers"} of what it got; `events` lists
    (stream key, what) in arrival order: "head", "data", "trailers", "end",
    "reset"."""

    def __init__(self):
        self.events = []
        self.got = {}  # (connection, stream id) -> {"headers", "body", "trailers"}
        self.lock = threading.Lock()
        super().__init__()

    def note(self, what):
        with self.lock:
            self.events.append(what)

    def serve(self, sock):
        import h2.config
        import h2.connection
        import h2.events
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    return
                for ev in conn.receive_data(data):
                    key = (id(sock), getattr(ev, "stream_id", 0))
                    if isinstance(ev, h2.events.RequestReceived):
                        self.got[key] = {"headers": dict(ev.headers), "body": "", "trailers": None}
                        self.note((key, "head"))
                    elif isinstance(ev, h2.events.DataReceived):
                        self.got[key]["body"] += ev.data.decode()
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                        self.note((key, "data"))
                    elif isinstance(ev, h2.events.TrailersReceived):
                        self.got[key]["trailers"] = dict(ev.headers)
                        self.note((key, "trailers"))
                    elif isinstance(ev, h2.events.StreamReset):
                        self.note((key, "reset"))
                    elif isinstance(ev, h2.events.StreamEnded):
                        self.note((key, "end"))
                        conn.send_headers(ev.stream_id, [(":status", "200"), ("content-type", "application/json")])
                        conn.send_data(ev.stream_id, json.dumps(self.got[key]).encode(), end_stream=True)
                sock.sendall(conn.data_to_send())
        except Exception:  # noqa: BLE001 - the gateway cancelled or closed: the thread ends
            sock.close()

    def wait(self, what, timeout=10):
        """Waits for an event (stream key, what) matching `what` (a predicate) and returns it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for e in self.events:
                    if what(e):
                        return e
            time.sleep(0.02)
        raise AssertionError("the app did not see it; it saw %r" % (self.events,))


@pytest.fixture
def env(gateway, register_sandbox, certs):
    app = TrailersApp()
    sid = gwtest.new_sandbox_id("trl")
    token = register_sandbox(sid, ports={app.port: "private"}, extra={"proto:%d" % app.port: "h2c"})
    c = RawH2(gateway, gateway.host(app.port, sid), certs["ca"])
    try:
        yield app, c, token
    finally:
        c.close()
        app.stop()


def post(c, token, sid, path="/t"):
    return c.headers_frame(sid, c.request_headers("POST", path, [("content-type", "application/grpc"), ("te", "trailers"),
                                                                 (TOKEN_HEADER, token)]), end_stream=False)


def what_app_got(c, sid):
    status, _, body = c.response(sid)
    assert status == 200, (status, body)
    return json.loads(body)


def test_request_trailers_reach_the_app(env):
    """A streamed body (the app has its first bytes before the client sent the
    rest), then trailers: the app gets the body whole and the trailers as
    trailers, after the body, not as header fields; the gateway's own and
    hop-by-hop fields in them are taken off as in a head."""
    app, c, token = env
    sid = c.new_sid()
    c.send(post(c, token, sid) + c.data_frames(sid, b"first;", end_stream=False))
    app.wait(lambda e: e[1] == "data")  # the call streams: the app has the first chunk
    c.send(c.data_frames(sid, b"second", end_stream=False) +
           c.headers_frame(sid, [("x-checksum", "c0ffee"), ("grpc-status-details-bin", "AAEC"),
                                 ("x-lizard-access-token", token), ("x-forwarded-for", "10.9.9.9")], end_stream=True))
    got = what_app_got(c, sid)
    assert got["body"] == "first;second", got
    assert got["trailers"] == {"x-checksum": "c0ffee", "grpc-status-details-bin": "AAEC"}, got
    assert "x-checksum" not in got["headers"], got
    key = next(k for k, w in app.events if w == "head")
    order = [w for k, w in app.events if k == key]
    assert order == ["head", "data", "data", "trailers", "end"], order


def test_request_trailers_after_a_whole_body(env):
    """Head, body and trailers in one write (the gateway may have the body
    whole before it calls the app): the same."""
    app, c, token = env
    sid = c.new_sid()
    c.send(post(c, token, sid) + c.data_frames(sid, b"all at once", end_stream=False) +
           c.headers_frame(sid, [("x-checksum", "beef")], end_stream=True))
    got = what_app_got(c, sid)
    assert got["body"] == "all at once" and got["trailers"] == {"x-checksum": "beef"}, got
    assert "x-checksum" not in got["headers"], got


def test_request_trailers_without_a_body(env):
    """HEADERS, then trailers with END_STREAM and no DATA at all: the app gets
    the same two header blocks and an empty body."""
    app, c, token = env
    sid = c.new_sid()
    c.send(post(c, token, sid) + c.headers_frame(sid, [("x-checksum", "none")], end_stream=True))
    got = what_app_got(c, sid)
    assert got["body"] == "" and got["trailers"] == {"x-checksum": "none"}, got
    key = next(k for k, w in app.events if w == "head")
    assert [w for k, w in app.events if k == key] == ["head", "trailers", "end"], app.events


def test_no_trailers_no_trailers_frame(env):
    """A body without trailers ends on its DATA frame, as before: the app sees no trailers."""
    app, c, token = env
    sid = c.new_sid()
    c.send(post(c, token, sid) + c.data_frames(sid, b"plain", end_stream=True))
    got = what_app_got(c, sid)
    assert got["body"] == "plain" and got["trailers"] is None, got


@pytest.mark.parametrize("bad", [[(":path", "/other")], [("connection", "close")], [("x-t", "a\r\nx-injected: 1")]],
                         ids=["pseudo-header", "connection", "crlf"])
def test_forbidden_trailers_are_refused_and_never_forwarded(env, bad):
    """A trailer with a pseudo-header or a connection-specific field makes the
    request malformed (libh2o patch 0310): RST_STREAM(PROTOCOL_ERROR) to the
    client, the app's stream cancelled, the field never forwarded; the
    connection goes on, and its next call's trailers reach the app."""
    app, c, token = env
    sid = c.new_sid()
    c.send(post(c, token, sid) + c.data_frames(sid, b"first;", end_stream=False))
    app.wait(lambda e: e[1] == "data")
    c.send(c.headers_frame(sid, bad, end_stream=True))
    f = c.wait_for(lambda f: f.sid == sid and f.type in (HEADERS, RST_STREAM) or f.type == GOAWAY, 10)
    assert f is not None and f.type == RST_STREAM and rst_code(f) == PROTOCOL_ERROR, f
    first = next(k for k, w in app.events if w == "head")
    app.wait(lambda e: e == (first, "reset"))  # the app's stream is cancelled, never ended
    assert not any(k == first and w in ("trailers", "end") for k, w in app.events), app.events

    sid2 = c.new_sid()
    c.send(post(c, token, sid2) + c.data_frames(sid2, b"next", end_stream=False) +
           c.headers_frame(sid2, [("x-checksum", "ok")], end_stream=True))
    got = what_app_got(c, sid2)
    assert got["body"] == "next" and got["trailers"] == {"x-checksum": "ok"}, got
    assert c.goaway() is None


def test_trailers_count_as_ingress(gw_factory, mredis, certs):  # noqa: F811
    """Trailers are part of what the client sent: ingress counts them, after a
    streamed body as after a whole one (a 10,000-byte trailer value each)."""
    g = start_gw(gw_factory, mredis)
    app = TrailersApp()
    try:
        sid = gwtest.new_sandbox_id("trlm")
        token = gwtest.register_sandbox(mredis, sid, ports={app.port: "private"}, extra={"proto:%d" % app.port: "h2c"})
        c = RawH2(g, g.host(app.port, sid), certs["ca"])
        try:
            streamed = c.new_sid()
            c.send(post(c, token, streamed) + c.data_frames(streamed, b"b" * 100, end_stream=False))
            app.wait(lambda e: e[1] == "data")
            c.send(c.headers_frame(streamed, [("x-big", "v" * 10000)], end_stream=True))
            assert len(what_app_got(c, streamed)["trailers"]["x-big"]) == 10000
            whole = c.new_sid()
            c.send(post(c, token, whole) + c.data_frames(whole, b"b" * 100, end_stream=False) +
                   c.headers_frame(whole, [("x-big", "w" * 10000)], end_stream=True))
            assert len(what_app_got(c, whole)["trailers"]["x-big"]) == 10000
        finally:
            c.close()
    finally:
        app.stop()
    gwtest.wait_for(lambda: total(records(mredis, sid), "ingress") >= 2 * 10100, 20, what="ingress billed")
    recs = records(mredis, sid)
    assert 2 * 10100 <= total(recs, "ingress") < 2 * (10100 + 1024), recs
