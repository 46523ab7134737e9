#!/usr/bin/python3
"""Tunnel throughput for tests/bench/run (section "tunnel"): origins and the
measuring client in one program, no frame parsing in the hot path (the
client counts bytes to EOF), so that the proxies, not Python, are measured.

    tunnel_throughput.py origin TCP_PORT WS_PORT MIB READY_FILE
        TCP_PORT: on connect, sends MIB MiB then closes (a raw TCP service)
        WS_PORT:  answers a WebSocket upgrade with 101, sends MIB MiB as 64 KiB
                  binary frames, then a Close, then closes; an upgrade of
                  /up instead reads MIB MiB of the client's 64 KiB frames
                  (counted as bytes, headers included), then closes
    tunnel_throughput.py client KIND PORT HOST MIB
        KIND tcp: a raw TCP connection (direct or HAProxy mode tcp)
        KIND lizard-tcp: GET /.lizard/tcp (lizard.tcp.v1) on the plain listener
        KIND ws: GET / upgrading to websocket (direct, HAProxy, lizard)
        KIND ws-up: GET /up upgrading to websocket, then sends MIB MiB as
                  masked 64 KiB binary frames and waits for the origin's close
        prints "<MiB/s> <bytes received (ws-up: sent)>"
"""

import base64
import hashlib
import socket
import sys
import threading
import time

CHUNK = 65536
# a client's frame: masked (all zero key: the payload stays as it is), 64 KiB
UP_FRAME = bytes([0x82, 0x80 | 127]) + CHUNK.to_bytes(8, "big") + b"\0\0\0\0" + b"\x5a" * CHUNK
KEY = "dGhlIHNhbXBsZSBub25jZQ=="
ACCEPT = base64.b64encode(hashlib.sha1((KEY + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()


def serve(port, handler):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=handler, args=(c,), daemon=True).start()


def tcp_source(mib):
    block = b"\x5a" * (1024 * 1024)

    def handle(c):
        try:
            for _ in range(mib):
                c.sendall(block)
        finally:
            c.close()

    return handle


def ws_source(mib):
    frame = bytes([0x82, 127]) + CHUNK.to_bytes(8, "big") + b"\x5a" * CHUNK
    block = frame * 16  # 1 MiB of payload

    def handle(c):
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                d = c.recv(4096)
                if not d:
                    return
                head += d
            proto = b"Sec-WebSocket-Protocol: lizard.tcp.v1\r\n" if b"lizard.tcp.v1" in head else b""
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      b"Sec-WebSocket-Accept: " + ACCEPT.encode() + b"\r\n" + proto + b"\r\n")
            if head.startswith(b"GET /up "):
                # what came with the head, then the rest: the frames' bytes, headers included
                left = mib * 16 * len(UP_FRAME) - (len(head) - head.index(b"\r\n\r\n") - 4)
                buf = bytearray(1 << 20)
                while left > 0:
                    n = c.recv_into(buf)
                    if n == 0:
                        return
                    left -= n
                return
            for _ in range(mib):
                c.sendall(block)
            c.sendall(b"\x88\x02\x03\xe8")
        finally:
            c.close()

    return handle


def origin(tcp_port, ws_port, mib, ready):
    threading.Thread(target=serve, args=(tcp_port, tcp_source(mib)), daemon=True).start()
    threading.Thread(target=serve, args=(ws_port, ws_source(mib)), daemon=True).start()
    time.sleep(0.2)
    open(ready, "w").close()
    threading.Event().wait()


def client(kind, port, host, mib):
    s = socket.create_connection(("127.0.0.1", port))
    t0 = time.monotonic()
    got = 0
    if kind != "tcp":
        path = "/.lizard/tcp" if kind == "lizard-tcp" else "/up" if kind == "ws-up" else "/"
        extra = "Sec-WebSocket-Protocol: lizard.tcp.v1\r\n" if kind == "lizard-tcp" else ""
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n" % (path, host, KEY, extra)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(65536)
            if not d:
                sys.exit("closed during the handshake: %r" % head)
            head += d
        if not head.startswith(b"HTTP/1.1 101"):
            sys.exit("no 101: %r" % head[:200])
        got = len(head) - head.index(b"\r\n\r\n") - 4
    if kind == "ws-up":
        block = UP_FRAME * 16  # 1 MiB of payload
        for _ in range(mib):
            s.sendall(block)
        # the origin closes once it has read them all
        while s.recv(65536):
            pass
        dt = time.monotonic() - t0
        s.close()
        print("%.1f %d" % (mib / dt, mib * len(block)))
        return
    buf = bytearray(1 << 20)
    while True:
        n = s.recv_into(buf)
        if n == 0:
            break
        got += n
    dt = time.monotonic() - t0
    s.close()
    if got < mib * 1024 * 1024:
        sys.exit("%s: %d bytes, want at least %d" % (kind, got, mib * 1024 * 1024))
    print("%.1f %d" % (got / 1048576 / dt, got))


if __name__ == "__main__":
    if sys.argv[1] == "origin":
        origin(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
