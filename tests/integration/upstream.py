#!/usr/bin/python3
"""A real HTTP/1.1 upstream for the integration tests: stands in for the
program a sandbox runs. Keep-alive (protocol HTTP/1.1), one thread per
connection, stdlib only.

    upstream.py [--host 127.0.0.1] [--port 0]

Prints "listening <port>" on stdout once it accepts connections.

Endpoints (any method unless said):
  /echo...            JSON: method, path (raw request target), headers as
                      [[name, value], ...] in arrival order, body_length,
                      body_sha256, peer [addr, port], http_version
  /status/<n>         answers status n with a small JSON body
  /bytes/<n>          n bytes (pattern, streamed in 64 KiB writes);
                      ?chunked=1 sends them chunked instead of with a length
  /slow-head/<ms>     sleeps ms before sending the head
  /held/<name>        sends its head once /_release/<name> was asked (before
                      or after), at most 120 s after it came
  /sse                text/event-stream, one event every 100 ms with the
                      server time (?n=COUNT, default 10, ?interval_ms=), each
                      flushed on its own chunk, then the body ends
  /chunked            Transfer-Encoding: chunked in pieces
                      (?pieces=5&delay_ms=100&size=16)
  /ws                 WebSocket echo (HTTP/1.1 Upgrade), text and binary
  /_stats             {"connections": N, "requests": N, "bytes_written": N,
                      "open": connections open now (not reset by /_reset),
                      "in_flight": requests being handled now, "peak_in_flight":
                      the most at once since the start or /_reset,
                      "endpoints": {"bytes": N, "slow-head": N, ...} requests per
                      endpoint since then (not the /_ ones)}
  /_reset             sets the counters to 0
  /_release/<name>    lets /held/<name> answer, now and from then on
"""

import argparse
import base64
import hashlib
import json
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        self.bytes_written = 0
        self.open = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.endpoints = {}

    def add(self, name, n=1):
        with self.lock:
            setattr(self, name, getattr(self, name) + n)
            if name == "in_flight" and self.in_flight > self.peak_in_flight:
                self.peak_in_flight = self.in_flight

    def count_endpoint(self, name):
        with self.lock:
            self.endpoints[name] = self.endpoints.get(name, 0) + 1

    def snapshot(self):
        with self.lock:
            return {"connections": self.connections, "requests": self.requests, "bytes_written": self.bytes_written,
                    "open": self.open, "in_flight": self.in_flight, "peak_in_flight": self.peak_in_flight,
                    "endpoints": dict(self.endpoints)}

    def reset(self):
        with self.lock:
            self.connections = self.requests = self.bytes_written = 0
            self.endpoints = {}
            self.peak_in_flight = self.in_flight


STATS = Stats()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def process_request(self, request, client_address):
        STATS.add("connections")
        super().process_request(request, client_address)


GATES = {}  # /held/<name>'s, by name
GATES_LOCK = threading.Lock()


def release_gate(name):
    with GATES_LOCK:
        return GATES.setdefault(name, threading.Event())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "lizard-test-upstream/1"

    def setup(self):
        super().setup()
        STATS.add("open")
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def finish(self):
        try:
            super().finish()
        finally:
            STATS.add("open", -1)

    def log_message(self, fmt, *args):  # quiet: the tests read the gateway's logs
        pass

    # Every method goes through dispatch (do_GET, do_POST, do_FOO, ...).
    def __getattr__(self, name):
        if name.startswith("do_"):
            return self.dispatch
        raise AttributeError(name)

    # --- helpers -------------------------------------------------------

    def read_body(self):
        """Reads the request body (Content-Length or chunked); returns bytes."""
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            parts = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    break
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers
                        t = self.rfile.readline(65537)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline(3)
            return b"".join(parts)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def write(self, data):
        self.wfile.write(data)
        STATS.add("bytes_written", len(data))

    def send_json(self, status, obj, extra_headers=()):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra_headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.write(body)

    def write_chunk(self, data):
        if data:
            self.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_chunks(self):
        self.write(b"0\r\n\r\n")
        self.wfile.flush()

    # --- endpoints -----------------------------------------------------

    def dispatch(self):
        STATS.add("requests")
        if self.path.startswith("/_"):  # the tests' own questions are not work of the app's
            return self.dispatch_endpoint()
        STATS.count_endpoint(urllib.parse.urlsplit(self.path).path.lstrip("/").split("/")[0])
        STATS.add("in_flight")
        try:
            self.dispatch_endpoint()
        finally:
            STATS.add("in_flight", -1)

    def dispatch_endpoint(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        parts = [p for p in url.path.split("/") if p]
        head = parts[0] if parts else ""
        try:
            if head == "echo":
                return self.ep_echo()
            if head == "status" and len(parts) == 2:
                return self.ep_status(int(parts[1]))
            if head == "bytes" and len(parts) == 2:
                return self.ep_bytes(int(parts[1]), query)
            if head == "slow-head" and len(parts) == 2:
                self.read_body()
                time.sleep(int(parts[1]) / 1000.0)
                return self.send_json(200, {"slept_ms": int(parts[1])})
            if head == "held" and len(parts) == 2:
                self.read_body()
                released = release_gate(parts[1]).wait(120)
                return self.send_json(200, {"held": parts[1], "released": released})
            if head == "sse":
                return self.ep_sse(query)
            if head == "chunked":
                return self.ep_chunked(query)
            if head == "ws":
                return self.ep_ws()
            if head == "_stats":
                return self.send_json(200, STATS.snapshot())
            if head == "_reset":
                STATS.reset()
                return self.send_json(200, {"ok": True})
            if head == "_release" and len(parts) == 2:
                release_gate(parts[1]).set()
                return self.send_json(200, {"released": parts[1]})
            self.read_body()
            return self.send_json(200 if head == "" else 404, {"path": self.path, "upstream": True})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def ep_echo(self):
        body = self.read_body()
        self.send_json(
            200,
            {
                "method": self.command,
                "path": self.path,
                "http_version": self.request_version,
                "headers": [[k, v] for k, v in self.headers.items()],
                "body_length": len(body),
                "body_sha256": hashlib.sha256(body).hexdigest(),
                "peer": list(self.client_address[:2]),
            },
        )

    def ep_status(self, n):
        self.read_body()
        if n < 200 or n in (204, 304):
            self.send_response(n)
            self.end_headers()
            return
        self.send_json(n, {"status": n})

    def ep_bytes(self, n, query):
        self.read_body()
        chunked = query.get("chunked") == "1"
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(n))
        self.end_headers()
        if self.command == "HEAD":
            return
        block = (b"0123456789abcdef" * 4096)[:65536]
        left = n
        while left > 0:
            piece = block[: min(left, len(block))]
            if chunked:
                self.write_chunk(piece)
            else:
                self.write(piece)
            left -= len(piece)
        if chunked:
            self.end_chunks()
        self.wfile.flush()

    def ep_sse(self, query):
        self.read_body()
        count = int(query.get("n", "10"))
        interval = int(query.get("interval_ms", "100")) / 1000.0
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for i in range(count):
            ev = "id: %d\nevent: tick\ndata: %s\n\n" % (i, json.dumps({"i": i, "t": time.time()}))
            self.write_chunk(ev.encode())
            if i + 1 < count:
                time.sleep(interval)
        self.end_chunks()

    def ep_chunked(self, query):
        self.read_body()
        pieces = int(query.get("pieces", "5"))
        delay = int(query.get("delay_ms", "100")) / 1000.0
        size = int(query.get("size", "16"))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for i in range(pieces):
            piece = ("piece %d %.6f\n" % (i, time.time())).encode()
            piece = piece + b"." * max(0, size - len(piece))
            self.write_chunk(piece)
            if i + 1 < pieces:
                time.sleep(delay)
        self.end_chunks()

    def ep_ws(self):
        key = self.headers.get("Sec-WebSocket-Key")
        if (self.headers.get("Upgrade") or "").lower() != "websocket" or not key:
            return self.send_json(400, {"error": "not a websocket upgrade"})
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        sock = self.connection
        rfile = self.rfile
        while True:
            hdr = rfile.read(2)
            if len(hdr) < 2:
                return
            opcode = hdr[0] & 0x0F
            masked = hdr[1] & 0x80
            n = hdr[1] & 0x7F
            if n == 126:
                n = struct.unpack("!H", rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", rfile.read(8))[0]
            mask = rfile.read(4) if masked else b"\0\0\0\0"
            data = bytearray(rfile.read(n))
            for i in range(len(data)):
                data[i] ^= mask[i % 4]
            if opcode == 0x8:  # close: echo it and stop
                self.ws_send(sock, 0x8, bytes(data[:2]))
                return
            if opcode == 0x9:  # ping
                self.ws_send(sock, 0xA, bytes(data))
                continue
            if opcode in (0x1, 0x2, 0x0):
                self.ws_send(sock, opcode if opcode else 0x2, bytes(data))

    def ws_send(self, sock, opcode, data):
        n = len(data)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | opcode, n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        sock.sendall(hdr + data)
        STATS.add("bytes_written", len(hdr) + n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    srv = Server((args.host, args.port), Handler)
    print("listening %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
