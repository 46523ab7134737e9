# The upload origin of tests/bench/run's section "upload": an HTTP/1.1 server
# (one thread per connection, keep-alive) that reads every request body to its
# end and discards it (Content-Length or chunked; answers Expect: 100-continue)
# and then answers 200 with the number of body bytes it read. Each request
# appends "<user-agent> <bytes> <seconds from head to first body byte>" to LOG.
# Usage: upload_origin.py PORT READY_FILE LOG
import os, socket, socketserver, sys, threading, time

BUF = 1 << 20
LOCK = threading.Lock()


class Handler(socketserver.BaseRequestHandler):
    def setup(self):
        self.buf = bytearray(BUF)
        self.view = memoryview(self.buf)
        self.pending = b""  # bytes read past what the current step needed

    def recv_some(self, limit=BUF):
        if self.pending:
            data, self.pending = self.pending[:limit], self.pending[limit:]
            return len(data)
        return self.request.recv_into(self.view, limit)

    def line(self):
        while b"\r\n" not in self.pending:
            data = self.request.recv(65536)
            if not data:
                raise EOFError
            self.pending += data
        line, _, self.pending = self.pending.partition(b"\r\n")
        return line

    def discard(self, n):
        """Reads and drops n body bytes; returns the monotonic time of the first one."""
        first = None
        while n > 0:
            got = self.recv_some(min(n, BUF))
            if got == 0:
                raise EOFError
            if first is None:
                first = time.monotonic()
            n -= got
        return first

    def handle(self):
        try:
            while self.one():
                pass
        except (EOFError, ConnectionError):
            pass

    def one(self):
        try:
            start = self.line()
        except EOFError:
            return False
        headers = {}
        while True:
            h = self.line()
            if not h:
                break
            name, _, value = h.partition(b":")
            headers[name.strip().lower()] = value.strip()
        t0 = time.monotonic()
        if headers.get(b"expect", b"").lower() == b"100-continue":
            self.request.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        total, first = 0, None
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            while True:
                size = int(self.line().split(b";")[0], 16)
                if size == 0:
                    while self.line():  # trailers
                        pass
                    break
                f = self.discard(size)
                first = first or f
                total += size
                self.line()
        else:
            total = int(headers.get(b"content-length", b"0"))
            first = self.discard(total)
        body = b"%d" % total
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))
        ua = headers.get(b"user-agent", b"-").decode(errors="replace").replace(" ", "_")
        with LOCK, open(LOG, "a") as f:
            f.write("%s %d %.3f %s\n" % (ua, total, (first - t0) if first else -1,
                                         start.split(b" ")[1].decode(errors="replace")))
        return True


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def server_bind(self):
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        super().server_bind()


port, ready, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3]
srv = Server(("127.0.0.1", port), Handler)
with open(ready + ".tmp", "w") as f:
    f.write("listening\n")
os.rename(ready + ".tmp", ready)
srv.serve_forever()
