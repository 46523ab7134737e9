"""gRPC to a sandbox (CONTRACT.md "Forwarding": proto:<n> = h2c; docs/grpc.md):
a real grpcio server on 127.0.0.1 is the sandbox's app, a real grpcio client
calls it through the gateway over TLS. Unary, server streaming, deadlines,
error statuses in trailers, cancellation reaching the server, revocation
resetting an open stream, the gateway's own errors as gRPC statuses, an h2c
port whose app speaks HTTP/1.1, metering, and one multiplexed upstream
connection. Client streaming and bidirectional calls need streamed request
bodies (issue 41's uploads part): see test_client_streaming_and_bidi."""

import collections
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from concurrent import futures

import pytest

import gwtest
from test_metering import mredis, records, start_gw, total  # noqa: F401 - mredis: the fixture

grpc = pytest.importorskip("grpc")

SERVICE = "lizard.test.T"
TOKEN_HEADER = "x-lizard-access-token"


class GrpcApp:
    """A grpcio server of raw-bytes handlers. It records the peers it saw (one
    per upstream TCP connection) and the calls whose context went inactive
    before they finished (cancelled, by the client or the gateway)."""

    def __init__(self, port=0):
        self.lock = threading.Lock()
        self.peers = set()
        self.cancelled = []  # call names
        self.cancel_event = threading.Event()
        self.metadata = {}  # last invocation metadata, by method
        self.calls = collections.Counter()  # invocations, by method
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
        h = {
            "Echo": grpc.unary_unary_rpc_method_handler(self.echo),
            "Count": grpc.unary_stream_rpc_method_handler(self.count),
            "Hang": grpc.unary_stream_rpc_method_handler(self.hang),
            "Slow": grpc.unary_unary_rpc_method_handler(self.slow),
            "NotFound": grpc.unary_unary_rpc_method_handler(self.not_found),
            "Sum": grpc.stream_unary_rpc_method_handler(self.sum),
            "Chat": grpc.stream_stream_rpc_method_handler(self.chat),
            "Pause": grpc.unary_stream_rpc_method_handler(self.pause),
            "Meta": grpc.unary_stream_rpc_method_handler(self.meta),
        }
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, h),))
        self.port = self.server.add_insecure_port("127.0.0.1:%d" % port)
        self.server.start()

    def stop(self):
        self.server.stop(0)

    def _seen(self, name, ctx):
        with self.lock:
            self.peers.add(ctx.peer())
            self.metadata[name] = dict(ctx.invocation_metadata())
            self.calls[name] += 1

    def _record(self, name):
        with self.lock:
            self.cancelled.append(name)
        self.cancel_event.set()

    def _on_end(self, name, ctx, finished):
        """Records `name` as cancelled when the call ends before finished[0]
        is set: grpcio may stop a streaming handler at its yield without
        resuming it, once the call is cancelled."""
        ctx.add_callback(lambda: None if finished else self._record(name))

    def _wait_cancel(self, name, ctx, limit=60):
        end = time.time() + limit
        while ctx.is_active() and time.time() < end:
            time.sleep(0.02)
        if not ctx.is_active():
            self._record(name)

    def echo(self, req, ctx):
        self._seen("Echo", ctx)
        ctx.set_trailing_metadata((("x-app-trailer", "t-" + req.decode(errors="replace")[:20]),))
        return b"echo:" + req

    def count(self, req, ctx):
        self._seen("Count", ctx)
        finished = []
        self._on_end("Count", ctx, finished)
        for i in range(int(req)):
            if not ctx.is_active():
                return
            yield b"n%d" % i
        finished.append(1)

    def hang(self, req, ctx):
        self._seen("Hang", ctx)
        self._on_end("Hang", ctx, [])
        yield b"first"
        self._wait_cancel("Hang", ctx)

    def slow(self, req, ctx):
        self._seen("Slow", ctx)
        self._wait_cancel("Slow", ctx)
        return b"late"

    def not_found(self, req, ctx):
        self._seen("NotFound", ctx)
        ctx.abort(grpc.StatusCode.NOT_FOUND, "no such thing: " + req.decode())

    def pause(self, req, ctx):
        """Two messages with a silence of `req` seconds between them."""
        self._seen("Pause", ctx)
        finished = []
        self._on_end("Pause", ctx, finished)
        yield b"before"
        end = time.time() + float(req)
        while ctx.is_active() and time.time() < end:
            time.sleep(0.02)
        if not ctx.is_active():
            self._record("Pause")
            return
        finished.append(1)
        yield b"after"

    def meta(self, req, ctx):
        """The response head at once (initial metadata), then `req` seconds of silence, then a message."""
        self._seen("Meta", ctx)
        ctx.send_initial_metadata((("x-started", "1"),))
        time.sleep(float(req))
        yield b"late"

    def sum(self, it, ctx):
        self._seen("Sum", ctx)
        finished = []
        self._on_end("Sum", ctx, finished)
        total = sum(int(x) for x in it)
        finished.append(1)
        return b"%d" % total

    def chat(self, it, ctx):
        self._seen("Chat", ctx)
        for x in it:
            yield b"re:" + x


@pytest.fixture(scope="module")
def gapp():
    a = GrpcApp()
    yield a
    a.stop()


def channel(g, host, certs):
    with open(certs["ca"], "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    opts = [("grpc.ssl_target_name_override", host), ("grpc.default_authority", host)]
    return grpc.secure_channel("127.0.0.1:%d" % g.tls_port, creds, options=opts)


def method(ch, name, kind="unary_unary"):
    return getattr(ch, kind)("/%s/%s" % (SERVICE, name), request_serializer=None, response_deserializer=None)


def h2c_sandbox(register_sandbox, port, access="private", **kw):
    sid = gwtest.new_sandbox_id("grpc")
    token = register_sandbox(sid, ports={port: access}, extra={"proto:%d" % port: "h2c"}, **kw)
    return sid, token


@pytest.fixture
def call_env(gateway, register_sandbox, certs, gapp):
    sid, token = h2c_sandbox(register_sandbox, gapp.port)
    ch = channel(gateway, gateway.host(gapp.port, sid), certs)
    env = type("Env", (), {})()
    env.sid, env.token, env.ch, env.md = sid, token, ch, [(TOKEN_HEADER, token)]
    yield env
    ch.close()


def test_unary_with_trailers(call_env, gapp):
    resp, call = method(call_env.ch, "Echo").with_call(b"hello", metadata=call_env.md, timeout=20)
    assert resp == b"echo:hello"
    assert call.code() == grpc.StatusCode.OK
    # the app's trailing metadata came through the gateway's trailers
    assert ("x-app-trailer", "t-hello") in tuple(call.trailing_metadata()), call.trailing_metadata()
    md = gapp.metadata["Echo"]
    # credentials never reach the app; te: trailers does, and X-Forwarded-*
    assert TOKEN_HEADER not in md and "x-forwarded-for" in md and md.get("x-forwarded-proto") == "https", md


def test_server_streaming(call_env):
    got = list(method(call_env.ch, "Count", "unary_stream")(b"50", metadata=call_env.md, timeout=20))
    assert got == [b"n%d" % i for i in range(50)]


def test_error_status_in_trailers(call_env):
    with pytest.raises(grpc.RpcError) as e:
        method(call_env.ch, "NotFound")(b"widget-7", metadata=call_env.md, timeout=20)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert e.value.details() == "no such thing: widget-7"


def test_client_streaming_and_bidi(call_env):
    """A client-streaming call and a bidirectional one whose client sends
    everything first: they work with the request body forwarded whole."""
    assert method(call_env.ch, "Sum", "stream_unary")(iter([b"1", b"2", b"39"]), metadata=call_env.md, timeout=20) == b"42"
    got = list(method(call_env.ch, "Chat", "stream_stream")(iter([b"a", b"b", b"c"]), metadata=call_env.md, timeout=20))
    assert got == [b"re:a", b"re:b", b"re:c"]


def test_interactive_bidi(call_env):
    """A bidirectional call in lock step: each message is answered before the
    client sends the next, so every request message must reach the app as it
    is sent."""
    import queue
    q = queue.Queue()

    def requests():
        while True:
            m = q.get()
            if m is None:
                return
            yield m

    it = method(call_env.ch, "Chat", "stream_stream")(requests(), metadata=call_env.md, timeout=10)
    try:
        for i in range(3):
            q.put(b"m%d" % i)
            assert next(it) == b"re:m%d" % i
    finally:
        q.put(None)


def test_streamed_body_over_the_limit(gw_factory, certs, gapp, redis):
    """A client-streaming call whose messages pass limits.max_request_body_bytes
    as they stream: 413 body_too_large as a gRPC status (UNAVAILABLE, the
    message says so), nothing past the limit reaches the app, whose call is
    cancelled."""
    g = gw_factory({"limits": {"max_request_body_bytes": 65536}})
    sid = gwtest.new_sandbox_id("grpcl")
    token = gwtest.register_sandbox(redis, sid, ports={gapp.port: "private"}, extra={"proto:%d" % gapp.port: "h2c"})
    before = gapp.cancelled.count("Sum")

    def messages():
        for _ in range(40):
            time.sleep(0.01)
            yield b"1" * 4096

    with channel(g, g.host(gapp.port, sid), certs) as ch:
        with pytest.raises(grpc.RpcError) as e:
            method(ch, "Sum", "stream_unary")(messages(), metadata=[(TOKEN_HEADER, token)], timeout=30)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
    assert "larger than" in e.value.details(), e.value.details()
    gwtest.wait_for(lambda: gapp.cancelled.count("Sum") > before, 20, what="the app's call cancelled")


def test_deadline_reaches_the_server(call_env, gapp):
    gapp.cancel_event.clear()
    before = gapp.cancelled.count("Slow")
    with pytest.raises(grpc.RpcError) as e:
        method(call_env.ch, "Slow")(b"x", metadata=call_env.md, timeout=1.0)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.value
    gwtest.wait_for(lambda: gapp.cancelled.count("Slow") > before, 20, what="the server's context cancelled")


def test_client_cancel_reaches_the_server(call_env, gapp):
    before = gapp.cancelled.count("Hang")
    it = method(call_env.ch, "Hang", "unary_stream")(b"", metadata=call_env.md, timeout=60)
    assert next(it) == b"first"
    it.cancel()
    gwtest.wait_for(lambda: gapp.cancelled.count("Hang") > before, 20, what="the server's context cancelled")


def test_revocation_resets_an_open_stream(gateway, register_sandbox, certs, gapp):
    lifecycle = "lc-" + gwtest.new_sandbox_id()
    sid, token = h2c_sandbox(register_sandbox, gapp.port, lifecycle=lifecycle)
    ch = channel(gateway, gateway.host(gapp.port, sid), certs)
    try:
        before = gapp.cancelled.count("Hang")
        it = method(ch, "Hang", "unary_stream")(b"", metadata=[(TOKEN_HEADER, token)], timeout=60)
        assert next(it) == b"first"
        # the token rotates (same lifecycle): the open call's grant is revoked
        register_sandbox(sid, ports={gapp.port: "private"}, extra={"proto:%d" % gapp.port: "h2c"}, lifecycle=lifecycle)
        with pytest.raises(grpc.RpcError) as e:
            next(it)
        assert e.value.code() == grpc.StatusCode.INTERNAL, e.value  # RST_STREAM INTERNAL_ERROR
        gwtest.wait_for(lambda: gapp.cancelled.count("Hang") > before, 20, what="the server's context cancelled")
        # a new call with the old token is refused the gRPC way
        with pytest.raises(grpc.RpcError) as e:
            method(ch, "Echo")(b"x", metadata=[(TOKEN_HEADER, token)], timeout=20)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED, e.value
    finally:
        ch.close()


def test_missing_token_is_unauthenticated(gateway, register_sandbox, certs, gapp):
    sid, _ = h2c_sandbox(register_sandbox, gapp.port)
    with channel(gateway, gateway.host(gapp.port, sid), certs) as ch:
        with pytest.raises(grpc.RpcError) as e:
            method(ch, "Echo")(b"x", timeout=20)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value
    assert "private" in e.value.details(), e.value.details()


def test_bearer_token_works(gateway, register_sandbox, certs, gapp):
    sid, token = h2c_sandbox(register_sandbox, gapp.port)
    with channel(gateway, gateway.host(gapp.port, sid), certs) as ch:
        assert method(ch, "Echo")(b"b", metadata=[("authorization", "Bearer " + token)], timeout=20) == b"echo:b"
    assert "authorization" not in gapp.metadata["Echo"]


NODE_HTTP1 = """
const http = require("http");
const s = http.createServer((req, res) => res.end("hello from HTTP/1.1"));
s.listen(0, "127.0.0.1", () => console.log("listening " + s.address().port));
"""


@pytest.fixture(scope="module")
def node_http1(tmp_path_factory):
    """A real HTTP/1.1 server (Node's http module): it answers the HTTP/2
    preface's "PRI * HTTP/2.0" with "HTTP/1.1 400 Bad Request"."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    p = subprocess.Popen([node, "-e", NODE_HTTP1], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    line = p.stdout.readline()
    assert line.startswith("listening "), line
    yield int(line.split()[1])
    gwtest.stop_process(p)


def test_http1_app_on_an_h2c_port(gateway, register_sandbox, certs, node_http1, curl):
    """The app on an h2c port answers HTTP/1.1: gRPC UNAVAILABLE whose message
    names HTTP/1.1; a plain request gets the JSON 502 with the same message."""
    sid, token = h2c_sandbox(register_sandbox, node_http1, access="public")
    host = gateway.host(node_http1, sid)
    with channel(gateway, host, certs) as ch:
        with pytest.raises(grpc.RpcError) as e:
            method(ch, "Echo")(b"x", timeout=20)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
    assert "answered HTTP/1.1, not HTTP/2" in e.value.details(), e.value.details()
    r = curl(host, "/", http2=True)
    assert r.status == 502, r
    body = json.loads(r.body)
    assert body["error"]["code"] == "bad_upstream_response", body
    assert "answered HTTP/1.1, not HTTP/2" in body["error"]["message"], body


def test_http09_answer_on_an_h2c_port(gateway, register_sandbox, certs, upstream):
    """Python's http.server answers "PRI * HTTP/2.0" the HTTP/0.9 way (a bare
    HTML page): not HTTP/2 either, and the message quotes what it sent."""
    sid, token = h2c_sandbox(register_sandbox, upstream.port, access="public")
    with channel(gateway, gateway.host(upstream.port, sid), certs) as ch:
        with pytest.raises(grpc.RpcError) as e:
            method(ch, "Echo")(b"x", timeout=20)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
    assert "not valid HTTP/2" in e.value.details() and '"<!DOCTYPE' in e.value.details(), e.value.details()


def test_nothing_listening(gateway, register_sandbox, certs):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    sid, _ = h2c_sandbox(register_sandbox, port, access="public")
    with channel(gateway, gateway.host(port, sid), certs) as ch:
        with pytest.raises(grpc.RpcError) as e:
            method(ch, "Echo")(b"x", timeout=20)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
    assert "listening" in e.value.details().lower(), e.value.details()


def test_calls_share_one_upstream_connection(gateway, register_sandbox, certs):
    """Many concurrent unary calls of one (sandbox, lifecycle, port) are
    streams of one HTTP/2 connection to the app: it sees one peer."""
    app = GrpcApp()
    try:
        sid, token = h2c_sandbox(register_sandbox, app.port)
        with channel(gateway, gateway.host(app.port, sid), certs) as ch:
            echo = method(ch, "Echo")
            # the client's connection and the gateway's route cache are warm (a call refused before the app, for want of
            # a token), so that the first calls reach the gateway in one burst, before its connection to the app is up
            with pytest.raises(grpc.RpcError):
                echo(b"warm", timeout=30)
            assert not app.peers
            with futures.ThreadPoolExecutor(max_workers=32) as ex:
                got = list(ex.map(lambda i: echo(b"%d" % i, metadata=[(TOKEN_HEADER, token)], timeout=30), range(200)))
        assert got == [b"echo:%d" % i for i in range(200)]
        assert len(app.peers) == 1, app.peers
    finally:
        app.stop()


class H2App(threading.Thread):
    """A plain HTTP/2 app (python3-h2, prior knowledge, not gRPC): answers
    every request 200 "hello <path>" with a trailer x-checksum, and records
    the request headers it got."""

    def __init__(self, refuse_first=False):
        super().__init__(daemon=True)
        self.refuse = refuse_first  # the first connection answers its first request with GOAWAY (last stream 0)
        self.connections = 0
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        self.requests = []
        self.big_sent = 0  # body bytes of /big/<n> answers written so far
        self.start()

    def run(self):
        while True:
            try:
                sock, _ = self.srv.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self.serve, args=(sock,), daemon=True).start()

    def serve(self, sock):
        import h2.config
        import h2.connection
        import h2.events
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        heads = {}
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    return
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived) and self.refuse:
                        # a graceful restart that raced the request: refused, never processed
                        self.refuse = False
                        conn.close_connection(error_code=0, last_stream_id=0)
                        sock.sendall(conn.data_to_send())
                        sock.close()
                        return
                    if isinstance(ev, h2.events.RequestReceived):
                        heads[ev.stream_id] = dict(ev.headers)
                        self.requests.append(dict(ev.headers))
                    elif isinstance(ev, h2.events.StreamEnded) and heads.get(ev.stream_id, {}).get(":path", "").startswith("/big/"):
                        # as fast as flow control lets it: the gateway's window for the stream paces it
                        self.send_big(sock, conn, ev.stream_id, int(heads.pop(ev.stream_id)[":path"][5:]))
                    elif isinstance(ev, h2.events.StreamEnded):
                        path = heads.pop(ev.stream_id, {}).get(":path", "")
                        conn.send_headers(ev.stream_id, [(":status", "200"), ("content-type", "text/plain")])
                        conn.send_data(ev.stream_id, ("hello " + path).encode())
                        conn.send_headers(ev.stream_id, [("x-checksum", "c0ffee")], end_stream=True)
                sock.sendall(conn.data_to_send())
        except (OSError, Exception):
            sock.close()

    def send_big(self, sock, conn, stream_id, n):
        import h2.events
        conn.send_headers(stream_id, [(":status", "200"), ("content-type", "application/octet-stream"),
                                      ("content-length", str(n))])
        block = b"\x5a" * 16384
        while n > 0:
            window = min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size, n)
            if window > 0:
                conn.send_data(stream_id, block[:window], end_stream=window == n)
                n -= window
                self.big_sent += window
                sock.sendall(conn.data_to_send())
                continue
            data = sock.recv(65536)
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.StreamReset):
                    return
            sock.sendall(conn.data_to_send())

    def stop(self):
        self.srv.close()


def test_a_burst_shares_the_first_connection(gateway, register_sandbox, certs):
    """Twenty calls in one write (python3-h2), the first of their sandbox
    (they wait for its route together, then go on in one loop turn): they
    wait for the one connection the first of them opens instead of opening
    one each."""
    import h2.events
    from test_access_log import h2_connect

    app = GrpcApp()
    try:
        sid, token = h2c_sandbox(register_sandbox, app.port)
        host = gateway.host(app.port, sid)
        sock, conn = h2_connect(gateway, host, certs["ca"])
        try:
            head = [(":method", "POST"), (":scheme", "https"), (":authority", host), (":path", "/%s/Echo" % SERVICE),
                    ("content-type", "application/grpc"), ("te", "trailers"), (TOKEN_HEADER, token)]
            # one without the token too (refused before the app: UNAUTHENTICATED), all in one write
            conn.send_headers(1, head[:-1], end_stream=True)
            streams = list(range(3, 43, 2))
            for sid_ in streams:
                conn.send_headers(sid_, head)
                conn.send_data(sid_, b"\x00\x00\x00\x00\x01x", end_stream=True)
            sock.sendall(conn.data_to_send())
            pending = set(streams) | {1}
            statuses = {}
            deadline = time.time() + 30
            while pending and time.time() < deadline:
                data = sock.recv(65536)
                assert data, "the gateway closed the connection"
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.TrailersReceived):
                        statuses[ev.stream_id] = dict(ev.headers).get("grpc-status")
                    elif isinstance(ev, h2.events.ResponseReceived) and "grpc-status" in dict(ev.headers):
                        statuses[ev.stream_id] = dict(ev.headers)["grpc-status"]
                    elif isinstance(ev, h2.events.DataReceived):
                        conn.acknowledge_received_data(len(ev.data), ev.stream_id)
                    if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                        pending.discard(ev.stream_id)
                sock.sendall(conn.data_to_send())
        finally:
            sock.close()
        assert statuses.get(1) == "16", statuses
        assert all(statuses.get(s) == "0" for s in streams), statuses
        assert len(app.peers) == 1, app.peers
    finally:
        app.stop()


def test_new_lifecycle_and_goaway_get_new_connections(gateway, register_sandbox, certs):
    """A new lifecycle of the sandbox gets a new connection to the app; an app
    that stops gracefully (GOAWAY) and starts again on its port gets the next
    call on a new connection, with no call failing."""
    app = GrpcApp()
    port = app.port
    try:
        sid, token = h2c_sandbox(register_sandbox, port, lifecycle="lc-one")
        md = [(TOKEN_HEADER, token)]
        with channel(gateway, gateway.host(port, sid), certs) as ch:
            assert method(ch, "Echo")(b"1", metadata=md, timeout=20) == b"echo:1"
            assert method(ch, "Echo")(b"2", metadata=md, timeout=20) == b"echo:2"
            assert len(app.peers) == 1, app.peers
            register_sandbox(sid, ports={port: "private"}, extra={"proto:%d" % port: "h2c"}, lifecycle="lc-two", token=token)
            gwtest.wait_for(lambda: method(ch, "Echo")(b"3", metadata=md, timeout=20) == b"echo:3" and len(app.peers) == 2,
                            10, what="a call on a new connection")
            app.server.stop(grace=5).wait()
            old = app
            app = GrpcApp(port=port)
            assert method(ch, "Echo")(b"4", metadata=md, timeout=20) == b"echo:4"
            assert len(app.peers) == 1 and not app.peers & old.peers, (app.peers, old.peers)
    finally:
        app.stop()


def test_grpc_web_stays_http1(gateway, register_sandbox, curl, upstream):
    """gRPC-Web (application/grpc-web*) is not gRPC to the protocol rule: on a
    port that is not h2c it reaches the HTTP/1.1 app."""
    sid = gwtest.new_sandbox_id("grpcweb")
    register_sandbox(sid, ports={upstream.port: "public"})
    r = curl(gateway.host(upstream.port, sid), "/echo", method="POST", data=b"\x00\x00\x00\x00\x00",
             headers={"Content-Type": "application/grpc-web+proto"}, http2=True)
    assert r.status == 200 and "grpc-status" not in r.headers, r


def test_plain_http2_app_with_trailers(gateway, register_sandbox, certs):
    """Any HTTP/2 request to an h2c port goes over HTTP/2: a python3-h2 app's
    answer reaches a python3-h2 client with its trailer; the app sees te:
    trailers and X-Forwarded-*, no X-Lizard-* header."""
    import h2.events
    from test_access_log import h2_connect

    app = H2App()
    try:
        sid, token = h2c_sandbox(register_sandbox, app.port)
        host = gateway.host(app.port, sid)
        sock, conn = h2_connect(gateway, host, certs["ca"])
        try:
            conn.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":authority", host), (":path", "/a?b=1"),
                                  ("te", "trailers"), (TOKEN_HEADER, token), ("x-lizard-no-activity", "0")],
                              end_stream=True)
            sock.sendall(conn.data_to_send())
            status, body, trailers, ended = None, b"", None, False
            while not ended:
                data = sock.recv(65536)
                assert data, "the gateway closed the connection"
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.ResponseReceived):
                        status = dict(ev.headers)[":status"]
                    elif isinstance(ev, h2.events.DataReceived):
                        body += ev.data
                        conn.acknowledge_received_data(len(ev.data), ev.stream_id)
                    elif isinstance(ev, h2.events.TrailersReceived):
                        trailers = dict(ev.headers)
                    elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                        ended = True
                sock.sendall(conn.data_to_send())
        finally:
            sock.close()
        assert status == "200" and body == b"hello /a?b=1", (status, body)
        assert trailers == {"x-checksum": "c0ffee"}, trailers
        req = app.requests[-1]
        assert req.get("te") == "trailers" and req.get(":authority") == host, req
        assert req.get("x-forwarded-proto") == "https" and "x-forwarded-for" in req, req
        assert not any(k.startswith("x-lizard-") for k in req), req
    finally:
        app.stop()


def test_a_refused_stream_is_retried_on_a_new_connection(gateway, register_sandbox, curl):
    """The app answers the first request with GOAWAY (last stream id 0: not
    processed, RFC 9113 8.7) and closes: the gateway sends it again on a new
    connection, and the client never sees it."""
    app = H2App(refuse_first=True)
    try:
        sid, _ = h2c_sandbox(register_sandbox, app.port, access="public")
        r = curl(gateway.host(app.port, sid), "/again", http2=True)
        assert r.status == 200 and r.body == b"hello /again", r
        assert app.connections == 2 and len(app.requests) == 1, (app.connections, app.requests)
    finally:
        app.stop()


def test_http1_client_that_leaves_cancels_the_call(gateway, register_sandbox, certs, gapp):
    """An HTTP/1.1 client that closes its connection while the app works on
    its call (no head yet): the app's stream is cancelled at once, not when
    it answers."""
    import ssl

    sid, token = h2c_sandbox(register_sandbox, gapp.port)
    host = gateway.host(gapp.port, sid)
    before, calls = gapp.cancelled.count("Slow"), gapp.calls["Slow"]
    ctx = ssl.create_default_context(cafile=certs["ca"])
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", gateway.tls_port), timeout=20), server_hostname=host)
    body = b"\x00\x00\x00\x00\x01x"
    sock.sendall(("POST /%s/Slow HTTP/1.1\r\nHost: %s\r\nContent-Type: application/grpc\r\nTE: trailers\r\n"
                  "%s: %s\r\nContent-Length: %d\r\n\r\n" % (SERVICE, host, TOKEN_HEADER, token, len(body))).encode() + body)
    gwtest.wait_for(lambda: gapp.calls["Slow"] > calls, 10, what="the app has the call")
    sock.close()
    gwtest.wait_for(lambda: gapp.cancelled.count("Slow") > before, 10, what="the app's call cancelled")


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
def test_the_client_paces_the_app(gateway, register_sandbox, certs, tmp_path, http2):
    """100 MB from an HTTP/2 app as fast as flow control lets it, to a curl
    reading 1 MB/s that then stops: the app is only ever a few MiB ahead of
    the client (the stream's window is limits.response_buffer_bytes), and
    the gateway's memory stays flat."""
    import signal

    app = H2App()
    try:
        sid, _ = h2c_sandbox(register_sandbox, app.port, access="public")
        host = gateway.host(app.port, sid)
        out = str(tmp_path / "body.out")
        base_rss = gwtest.rss_kib(gateway.proc.pid)
        proc = subprocess.Popen(["curl", "-sS", "--limit-rate", "1M", "--max-time", "60", "--cacert", certs["ca"],
                                 "--http2" if http2 else "--http1.1", "--noproxy", "*",
                                 "--resolve", "%s:%d:127.0.0.1" % (host, gateway.tls_port), "-o", out,
                                 "https://%s:%d/big/%d" % (host, gateway.tls_port, 100 * 1024 * 1024)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak = base_rss
        try:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 4:
                peak = max(peak, gwtest.rss_kib(gateway.proc.pid))
                time.sleep(0.1)
            assert proc.poll() is None, proc.stderr.read()
            os.kill(proc.pid, signal.SIGSTOP)  # the client stops reading
            time.sleep(2)
            peak = max(peak, gwtest.rss_kib(gateway.proc.pid))
            got, sent = os.path.getsize(out), app.big_sent
        finally:
            proc.kill()
            proc.wait()
        assert 2 * 1024 * 1024 < got < 30 * 1024 * 1024, got
        # the stream window (1 MiB), a send in flight, and the kernel's socket buffers on both sides of the client
        assert sent - got < 12 * 1024 * 1024, (sent, got)
        # plain: 7-8 MiB measured; under ASan 90-94 MiB: its quarantine keeps the stream buffers the client's HTTP/2
        # reads grow and free by the window (it is 256 MiB by default), which the plain allocator reuses
        bound = 160 if gwtest.gateway_is_sanitized() else 16
        assert peak - base_rss < bound * 1024, (peak, base_rss)
    finally:
        app.stop()


def test_plain_http1_client_to_an_h2c_port(gateway, register_sandbox, curl):
    """An HTTP/1.1 client's request to an h2c port goes to the app over HTTP/2 too."""
    app = H2App()
    try:
        sid, _ = h2c_sandbox(register_sandbox, app.port, access="public")
        r = curl(gateway.host(app.port, sid), "/one")
        assert r.status == 200 and r.body == b"hello /one", r
    finally:
        app.stop()


def test_silence_limits(gw_factory, certs, gapp, redis):
    """gRPC is a streamed media type (CONTRACT.md, Long calls): with
    upstream.idle_timeout_ms 1 s a stream silent for 3 s is not cut
    (event_stream_idle_timeout_ms 0: never); the head's limit still holds
    (first_byte_timeout_ms 1 s: DEADLINE_EXCEEDED from the gateway's 504, the
    app's call cancelled)."""
    g = gw_factory({"upstream": {"idle_timeout_ms": 1000, "first_byte_timeout_ms": 1000}})
    sid = gwtest.new_sandbox_id("grpct")
    token = gwtest.register_sandbox(redis, sid, ports={gapp.port: "private"}, extra={"proto:%d" % gapp.port: "h2c"})
    md = [(TOKEN_HEADER, token)]
    with channel(g, g.host(gapp.port, sid), certs) as ch:
        got = list(method(ch, "Pause", "unary_stream")(b"3", metadata=md, timeout=30))
        assert got == [b"before", b"after"]
        # a head, then silence (h2o's own client would cut its connection after its I/O timeout here)
        assert list(method(ch, "Meta", "unary_stream")(b"3", metadata=md, timeout=30)) == [b"late"]
        before = gapp.cancelled.count("Slow")
        with pytest.raises(grpc.RpcError) as e:
            method(ch, "Slow")(b"x", metadata=md, timeout=30)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.value
        assert "limit" in e.value.details(), e.value.details()
        gwtest.wait_for(lambda: gapp.cancelled.count("Slow") > before, 20, what="the server's context cancelled")


def test_port_timeout_before_the_head(gateway, register_sandbox, certs, gapp):
    """A port's timeout:<n> replaces first_byte_timeout_ms: a call with no
    head after 1 s is DEADLINE_EXCEEDED with the message naming the port's
    limit; a gRPC stream silent longer than that is not cut (streamed type)."""
    sid, token = h2c_sandbox(register_sandbox, gapp.port)
    register_sandbox(sid, ports={gapp.port: "private"}, token=token,
                     extra={"proto:%d" % gapp.port: "h2c", "timeout:%d" % gapp.port: "1000"})
    md = [(TOKEN_HEADER, token)]
    with channel(gateway, gateway.host(gapp.port, sid), certs) as ch:
        with pytest.raises(grpc.RpcError) as e:
            method(ch, "Slow")(b"x", metadata=md, timeout=30)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.value
        assert "timeout:%d" % gapp.port in e.value.details(), e.value.details()
        assert list(method(ch, "Pause", "unary_stream")(b"2.5", metadata=md, timeout=30)) == [b"before", b"after"]


def test_event_stream_limit_cuts_a_silent_stream(gw_factory, certs, gapp, redis):
    """upstream.event_stream_idle_timeout_ms set: a gRPC stream silent that
    long is cut, visibly: the client's call fails INTERNAL (RST_STREAM
    INTERNAL_ERROR), the access log says "cut":"idle_timeout", the app's call
    is cancelled."""
    g = gw_factory({"upstream": {"event_stream_idle_timeout_ms": 1000}})
    sid = gwtest.new_sandbox_id("grpcc")
    token = gwtest.register_sandbox(redis, sid, ports={gapp.port: "private"}, extra={"proto:%d" % gapp.port: "h2c"})
    before = gapp.cancelled.count("Pause")
    with channel(g, g.host(gapp.port, sid), certs) as ch:
        it = method(ch, "Pause", "unary_stream")(b"10", metadata=[(TOKEN_HEADER, token)], timeout=30)
        assert next(it) == b"before"
        with pytest.raises(grpc.RpcError) as e:
            next(it)
        assert e.value.code() == grpc.StatusCode.INTERNAL, e.value
    gwtest.wait_for(lambda: gapp.cancelled.count("Pause") > before, 20, what="the server's context cancelled")
    host = g.host(gapp.port, sid)

    def line():
        with open(g.config()["log"]["access"]) as f:
            recs = [json.loads(ln) for ln in f if ln.strip()]
        return [r for r in recs if r.get("host") == host and r.get("path") == "/%s/Pause" % SERVICE]

    gwtest.wait_for(line, 10, what="the access log line")
    assert line()[0].get("cut") == "idle_timeout", line()


def test_connection_slots(gw_factory, certs, gapp, redis):
    """Each open call holds one of limits.max_connections_per_sandbox: a
    third concurrent call is RESOURCE_EXHAUSTED (429 too_many_connections),
    and a call that ends gives its slot back."""
    g = gw_factory({"limits": {"max_connections_per_sandbox": 2}})
    sid = gwtest.new_sandbox_id("grpcs")
    token = gwtest.register_sandbox(redis, sid, ports={gapp.port: "private"}, extra={"proto:%d" % gapp.port: "h2c"})
    md = [(TOKEN_HEADER, token)]
    with channel(g, g.host(gapp.port, sid), certs) as ch:
        hang = method(ch, "Hang", "unary_stream")
        a, b = hang(b"", metadata=md, timeout=60), hang(b"", metadata=md, timeout=60)
        assert next(a) == b"first" and next(b) == b"first"
        with pytest.raises(grpc.RpcError) as e:
            method(ch, "Echo")(b"x", metadata=md, timeout=20)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value
        a.cancel()
        gwtest.wait_for(lambda: _echo_ok(ch, md), 10, what="a slot given back")
        b.cancel()


def _echo_ok(ch, md):
    try:
        return method(ch, "Echo")(b"y", metadata=md, timeout=20) == b"echo:y"
    except grpc.RpcError:
        return False


def test_a_client_that_reads_nothing_is_cut(gw_factory, certs, gapp, redis):
    """A client whose stream window stays shut (python3-h2, initial window 0)
    takes nothing of a server-streaming call: after
    limits.client_stall_timeout_ms its stream is reset INTERNAL_ERROR, the
    access log says "cut":"client_stall", the app's call is cancelled."""
    import h2.events
    import h2.settings
    from test_access_log import h2_connect

    g = gw_factory({"limits": {"client_stall_timeout_ms": 1000}})
    sid = gwtest.new_sandbox_id("grpcst")
    token = gwtest.register_sandbox(redis, sid, ports={gapp.port: "private"}, extra={"proto:%d" % gapp.port: "h2c"})
    host = g.host(gapp.port, sid)
    before = gapp.cancelled.count("Count")
    sock, conn = h2_connect(g, host, certs["ca"])
    try:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        conn.send_headers(1, [(":method", "POST"), (":scheme", "https"), (":authority", host),
                              (":path", "/%s/Count" % SERVICE), ("content-type", "application/grpc"), ("te", "trailers"),
                              (TOKEN_HEADER, token)])
        conn.send_data(1, b"\x00\x00\x00\x00\x07" + b"1000000", end_stream=True)
        sock.sendall(conn.data_to_send())
        reset = None
        while reset is None:
            data = sock.recv(65536)
            assert data, "the gateway closed the connection"
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.StreamReset):
                    reset = ev.error_code
            sock.sendall(conn.data_to_send())
        assert reset == 2, reset  # INTERNAL_ERROR
    finally:
        sock.close()
    gwtest.wait_for(lambda: gapp.cancelled.count("Count") > before, 20, what="the server's context cancelled")

    def line():
        with open(g.config()["log"]["access"]) as f:
            recs = [json.loads(ln) for ln in f if ln.strip()]
        return [r for r in recs if r.get("host") == host]

    gwtest.wait_for(line, 10, what="the access log line")
    assert line()[0].get("cut") == "client_stall", line()


def test_drain_end_cuts_open_calls(gw_factory, certs, gapp, redis):
    """SIGTERM: calls still open when the drain ends are cut, visibly (both
    access-log lines say cut shutdown), the app's calls are cancelled, and
    the gateway exits 0."""
    g = gw_factory({}, name="gw-h2c-drain")
    sid = gwtest.new_sandbox_id("grpcd")
    token = gwtest.register_sandbox(redis, sid, ports={gapp.port: "private"}, extra={"proto:%d" % gapp.port: "h2c"})
    md = [(TOKEN_HEADER, token)]
    before = {k: gapp.cancelled.count(k) for k in ("Hang", "Slow")}
    slow_calls = gapp.calls["Slow"]
    with channel(g, g.host(gapp.port, sid), certs) as ch:
        streaming = method(ch, "Hang", "unary_stream")(b"", metadata=md, timeout=60)
        assert next(streaming) == b"first"
        waiting = method(ch, "Slow").future(b"x", metadata=md, timeout=60)
        gwtest.wait_for(lambda: gapp.calls["Slow"] > slow_calls, 10, what="the app has the second call")
        assert g.stop() == 0
        with pytest.raises(grpc.RpcError) as e:
            next(streaming)
        assert e.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE), e.value
        assert waiting.exception(timeout=30) is not None
    for k in ("Hang", "Slow"):
        gwtest.wait_for(lambda k=k: gapp.cancelled.count(k) > before[k], 20, what="the app's %s cancelled" % k)
    host = g.host(gapp.port, sid)
    with open(g.config()["log"]["access"]) as f:
        recs = [json.loads(ln) for ln in f if ln.strip()]
    cuts = {r["path"]: r.get("cut") for r in recs if r.get("host") == host}
    assert cuts == {"/%s/Hang" % SERVICE: "shutdown", "/%s/Slow" % SERVICE: "shutdown"}, cuts


def test_buffer_budget_cuts_calls_nobody_reads(gw_factory, certs, gapp, redis):
    """Six server-streaming calls on one client connection whose windows stay
    shut: what the gateway holds for them passes
    limits.max_connection_buffer_bytes, and the calls waiting longest are
    cut (RST_STREAM INTERNAL_ERROR, lizard_buffer_budget_resets_total) long
    before limits.client_stall_timeout_ms."""
    import h2.events
    import h2.settings
    from test_access_log import h2_connect, metric

    g = gw_factory({"limits": {"response_buffer_bytes": 65536, "max_connection_buffer_bytes": 131072,
                               "client_stall_timeout_ms": 600000}})
    sid = gwtest.new_sandbox_id("grpcb")
    token = gwtest.register_sandbox(redis, sid, ports={gapp.port: "private"}, extra={"proto:%d" % gapp.port: "h2c"})
    host = g.host(gapp.port, sid)
    sock, conn = h2_connect(g, host, certs["ca"])
    resets = {}
    try:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        for s in range(1, 13, 2):
            conn.send_headers(s, [(":method", "POST"), (":scheme", "https"), (":authority", host),
                                  (":path", "/%s/Count" % SERVICE), ("content-type", "application/grpc"),
                                  ("te", "trailers"), (TOKEN_HEADER, token)])
            conn.send_data(s, b"\x00\x00\x00\x00\x07" + b"1000000", end_stream=True)
        sock.sendall(conn.data_to_send())
        sock.settimeout(30)
        while not resets:
            data = sock.recv(65536)
            assert data, "the gateway closed the connection"
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.StreamReset):
                    resets[ev.stream_id] = ev.error_code
            sock.sendall(conn.data_to_send())
    finally:
        sock.close()
    assert set(resets.values()) == {2}, resets  # INTERNAL_ERROR
    assert metric(g, "lizard_buffer_budget_resets_total") >= 1


def test_metering_counts_grpc_bytes(gw_factory, mredis, certs, gapp):  # noqa: F811
    g = start_gw(gw_factory, mredis)
    sid = gwtest.new_sandbox_id("grpcm")
    token = gwtest.register_sandbox(mredis, sid, ports={gapp.port: "private"}, extra={"proto:%d" % gapp.port: "h2c"})
    payload = b"z" * 100000
    with channel(g, g.host(gapp.port, sid), certs) as ch:
        for _ in range(3):
            assert method(ch, "Echo")(payload, metadata=[(TOKEN_HEADER, token)], timeout=20) == b"echo:" + payload
    gwtest.wait_for(lambda: total(records(mredis, sid), "egress") >= 300000, 20, what="egress billed")
    recs = records(mredis, sid)
    assert 300000 <= total(recs, "egress") < 300000 + 3 * 2048, recs
    assert 300000 <= total(recs, "ingress") < 300000 + 3 * 2048, recs
