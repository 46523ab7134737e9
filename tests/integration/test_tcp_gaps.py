"""Raw TCP ports (issue 25), the parts test_tcp_tunnel.py and
test_tcp_forward.py leave out:

- a sandbox port that never answers the SYN: 504 upstream_timeout after
  upstream.connect_timeout_ms and no 101 (the tunnel is connected before the
  101), and a clear line from tcp-forward;
- back-pressure both ways: a client that does not read stalls the sandbox's
  writes (and the other way round), the gateway's memory stays bounded, and
  once the slow side reads, all 64 MiB arrive intact and are metered.

Real processes: the gateway, redis-server, redis-cli and tcp-forward; the
sandbox's services are plain sockets of this test, the client a raw TLS
socket speaking the WebSocket frames itself (so that it can stop reading)."""

import hashlib
import os
import socket
import ssl
import threading
import time


import gwtest
from test_metering import records, total
from test_tcp_forward import forward_to, forwards, redis_cli  # noqa: F401 (forwards is a fixture)
from test_tcp_tunnel import PROTO, TOKEN_HEADER, masked, raw_tunnel, tcp_sandbox

MIB = 1024 * 1024
FLOOD = 64 * MIB
# What the kernel may absorb between a stalled reader and the writer: the writer's send buffer
# (autotuned up to tcp_wmem's 4 MiB), the gateway's receive buffer toward the sandbox (set from
# limits.response_buffer_bytes, at most 2 MiB), its send buffer toward the reader (4 MiB), the
# reader's receive buffer, plus what the gateway holds in user space (one read, one TLS write).
# Well below the 64 MiB flood: a gateway that kept reading while the reader does not would let
# the writer finish.
STALL_BOUND = 24 * MIB


# --- 504: the sandbox never answers the SYN -------------------------------------------------




def handshake_answer(g, host, token, ca):
    """The gateway's answer to the tunnel handshake: (status line, head, body)."""
    ctx = ssl.create_default_context(cafile=ca)
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", g.tls_port), timeout=30), server_hostname=host) as s:
        s.sendall(("GET /.lizard/tcp HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Protocol: %s\r\n%s: %s\r\nAccept: application/json\r\n\r\n"
                   % (host, PROTO, TOKEN_HEADER, token)).encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            assert d, "closed before an answer: %r" % buf
            buf += d
        head, _, body = buf.partition(b"\r\n\r\n")
        length = [int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")]
        while length and len(body) < length[0]:
            d = s.recv(65536)
            if not d:
                break
            body += d
        return head.split(b"\r\n")[0].decode(), head.decode(), body


def test_connect_timeout_is_504_without_101(gw_factory, register_sandbox, certs, redis, workdir, forwards):
    import json

    g = gw_factory({"upstream": {"connect_timeout_ms": 400}})
    with gwtest.blackhole_port() as port:
        sid, token = tcp_sandbox(register_sandbox, port)
        host = g.host(port, sid)
        status, head, body = handshake_answer(g, host, token, certs["ca"])
        assert status.startswith("HTTP/1.1 504"), head
        assert "sec-websocket-accept" not in head.lower(), head
        err = json.loads(body)["error"]
        assert (err["code"], err["sandboxId"], err["port"]) == ("upstream_timeout", sid, port), err

        fwd = forward_to(forwards, workdir, g, certs, port, sid, token)
        r = redis_cli(fwd.port, "PING")
        assert b"PONG" not in r.stdout
        fwd.wait_line("504 upstream_timeout")
        assert "port %d of sandbox %s did not accept the connection in time" % (port, sid) in fwd.text(), fwd.text()
        assert fwd.proc.poll() is None  # one refused tunnel; the listener stays


# --- back-pressure ----------------------------------------------------------------------------


class Counter:
    def __init__(self):
        self.n = 0
        self.error = None


def wait_stalled(counter, what, quiet_s=1.5, timeout=45):
    """Waits until counter.n stops growing for quiet_s; returns it."""
    last, since, t0 = -1, time.monotonic(), time.monotonic()
    while time.monotonic() - t0 < timeout:
        assert counter.error is None, counter.error
        n = counter.n
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return n
        time.sleep(0.1)
    raise AssertionError("%s never stalled (at %d bytes)" % (what, counter.n))


class Listener:
    """The sandbox's service: one connection, handled by fn(conn) in a thread."""

    def __init__(self, fn, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # inherited by the accepted one
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn):
        self.sock.settimeout(60)
        conn, _ = self.sock.accept()
        with conn:
            fn(conn)

    def close(self):
        self.sock.close()
        self.thread.join(60)


def read_until_close(s, buf):
    """Reads binary frames until the gateway's Close; returns (sha256 hex, payload bytes, close code).
    Pings are skipped (default interval 25 s); anything else is a failure. Then the client answers the
    Close and reads to EOF, as a well-behaved client does (so that TCP acknowledges everything and
    the delivered bytes are billed: metering counts what the client's TCP acknowledged)."""
    h, got, buf = hashlib.sha256(), 0, bytearray(buf)
    while True:
        if len(buf) >= 2:
            n, off = buf[1] & 0x7F, 2
            if n == 126:
                n, off = (int.from_bytes(buf[2:4], "big"), 4) if len(buf) >= 4 else (None, 0)
            elif n == 127:
                n, off = (int.from_bytes(buf[2:10], "big"), 10) if len(buf) >= 10 else (None, 0)
            if n is not None and len(buf) >= off + n:
                op = buf[0] & 0x0F
                assert op in (0x2, 0x8, 0x9), "unexpected frame opcode %d after %d bytes" % (op, got)
                payload = bytes(buf[off:off + n])
                del buf[:off + n]
                if op == 0x2:
                    h.update(payload)
                    got += n
                elif op == 0x8:
                    s.sendall(masked(0x8, payload[:2]))
                    while s.recv(65536):
                        pass
                    return h.hexdigest(), got, int.from_bytes(payload[:2], "big")
                continue
        d = s.recv(1 << 20)
        assert d, "the tunnel closed without a Close frame after %d bytes" % got
        buf += d


def test_slow_client_stalls_the_sandbox_then_gets_everything(gateway, register_sandbox, certs, redis):
    data = os.urandom(FLOOD)
    sent = Counter()

    def flood(conn):
        try:
            view = memoryview(data)
            while sent.n < FLOOD:
                sent.n += conn.send(view[sent.n:sent.n + MIB])
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)  # until the gateway closes
        except OSError as e:
            sent.error = e

    srv = Listener(flood)
    try:
        sid, token = tcp_sandbox(register_sandbox, srv.port)
        host = gateway.host(srv.port, sid)
        base = gwtest.rss_kib(gateway.proc.pid)
        s, rest = raw_tunnel(gateway, host, token, certs["ca"])
        with s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            # the client reads nothing: the sandbox's sends stop well short of the flood
            stalled = wait_stalled(sent, "the sandbox's writes")
            rss = gwtest.rss_kib(gateway.proc.pid)
            print("sandbox -> slow client: sandbox stalled at %.1f MiB; gateway RSS %d -> %d KiB" % (
                stalled / MIB, base, rss))
            assert stalled < STALL_BOUND, "the sandbox wrote %d bytes to a client that reads nothing" % stalled
            # generous: the gateway holds one read and one TLS write per direction (well under 1 MiB);
            # 64 MiB more would be the whole flood held in memory
            assert rss < base + 64 * 1024, (base, rss)
            digest, got, code = read_until_close(s, rest)
        assert got == FLOOD and digest == hashlib.sha256(data).hexdigest(), "the flood came back altered (%d bytes)" % got
        assert code == 1000  # the sandbox's FIN after the flood
        assert sent.n == FLOOD
    finally:
        srv.close()
    gwtest.wait_for(lambda: int(redis.cmd("GET", "lizard:egress:{%s}" % sid) or 0) >= FLOOD, 30,
                    what="the 64 MiB metered as egress of %s" % sid)


def test_fast_client_stalls_on_a_slow_sandbox_then_everything_arrives(gateway, register_sandbox, certs, redis):
    data = os.urandom(FLOOD)
    sent = Counter()
    start_reading, received = threading.Event(), {}

    def slow_reader(conn):
        start_reading.wait(60)
        h, n = hashlib.sha256(), 0
        while n < FLOOD:
            d = conn.recv(1 << 20)
            if not d:
                break
            h.update(d)
            n += len(d)
        received.update(n=n, sha=h.hexdigest())

    srv = Listener(slow_reader, rcvbuf=65536)
    try:
        sid, token = tcp_sandbox(register_sandbox, srv.port)
        host = gateway.host(srv.port, sid)
        base = gwtest.rss_kib(gateway.proc.pid)
        s, _ = raw_tunnel(gateway, host, token, certs["ca"])

        def writer():
            # binary frames of 64 KiB with a zero mask (payload sent as is)
            try:
                for off in range(0, FLOOD, 65536):
                    s.sendall(b"\x82\xff" + (65536).to_bytes(8, "big") + b"\0\0\0\0" + data[off:off + 65536])
                    sent.n = off + 65536
            except OSError as e:
                sent.error = e

        w = threading.Thread(target=writer, daemon=True)
        w.start()
        with s:
            stalled = wait_stalled(sent, "the client's writes")
            rss = gwtest.rss_kib(gateway.proc.pid)
            print("fast client -> slow sandbox: client stalled at %.1f MiB; gateway RSS %d -> %d KiB" % (
                stalled / MIB, base, rss))
            assert stalled < STALL_BOUND, "the client wrote %d bytes to a sandbox that reads nothing" % stalled
            assert rss < base + 64 * 1024, (base, rss)  # generous, as above
            start_reading.set()
            w.join(60)
            assert sent.error is None and sent.n == FLOOD, (sent.n, sent.error)
            srv.thread.join(60)
        assert received.get("n") == FLOOD and received["sha"] == hashlib.sha256(data).hexdigest(), \
            "the sandbox got %r bytes, altered or short" % received.get("n")
    finally:
        start_reading.set()
        srv.close()
    gwtest.wait_for(lambda: total(records(redis, sid), "ingress") >= FLOOD, 30,
                    what="the 64 MiB metered as ingress of %s" % sid)


# --- tcp-forward --stdio as ssh's ProxyCommand ------------------------------------------------


def test_ssh_proxycommand_with_stdio(workdir, gateway, certs, redis):
    """`ssh -o ProxyCommand="lizard-gateway tcp-forward --stdio ..."`: one
    tunnel over the command's stdin/stdout, no listener, a command runs."""
    import shlex
    import subprocess

    from test_tcp_forward import CLIENT_TIMEOUT_S, start_sshd, tcp_url
    from test_tcp_forward import tcp_sandbox as forward_sandbox

    d = os.path.join(workdir, "tcp-stdio-sshd")
    sshd, ssh_port, key = start_sshd(d)
    try:
        sid, token = forward_sandbox(redis, ssh_port)
        log = os.path.join(d, "proxycommand.log")
        proxy = " ".join(shlex.quote(a) for a in [
            gwtest.gateway_binary(), "tcp-forward", "--stdio", "--url", tcp_url(gateway, ssh_port, sid), "--token-env",
            "SANDBOX_TOKEN", "--ca", certs["ca"], "--connect", "127.0.0.1:%d" % gateway.tls_port]) + " 2>>" + log
        env = dict(os.environ, SANDBOX_TOKEN=token)
        env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=0")
        user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
        r = subprocess.run(["ssh", "-F", "/dev/null", "-i", key, "-o", "ProxyCommand=" + proxy, "-o",
                            "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
                            "-o", "LogLevel=ERROR", "%s@sandbox" % user, 
                            "echo hello from $((6 * 7)); head -c 300000 /dev/zero"],
                           capture_output=True, timeout=CLIENT_TIMEOUT_S, env=env)
        with open(log, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        assert r.returncode == 0, (r, text, gwtest.tail(os.path.join(d, "sshd.log")))
        assert r.stdout == b"hello from 42\n" + b"\0" * 300000, (len(r.stdout), text)
        # (ssh ends its ProxyCommand with a signal when the session is over: no closing line to expect)
        assert token not in text
        for marker in gwtest.SANITIZER_MARKERS:
            assert marker not in text, text
    finally:
        gwtest.stop_process(sshd)
