"""The control-plane examples' one way to Redis (deploy/resume-consumer.py,
deploy/lizard-issuer.py): a tiny RESP client, their common command-line
options, and the consumer-group loop they both run over a stream.

Stdlib only. Imported as a module from deploy/:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import lizard_stream
"""

import os
import signal
import socket
import threading


class RespError(RuntimeError):
    """An error reply of Redis."""


class RespReader:
    """RESP2 on self.sock with the bytes read ahead in self.buf: commands
    encoded, replies parsed. Also the base of tests/integration/gwtest.py's client."""

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("redis closed the connection")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            value, self.buf = self.buf[:n], self.buf[n + 2 :]
            return value
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RespError("unexpected reply %r" % line)


class Resp(RespReader):
    """One connection; cmd() sends a command and returns its reply."""

    def __init__(self, addr, password=None, timeout=10.0):
        if addr.startswith("unix:"):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(addr[5:])
        else:
            host, _, port = addr.rpartition(":")
            self.sock = socket.create_connection((host, int(port)))
        self.sock.settimeout(timeout)
        self.buf = b""
        if password:
            self.cmd("AUTH", password)

    def close(self):
        self.sock.close()

    def cmd(self, *args):
        self.sock.sendall(self.encode(args))
        return self._reply()


def as_dict(flat):
    """A flat [field, value, ...] reply (HGETALL, a stream entry) as a dict of str."""
    flat = flat or []
    return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}


def add_redis_args(ap, group):
    """The options every consumer takes: where Redis is, its password, the key prefix, the group and consumer."""
    ap.add_argument("--redis", default="127.0.0.1:6379", help="host:port or unix:/path")
    ap.add_argument("--password-env", default="REDIS_PASSWORD", help="environment variable holding the password")
    ap.add_argument("--prefix", default="lizard:")
    ap.add_argument("--group", default=group)
    ap.add_argument("--consumer", default="%s-%d" % (socket.gethostname(), os.getpid()))


def password_of(args):
    return os.environ.get(args.password_env) or None


def stop_on_signals():
    """An event set by SIGTERM or SIGINT: the loop stops between reads."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    return stop


def consume(args, stream, since, handle, count=16, ack=True, between=None):
    """Reads `stream` as consumer args.consumer of group args.group until
    SIGTERM/SIGINT: creates the group first (at `since`: "$" skips what was
    written before it existed, "0" serves that too; MKSTREAM: the stream may
    not exist yet), prints "ready" on stdout, then calls handle(entry_id,
    fields) for what this consumer read before a crash and never
    acknowledged ("0"), then for new entries (">"). ack: the loop XACKs each
    entry after handle returns, and reads "0" again until it is drained;
    else handle acknowledges (it may hand the entry to a thread), and the
    loop reads "0" once. An entry deleted from the stream meanwhile is
    acknowledged without handle. between(r): called before every read."""
    stop = stop_on_signals()
    r = Resp(args.redis, password_of(args))
    try:
        r.cmd("XGROUP", "CREATE", stream, args.group, since, "MKSTREAM")
    except RuntimeError as e:
        if "BUSYGROUP" not in str(e):
            raise
    print("ready", flush=True)
    start_id = "0"
    while not stop.is_set():
        if between is not None:
            between(r)
        reply = r.cmd("XREADGROUP", "GROUP", args.group, args.consumer, "COUNT", str(count), "BLOCK", "500",
                      "STREAMS", stream, start_id)
        entries = reply[0][1] if reply else []
        for entry_id, flat in entries:
            if flat is not None:
                handle(entry_id.decode(), as_dict(flat))
            if flat is None or ack:
                r.cmd("XACK", stream, args.group, entry_id)
        if start_id == "0" and (not entries or not ack):
            start_id = ">"  # this consumer's unacknowledged entries are done: new ones from now on
    r.close()
