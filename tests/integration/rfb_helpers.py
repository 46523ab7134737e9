"""Desktops (proto:<n> = rfb, CONTRACT.md "Desktops") in tests: Debian's
TigerVNC Xvnc as a sandbox's desktop, a small RFB server that echoes what
the gateway let through (to see a view-only viewer's bytes exactly), and an
RFB client over a WebSocket (python3-websockets) or a raw TLS socket."""

import os
import random
import socket
import ssl
import struct
import subprocess
import threading
import time

import gwtest

TOKEN_HEADER = "X-Lizard-Access-Token"


# ---------------------------------------------------------------------------
# Xvnc: a real X server with a VNC server inside, no password, localhost only


class Xvnc:
    def __init__(self, workdir, width=640, height=480, always_shared=True):
        self.workdir = workdir
        # False: Xvnc's defaults, where a client that asks for the desktop alone
        # (ClientInit shared 0) has every other client disconnected
        self.always_shared = always_shared
        self.port = gwtest.free_port()
        self.display = None
        self.proc = None
        self.geometry = "%dx%d" % (width, height)
        self.log = os.path.join(workdir, "xvnc-%d.log" % self.port)

    def start(self):
        rng = random.Random()
        for _ in range(100):
            n = rng.randrange(200, 5000)
            if not os.path.exists("/tmp/.X%d-lock" % n) and not os.path.exists("/tmp/.X11-unix/X%d" % n):
                break
        self.display = ":%d" % n
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(["Xvnc", self.display, "-rfbport", str(self.port), "-SecurityTypes", "None", "-localhost",
                                      "-geometry", self.geometry, "-depth", "24", "-nolisten", "tcp", "-AcceptSetDesktopSize=0"] +
                                     (["-AlwaysShared"] if self.always_shared else []),
                                     stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()

        def up():
            if self.proc.poll() is not None:
                raise RuntimeError("Xvnc exited %s:\n%s" % (self.proc.returncode, gwtest.tail(self.log)))
            return gwtest.port_open(self.port) and self.x("xdpyinfo", check=False).returncode == 0

        gwtest.wait_for(up, 20, what="Xvnc on %s (port %d)" % (self.display, self.port))
        return self

    def env(self):
        env = dict(os.environ)
        env["DISPLAY"] = self.display
        return env

    def x(self, *args, check=True, timeout=20):
        return subprocess.run(list(args), env=self.env(), capture_output=True, text=True, timeout=timeout, check=check)

    def root_color(self, color):
        self.x("xsetroot", "-solid", color)

    def pointer(self):
        """(x, y) of the X pointer, from xdotool."""
        out = self.x("xdotool", "getmouselocation", "--shell").stdout
        vals = dict(ln.split("=", 1) for ln in out.split() if "=" in ln)
        return int(vals["X"]), int(vals["Y"])

    def stop(self):
        if self.proc is not None:
            gwtest.stop_process(self.proc)
            self.proc = None


# ---------------------------------------------------------------------------
# An RFB server that echoes what it receives after the handshake


class EchoRfbServer:
    """Speaks the server's side of the handshake (3.3, 3.7 or 3.8 as the
    client picks; security None or VNC authentication, any response
    accepted), sends a ServerInit, then writes back every byte it receives:
    the client reads what the gateway let through."""

    def __init__(self, security=1, version=b"RFB 003.008\n", greeting=True):
        self.security = security
        self.version = version
        self.greeting = greeting
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", gwtest.free_port()))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.received = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _read(c, n):
        buf = b""
        while len(buf) < n:
            d = c.recv(n - len(buf))
            if not d:
                raise EOFError
            buf += d
        return buf

    def _serve(self, c):
        try:
            if not self.greeting:
                time.sleep(60)
                return
            c.sendall(self.version)
            minor = self._read(c, 12)[10] - ord("0")
            if minor == 3:
                c.sendall(struct.pack(">I", self.security))
            else:
                c.sendall(bytes([1, self.security]))
                if self._read(c, 1)[0] != self.security:
                    return
            if self.security == 2:
                c.sendall(b"\x42" * 16)
                self._read(c, 16)
            if minor == 8 or self.security == 2:
                c.sendall(struct.pack(">I", 0))
            self._read(c, 1)  # ClientInit
            name = b"echo"
            pf = bytes([32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0])
            c.sendall(struct.pack(">HH", 64, 48) + pf + struct.pack(">I", len(name)) + name)
            while True:
                d = c.recv(1 << 20)
                if not d:
                    return
                with self.lock:
                    self.received += len(d)
                c.sendall(d)
        except (EOFError, OSError):
            pass
        finally:
            c.close()


# ---------------------------------------------------------------------------
# Client messages (RFC 6143 7.5 and the registered extensions)

SET_PIXEL_FORMAT = bytes([0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0])
SET_ENCODINGS_RAW = struct.pack(">BBHi", 2, 0, 1, 0)


def fbur(x=0, y=0, w=1, h=1, incremental=0):
    return struct.pack(">BBHHHH", 3, incremental, x, y, w, h)


def key_event(keysym, down=1):
    return struct.pack(">BBHI", 4, down, 0, keysym)


def pointer_event(x, y, mask=0):
    return struct.pack(">BBHH", 5, mask, x, y)


def cut_text(text):
    return struct.pack(">BxxxI", 6, len(text)) + text


def all_messages():
    """(message, passes for a view-only viewer) of every type the gateway sizes."""
    return [
        (SET_PIXEL_FORMAT, True),
        (struct.pack(">BBHiii", 2, 0, 3, 0, 7, -223), True),
        (key_event(0x61), False),
        (fbur(0, 0, 64, 48), True),
        (pointer_event(10, 20, 1), False),
        (cut_text(b"secret clipboard"), False),
        (struct.pack(">BBHHHH", 150, 1, 0, 0, 64, 48), True),
        (struct.pack(">BxxxIB", 248, 0x80000000, 3) + b"abc", True),
        (struct.pack(">BxBB", 250, 1, 2), False),
        (struct.pack(">BxHHBx", 251, 800, 600, 1) + struct.pack(">IHHHHI", 0, 0, 0, 800, 600, 0), False),
        (struct.pack(">BBHI", 255, 0, 1, 0x61) + struct.pack(">I", 30), False),
        (fbur(1, 2, 3, 4, 1), True),
    ]


class Stream:
    """A byte stream over a websockets connection (messages joined)."""

    def __init__(self, ws):
        self.ws = ws
        self.buf = b""

    async def read(self, n, timeout=20):
        import asyncio

        while len(self.buf) < n:
            m = await asyncio.wait_for(self.ws.recv(), timeout)
            assert isinstance(m, bytes), "a text message from the gateway: %r" % m
            self.buf += m
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


async def handshake(ws, minor=8, security=1, shared=1):
    """The client's side against any RFB server (ClientInit's flag `shared`);
    returns (Stream, width, height)."""
    st = Stream(ws)
    v = await st.read(12)
    assert v.startswith(b"RFB 003."), v
    await ws.send(b"RFB 003.00%d\n" % minor)
    if minor == 3:
        assert struct.unpack(">I", await st.read(4))[0] == security
    else:
        n = (await st.read(1))[0]
        assert n > 0
        types = await st.read(n)
        assert security in types, types
        await ws.send(bytes([security]))
    if security == 2:
        await st.read(16)
        await ws.send(b"\x00" * 16)
    if minor == 8 or security == 2:
        assert await st.read(4) == b"\x00\x00\x00\x00"
    await ws.send(bytes([shared]))
    w, h = struct.unpack(">HH", await st.read(4))
    await st.read(16)
    (nlen,) = struct.unpack(">I", await st.read(4))
    await st.read(nlen)
    return st, w, h


async def read_update(st):
    """Reads server messages until a FramebufferUpdate (raw encoding, 32 bpp) has been read whole."""
    while True:
        t = (await st.read(1))[0]
        if t == 0:
            (nrects,) = struct.unpack(">xH", await st.read(3))
            for _ in range(nrects):
                x, y, w, h, enc = struct.unpack(">HHHHi", await st.read(12))
                if enc == 0:
                    await st.read(w * h * 4)
                elif enc not in (-223, -308):
                    raise AssertionError("unexpected encoding %d" % enc)
            return
        if t == 2:  # Bell
            continue
        if t == 3:  # ServerCutText
            (n,) = struct.unpack(">xxxI", await st.read(7))
            await st.read(n)
            continue
        if t == 248:  # ServerFence
            n = struct.unpack(">xxxIB", await st.read(8))[1]
            await st.read(n)
            continue
        if t == 150:  # EndOfContinuousUpdates
            continue
        raise AssertionError("unexpected server message type %d" % t)


def ws_connect(gw, host, ca, token=None, cookie=None, subprotocols=("binary",), path="/.lizard/rfb"):
    import websockets

    ctx = ssl.create_default_context(cafile=ca)
    headers = []
    if token:
        headers.append((TOKEN_HEADER, token))
    if cookie:
        headers.append(("Cookie", cookie))
    return websockets.connect("wss://%s:%d%s" % (host, gw.tls_port, path), host="127.0.0.1", port=gw.tls_port, ssl=ctx,
                              server_hostname=host, extra_headers=headers, subprotocols=list(subprotocols) or None,
                              compression=None, max_size=64 * 1024 * 1024, ping_interval=None, open_timeout=10,
                              close_timeout=5)


def register_desktop(redis, port, access="private", id_prefix="rfb", extra=None):
    sid = gwtest.new_sandbox_id(id_prefix)
    fields = {"proto:%d" % port: "rfb"}
    fields.update(extra or {})
    token = gwtest.register_sandbox(redis, sid, ports={port: access}, extra=fields)
    return sid, token
