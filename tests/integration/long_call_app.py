#!/usr/bin/python3
"""A code-execution API as sandboxes run them, for the long-call tests
(test_long_calls.py): keep-alive HTTP/1.1, one thread per connection,
stdlib only. It notices its caller leaving the way such servers do (a
readable socket that reads EOF) and says when.

    long_call_app.py [--port 0]        prints "listening <port>"

  POST /execute?silent_s=S&id=I   200 application/x-ndjson (or ?type=), chunked: one line
                                  {"type":"started"}, then S seconds of
                                  silence, then {"type":"result",...} and
                                  the end of the body
  POST /exec?after_s=S&id=I       blocks S seconds, then 200 application/json
                                  {"exit_code":0,...} (a blocking run)
  GET  /hold-head?id=I            never answers; watches its connection
  GET  /hold-body?id=I            200 application/json, chunked: the first
                                  bytes of a JSON document, then silence;
                                  watches its connection
  GET  /die-body                  200 application/json, chunked: a first chunk,
                                  then the connection closes (no last chunk)
  GET  /bytes?text=T              answers T raw (not HTTP) and closes
  GET  /_closed?id=I              {"closed_at": monotonic seconds when the
                                  connection of request I was seen closed,
                                  or null; "requests": seen}
A request that is watched (hold-*, execute, exec) ends when its connection
closes, as a kernel that stops the work when its caller leaves.
"""

import argparse
import json
import select
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
CLOSED = {}  # id -> time.monotonic() when its connection was seen closed
SEEN = {}  # id -> time.monotonic() when its request arrived


def client_gone(sock, wait_s):
    """Waits up to wait_s; True (and when) as soon as the peer closed."""
    end = time.monotonic() + wait_s
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([sock], [], [], min(left, 0.02))
        if r:
            try:
                data = sock.recv(1, socket.MSG_PEEK)
            except OSError:
                return True
            if data == b"":
                return True
            # bytes of a next request: keep waiting (keep-alive)
            time.sleep(min(left, 0.02))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def query(self):
        return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, encoding="latin-1").items()}

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, rid, seconds):
        """Silent for `seconds`, watching the caller; True when it left."""
        with LOCK:
            SEEN[rid] = time.monotonic()
        if client_gone(self.connection, seconds):
            with LOCK:
                CLOSED[rid] = time.monotonic()
            self.close_connection = True
            return True
        return False

    def do_POST(self):
        path, q = urllib.parse.urlsplit(self.path).path, self.query()
        self.read_body()
        rid = q.get("id", "")
        if path == "/execute":
            self.send_response(200)
            self.send_header("Content-Type", q.get("type", "application/x-ndjson"))
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunk(b'{"type":"started"}\n')
            if self.watch(rid, float(q.get("silent_s", "0"))):
                return
            self.chunk(json.dumps({"type": "result", "text": "done after %s s" % q.get("silent_s")}).encode() + b"\n")
            self.wfile.write(b"0\r\n\r\n")
        elif path == "/exec":
            if self.watch(rid, float(q.get("after_s", "0"))):
                return
            body = json.dumps({"exit_code": 0, "stdout": "done after %s s" % q.get("after_s")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404)

    def do_GET(self):
        path, q = urllib.parse.urlsplit(self.path).path, self.query()
        rid = q.get("id", "")
        if path == "/hold-head":
            self.watch(rid, 600)
            self.close_connection = True
        elif path == "/hold-body":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunk(b'{"rows": [1, 2, 3')
            self.watch(rid, 600)
            self.close_connection = True
        elif path == "/die-body":
            # a chunked body cut by the app: its connection closes mid-body
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunk(b'{"rows": [1')
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        elif path == "/bytes":
            self.wfile.write(q.get("text", "").encode("latin-1"))
            self.wfile.flush()
            self.close_connection = True
        elif path == "/_closed":
            with LOCK:
                body = json.dumps({"closed_at": CLOSED.get(rid), "seen_at": SEEN.get(rid)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    ThreadingHTTPServer.daemon_threads = True
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print("listening %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
