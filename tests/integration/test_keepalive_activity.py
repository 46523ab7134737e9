"""Keepalives are not activity (CONTRACT.md, "Activity"; issue 38): a sandbox
whose only traffic is a server-sent event stream of ": ping" comments and
WebSocket Pings and Pongs (the app's, the client's and the gateway's own) is
metered for those bytes but never made active: no ZADD to lizard:activity
moves its time. A real event does, and so does a WebSocket message.

The contract's case is an idle MCP client holding its stream for hours with
a heartbeat every 20-30 s. What the gateway must not do is touch the
sandbox's activity for a keepalive, whenever it comes; the test sends them
every 200-500 ms, so that 8 s with a 500 ms metering flush sees each kind
pass dozens of times and cross 16 flushes. 30 s would show nothing more,
only slower.

Real components: the gateway, redis-server, an SSE app (a Python HTTP/1.1
server writing chunks), a WebSocket app and client (Debian's
python3-websockets: the app pings every 500 ms, the client every 300 ms, and a
second, silent tunnel gets the gateway's own Pings), a raw TLS client reading the
stream."""

import asyncio
import os
import socket
import ssl
import threading
import time

import pytest

import browser_helpers as bh
import gwtest

QUIET_S = 8.0
FLUSH_MS = 500


class SseApp:
    """GET /sse: a text/event-stream that writes ": ping" every 200 ms, and one real event each time
    `events` is bumped."""

    def __init__(self):
        self.events = 0
        self.pings = 0
        self.stop = threading.Event()
        self.app = bh.RecordingApp(self.handle)

    def handle(self, app, h):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-store")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        sent = 0

        def chunk(data):
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()

        try:
            chunk(b": stream open\n\n")  # a comment first: the stream's first bytes are no event
            while not self.stop.is_set():
                if sent < self.events:
                    sent += 1
                    chunk(b"data: event %d\n\n" % sent)
                chunk(b": ping\n\n")
                self.pings += 1
                self.stop.wait(0.2)
        except OSError:
            pass
        return None


class WsApp:
    """A WebSocket app that pings its client every `ping_interval` s (None: never) and echoes messages, on a thread
    of its own."""

    def __init__(self, ping_interval):
        import websockets

        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def echo(ws, path):
            async for msg in ws:
                await ws.send(msg)

        async def main():
            self.server = await websockets.serve(echo, "127.0.0.1", 0, ping_interval=ping_interval, ping_timeout=None,
                                                 compression=None)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            await self.server.wait_closed()

        self.thread = threading.Thread(target=lambda: self.loop.run_until_complete(main()), daemon=True)
        self.thread.start()
        assert ready.wait(10)

    def close(self):
        self.loop.call_soon_threadsafe(self.server.close)
        self.thread.join(10)


class StreamReader:
    """Reads the SSE response over TLS on a thread; counts comments and events."""

    def __init__(self, gw, host, path, token, ca):
        ctx = ssl.create_default_context(cafile=ca)
        ctx.set_alpn_protocols(["http/1.1"])
        self.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", gw.tls_port), timeout=30), server_hostname=host)
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nX-Lizard-Access-Token: %s\r\n\r\n"
                           % (path, host, token)).encode())
        self.data = b""
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        try:
            while True:
                b = self.sock.recv(65536)
                if not b:
                    return
                self.data += b
        except OSError:
            return

    def count(self, what):
        return self.data.count(what)

    def close(self):
        self.sock.close()


def score(redis, sid):
    v = redis.cmd("ZSCORE", "lizard:activity", sid)
    return float(v) if v is not None else None


def egress(redis, sid):
    v = redis.cmd("GET", "lizard:egress:{%s}" % sid)
    return int(v) if v is not None else 0


def settled_score(redis, sid, quiet_s=2.5, timeout=30):
    """The sandbox's activity once it has not moved for quiet_s: what opening the streams made it (the requests,
    and the WebSocket's 101, billed once its client acknowledged it)."""
    deadline = time.monotonic() + timeout
    last, since = score(redis, sid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = score(redis, sid)
        if now != last:
            last, since = now, time.monotonic()
        elif last is not None and time.monotonic() - since >= quiet_s:
            return last
    raise AssertionError("the activity of %s never settled (last %r)" % (sid, last))


def test_heartbeats_are_metered_but_not_activity(gw_factory, redis, certs):
    import websockets

    g = gw_factory({"metering": {"flush_interval_ms": FLUSH_MS}, "upstream": {"websocket_ping_interval_ms": 700}},
                   name="keepalive")
    # the chatty tunnel: Pings both ways every 300-500 ms; the silent one: only the gateway's own (every 700 ms of silence)
    sse, ws_app, silent_app = SseApp(), WsApp(0.5), WsApp(None)
    sse.app.start()
    sid = gwtest.new_sandbox_id("idle")
    token = gwtest.register_sandbox(redis, sid, ports={sse.app.port: "private", ws_app.port: "private",
                                                       silent_app.port: "private"})
    sse_host, ws_host, silent_host = g.host(sse.app.port, sid), g.host(ws_app.port, sid), g.host(silent_app.port, sid)
    loop = asyncio.new_event_loop()
    reader = None
    try:
        reader = StreamReader(g, sse_host, "/sse", token, certs["ca"])
        ctx = ssl.create_default_context(cafile=certs["ca"])

        async def connecting(host, ping_interval):
            # made inside a coroutine: websockets 10 binds a connection to the loop running it
            return await websockets.connect(
                "wss://%s:%d/ws" % (host, g.tls_port), host="127.0.0.1", port=g.tls_port, ssl=ctx, server_hostname=host,
                extra_headers=[("X-Lizard-Access-Token", token)], compression=None, ping_interval=ping_interval,
                ping_timeout=None)

        def connect(host, ping_interval):
            return loop.run_until_complete(connecting(host, ping_interval))

        client, silent = connect(ws_host, None), connect(silent_host, None)  # the client pings by hand (keep_pinging)
        pongs = [0]

        async def keep_pinging(seconds):
            # the client's Pings, every 300 ms: each answered by the app's Pong
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                await (await client.ping())
                pongs[0] += 1
                await asyncio.sleep(0.3)

        loop.run_until_complete(keep_pinging(1.0))
        before = settled_score(redis, sid)
        billed, comments, gateway_pings = egress(redis, sid), reader.count(b": ping"), pings_sent(g)
        loop.run_until_complete(keep_pinging(QUIET_S))
        # the keepalives flowed, through the gateway, and were billed ...
        assert reader.count(b": ping") - comments >= QUIET_S / 0.2 / 2, reader.data[-200:]
        assert pongs[0] >= QUIET_S / 0.3 / 2
        assert pings_sent(g) - gateway_pings >= QUIET_S / 0.7 / 2, (gateway_pings, pings_sent(g))
        gwtest.wait_for(lambda: egress(redis, sid) > billed, 10, what="the keepalives' bytes billed")
        # ... and never made the sandbox active: its time did not move in QUIET_S
        assert score(redis, sid) == before, (before, score(redis, sid))
        assert reader.count(b"data:") == 0
        # a real event does
        sse.events += 1
        gwtest.wait_for(lambda: reader.count(b"data: event 1") == 1, 10, what="the event through the gateway")
        after_event = gwtest.wait_for(lambda: (score(redis, sid) or 0) > before and score(redis, sid), 10,
                                      what="the event's activity")
        # and so does a WebSocket message
        loop.run_until_complete(client.send("a message"))
        assert loop.run_until_complete(asyncio.wait_for(client.recv(), 10)) == "a message"
        gwtest.wait_for(lambda: score(redis, sid) > after_event, 10, what="the message's activity")
        loop.run_until_complete(client.close())
        loop.run_until_complete(silent.close())
    finally:
        sse.stop.set()
        if reader is not None:
            reader.close()
        sse.app.stop()
        ws_app.close()
        silent_app.close()
        loop.close()


def pings_sent(g):
    """The gateway's own keep-alive Pings so far (lizard_websocket_pings_total)."""
    status, body = g.admin_get("/metrics")
    sent = [ln for ln in body.decode().splitlines() if ln.startswith("lizard_websocket_pings_total ")]
    return int(sent[0].split()[1])
