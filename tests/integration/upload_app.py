#!/usr/bin/python3
"""An HTTP/1.1 app that receives uploads, for tests/integration/test_uploads.py:
it reads request bodies as they come (Content-Length or chunked) and writes
what it saw to an events file, one JSON line per event, so that a test
knows the order of events across processes without a clock:

    {"id": <X-Upload-Id>, "event": "first_byte", "bytes": n}   its first body bytes
    {"id": ..., "event": "done", "bytes": n, "sha256": hex, "framing": "length"|"chunked"}
    {"id": ..., "event": "progress", "bytes": n}                each MiB received
    {"id": ..., "event": "closed", "bytes": n}                 the body ended early (EOF)

    upload_app.py --port 0 --events FILE

Prints "listening <port>" once it accepts connections. Query of any POST/PUT:
  ?read_delay_ms=N   sleeps N ms between reads of 64 KiB (a slow app)
  ?stop=1            reads nothing of the body (an app that stopped reading)
  ?answer_first=1    sends a 200 head and a first chunk at once, then reads the body,
                     then ends its (chunked) answer: the response is out, and not over,
                     while the client still sends
The answer (after the body, unless answer_first): JSON {"bytes", "sha256", "framing"}.
Any other request: 200 "ok".
"""

import argparse
import hashlib
import json
import socket
import sys
import threading
import time
import urllib.parse

EVENTS = None
LOCK = threading.Lock()


def event(**kw):
    with LOCK, open(EVENTS, "a") as f:
        f.write(json.dumps(kw) + "\n")


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self, n=65536):
        data = self.sock.recv(n)
        if not data:
            raise EOFError
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        ln, self.buf = self.buf.split(b"\r\n", 1)
        return ln

    def take(self, most):
        if not self.buf:
            self.fill(min(most, 65536))
        piece, self.buf = self.buf[:most], self.buf[most:]
        return piece


def body_pieces(c, headers):
    """Yields the body's bytes as they arrive."""
    if "chunked" in headers.get("transfer-encoding", ""):
        while True:
            size = int(c.line().split(b";")[0], 16)
            if size == 0:
                while c.line() != b"":
                    pass
                return
            left = size
            while left:
                piece = c.take(left)
                left -= len(piece)
                yield piece
            c.line()
    left = int(headers.get("content-length", "0"))
    while left:
        piece = c.take(min(left, 65536))
        left -= len(piece)
        yield piece


def answer(sock, status, body, close=False):
    head = "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % (status, len(body))
    if close:
        head += "Connection: close\r\n"
    sock.sendall(head.encode() + b"\r\n" + body)


def handle(sock):
    c = Conn(sock)
    while True:
        try:
            first = c.line()
        except (EOFError, OSError):
            return
        method, target, _ = first.decode().split(" ", 2)
        headers = {}
        while True:
            ln = c.line()
            if not ln:
                break
            k, v = ln.decode("latin-1").split(":", 1)
            headers[k.strip().lower()] = v.strip()
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(target).query))
        if method not in ("POST", "PUT"):
            answer(sock, 200, b'"ok"')
            continue
        uid = headers.get("x-upload-id", "")
        framing = "chunked" if "chunked" in headers.get("transfer-encoding", "") else "length"
        if query.get("stop") == "1":
            event(id=uid, event="stopped")
            try:
                while sock.recv(1, socket.MSG_PEEK):
                    time.sleep(0.2)
            except OSError:
                pass
            return
        if query.get("answer_first") == "1":
            sock.sendall(b"HTTP/1.1 200 X\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nearly\n\r\n")
        delay = int(query.get("read_delay_ms", "0")) / 1000.0
        h, n = hashlib.sha256(), 0
        try:
            for piece in body_pieces(c, headers):
                if n == 0:
                    event(id=uid, event="first_byte", bytes=len(piece))
                h.update(piece)
                if (n + len(piece)) >> 20 != n >> 20:
                    event(id=uid, event="progress", bytes=n + len(piece))
                n += len(piece)
                if delay:
                    time.sleep(delay)
        except (EOFError, OSError, ValueError):
            event(id=uid, event="closed", bytes=n)
            return
        event(id=uid, event="done", bytes=n, sha256=h.hexdigest(), framing=framing)
        if query.get("answer_first") == "1":
            sock.sendall(b"5\r\ndone\n\r\n0\r\n\r\n")
        else:
            report = {"bytes": n, "sha256": h.hexdigest(), "framing": framing}
            if "expect" in headers:
                report["expect"] = headers["expect"]  # the gateway answers Expect itself and strips it
            answer(sock, 200, json.dumps(report).encode())


def serve(sock):
    try:
        handle(sock)
    finally:
        sock.close()


def main():
    global EVENTS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--events", required=True)
    args = ap.parse_args()
    EVENTS = args.events
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", args.port))
    ls.listen(128)
    print("listening %d" % ls.getsockname()[1], flush=True)
    while True:
        s, _ = ls.accept()
        threading.Thread(target=serve, args=(s,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
