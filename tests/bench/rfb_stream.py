#!/usr/bin/python3
"""A full-HD framebuffer update stream for tests/bench/run (section
"desktop", tests/bench/desktop.sh): an RFB origin and the measuring client in
one program. The payload is never parsed in Python: the client reads it with
recv_into into one buffer, so that the proxy, not Python, is measured.

    rfb_stream.py origin PORT READY_FILE
        an RFB 3.8 server (security None) with a 1920x1080 32 bpp screen: for
        each FramebufferUpdateRequest it sends one whole raw update (8 MiB);
        other client messages are read and ignored
    rfb_stream.py client KIND PORT HOST FRAMES [TOKEN]
        KIND direct: RFB over a TCP connection to PORT
        KIND ws: RFB over a WebSocket (subprotocol binary) to the gateway's
        plain listener PORT, Host HOST, with X-Lizard-Access-Token TOKEN
        After the handshake it sends FRAMES x (a FramebufferUpdateRequest and
        4 PointerEvents: a viewer moving its mouse; a view-only link's
        gateway walks and drops them) at once, then reads the FRAMES updates.
        prints "<MiB/s> <update bytes read>"
"""

import base64
import hashlib
import socket
import struct
import sys
import threading
import time

WIDTH, HEIGHT = 1920, 1080
PIXEL_FORMAT = bytes([32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0])
UPDATE_HEAD = struct.pack(">BxH", 0, 1) + struct.pack(">HHHHi", 0, 0, WIDTH, HEIGHT, 0)
UPDATE_SIZE = len(UPDATE_HEAD) + WIDTH * HEIGHT * 4
KEY = "dGhlIHNhbXBsZSBub25jZQ=="
FBUR = struct.pack(">BBHHHH", 3, 0, 0, 0, WIDTH, HEIGHT)
POINTERS = b"".join(struct.pack(">BBHH", 5, 0, 100 + i, 100 + i) for i in range(4))


def read_exact(c, n):
    buf = b""
    while len(buf) < n:
        d = c.recv(n - len(buf))
        if not d:
            raise EOFError
        buf += d
    return buf


# --- origin ---------------------------------------------------------------------------------------

# the sizes of the client messages the origin skips: type -> (head bytes, size from the head)
SIZES = {
    0: (1, lambda h: 20),
    2: (4, lambda h: 4 + 4 * struct.unpack(">H", h[2:4])[0]),
    3: (1, lambda h: 10),
    4: (1, lambda h: 8),
    5: (1, lambda h: 6),
    6: (8, lambda h: 8 + struct.unpack(">I", h[4:8])[0]),
}


def serve_rfb(c, pixels):
    try:
        c.sendall(b"RFB 003.008\n")
        read_exact(c, 12)
        c.sendall(b"\x01\x01")
        read_exact(c, 1)
        c.sendall(struct.pack(">I", 0))
        read_exact(c, 1)
        c.sendall(struct.pack(">HH", WIDTH, HEIGHT) + PIXEL_FORMAT + struct.pack(">I", 5) + b"bench")
        while True:
            t = read_exact(c, 1)[0]
            need, size = SIZES[t]
            head = bytes([t]) + read_exact(c, need - 1)
            read_exact(c, size(head) - need)
            if t == 3:
                c.sendall(UPDATE_HEAD)
                c.sendall(pixels)
    except (EOFError, OSError, KeyError):
        pass
    finally:
        c.close()


def origin(port, ready):
    pixels = bytes(range(256)) * (WIDTH * HEIGHT * 4 // 256)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    open(ready, "w").close()
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve_rfb, args=(c, pixels), daemon=True).start()


# --- client ---------------------------------------------------------------------------------------


class Direct:
    def __init__(self, s):
        self.s = s

    def send(self, data):
        self.s.sendall(data)

    def read(self, n):
        return read_exact(self.s, n)

    def drain(self, n, buf):
        view = memoryview(buf)
        while n > 0:
            k = self.s.recv_into(view[:min(n, len(buf))])
            if k == 0:
                raise EOFError
            n -= k


class OverWebSocket:
    """RFB bytes in the payloads of the gateway's binary frames; frame heads
    read with small exact reads, payloads with recv_into."""

    def __init__(self, s):
        self.s = s
        self.left = 0

    def send(self, data):
        n = len(data)
        head = bytes([0x82, 0x80 | n]) if n < 126 else bytes([0x82, 0x80 | 126]) + struct.pack(">H", n)
        self.s.sendall(head + b"\0\0\0\0" + data)  # masked with the key 0: the payload as it is

    def _next_frame(self):
        while True:
            b0, b1 = read_exact(self.s, 2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", read_exact(self.s, 2))[0]
            elif n == 127:
                n = struct.unpack(">Q", read_exact(self.s, 8))[0]
            op = b0 & 0x0F
            if op in (0x0, 0x2):
                self.left = n
                return
            payload = read_exact(self.s, n) if n else b""
            if op == 0x8:
                raise EOFError("closed: %r" % payload)
            if op == 0x9:
                self.s.sendall(bytes([0x8A, 0x80 | n]) + b"\0\0\0\0" + payload)

    def read(self, n):
        out = b""
        while len(out) < n:
            if self.left == 0:
                self._next_frame()
                continue
            k = min(n - len(out), self.left)
            out += read_exact(self.s, k)
            self.left -= k
        return out

    def drain(self, n, buf):
        view = memoryview(buf)
        while n > 0:
            if self.left == 0:
                self._next_frame()
                continue
            k = self.s.recv_into(view[:min(n, self.left, len(buf))])
            if k == 0:
                raise EOFError
            n -= k
            self.left -= k


def connect(kind, port, host, token):
    s = socket.create_connection(("127.0.0.1", port))
    if kind == "direct":
        return Direct(s)
    s.sendall(("GET /.lizard/rfb HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: binary\r\n%s\r\n"
               % (host, KEY, "X-Lizard-Access-Token: %s\r\n" % token if token else "")).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)  # byte by byte: nothing of the tunnel is read with the head
        if not d:
            sys.exit("closed during the handshake: %r" % head)
        head += d
    if not head.startswith(b"HTTP/1.1 101"):
        sys.exit("no 101: %r" % head[:300])
    accept = base64.b64encode(hashlib.sha1((KEY + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    if accept not in head:
        sys.exit("a wrong Sec-WebSocket-Accept: %r" % head[:300])
    return OverWebSocket(s)


def client(kind, port, host, frames, token):
    c = connect(kind, port, host, token)
    if c.read(12) != b"RFB 003.008\n":
        sys.exit("not an RFB 3.8 server")
    c.send(b"RFB 003.008\n")
    c.read(2)
    c.send(b"\x01")
    c.read(4)
    c.send(b"\x01")
    w, h = struct.unpack(">HH", c.read(4))
    c.read(16)
    c.read(struct.unpack(">I", c.read(4))[0])
    if (w, h) != (WIDTH, HEIGHT):
        sys.exit("a %dx%d screen" % (w, h))
    buf = bytearray(1 << 20)
    t0 = time.monotonic()
    c.send((FBUR + POINTERS) * frames)
    for _ in range(frames):
        if c.read(len(UPDATE_HEAD)) != UPDATE_HEAD:
            sys.exit("not a full-screen raw update")
        c.drain(UPDATE_SIZE - len(UPDATE_HEAD), buf)
    dt = time.monotonic() - t0
    print("%.1f %d" % (frames * UPDATE_SIZE / 1048576 / dt, frames * UPDATE_SIZE))


if __name__ == "__main__":
    if sys.argv[1] == "origin":
        origin(int(sys.argv[2]), sys.argv[3])
    else:
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6] if len(sys.argv) > 6 else None)
