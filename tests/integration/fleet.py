"""Helpers for the fleet tests (Sentinel failover, several gateways on one
Redis): a Redis primary + replica with three redis-sentinel processes on
loopback free ports, and a raw HTTP/1.1-over-TLS client that counts every
byte of every response it receives (what metering must add up to)."""

import os
import socket
import ssl
import subprocess
import time

import gwtest

MASTER = "lizard"


class RedisNode(gwtest.Redis):
    """A redis-server; replicaof=port makes it a replica of 127.0.0.1:port;
    aof=True keeps its data across a kill (appendfsync always), so that a
    restarted replica holds what it acknowledged."""

    def __init__(self, workdir, replicaof=None, aof=False):
        super().__init__(workdir)
        self.replicaof = replicaof
        self.aof = aof

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        logf = open(self.log, "ab")
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                "yes" if self.aof else "no", "--appendfsync", "always", "--dir", self.workdir, "--daemonize", "no",
                "--protected-mode", "no"]
        if self.aof:  # the nodes share a directory: each its own AOF
            args += ["--appenddirname", "appendonly-%d" % self.port]
        if self.replicaof:
            args += ["--replicaof", "127.0.0.1", str(self.replicaof)]
        self.proc = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        logf.close()
        gwtest.wait_for(lambda: self._ping(), 10, what="redis-server on port %d (log: %s)" % (self.port, self.log))
        return self


class Sentinel:
    """One redis-sentinel process (Debian's redis-sentinel package) with
    small timeouts, so that a failover takes a few seconds."""

    def __init__(self, workdir, master_port, down_after_ms=1000, failover_timeout_ms=5000):
        self.workdir = workdir
        self.port = gwtest.free_port()
        self.conf = os.path.join(workdir, "sentinel-%d.conf" % self.port)
        self.log = os.path.join(workdir, "sentinel-%d.log" % self.port)
        self.master_port = master_port
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.proc = None
        self.client = gwtest.RespClient(self.port)

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        with open(self.conf, "w") as f:  # sentinel rewrites this file: it must be ours and writable
            f.write("port %d\nbind 127.0.0.1\ndaemonize no\nprotected-mode no\ndir %s\n"
                    "sentinel monitor %s 127.0.0.1 %d 2\n"
                    "sentinel down-after-milliseconds %s %d\n"
                    "sentinel failover-timeout %s %d\n"
                    "sentinel parallel-syncs %s 1\n"
                    % (self.port, self.workdir, MASTER, self.master_port, MASTER, self.down_after_ms, MASTER,
                       self.failover_timeout_ms, MASTER))
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(["redis-sentinel", self.conf], stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()
        gwtest.wait_for(lambda: self.client.cmd("PING") == "PONG", 10,
                        what="redis-sentinel on port %d (log: %s)" % (self.port, self.log))
        return self

    def stop(self):
        self.client.close()
        gwtest.stop_process(self.proc)
        self.proc = None

    def cmd(self, *args):
        return self.client.cmd(*args)

    def master_port_now(self):
        r = self.cmd("SENTINEL", "get-master-addr-by-name", MASTER)
        return int(r[1]) if r else None


class Cluster:
    """Primary + replica + three sentinels, all ready to fail over."""

    def __init__(self, workdir, aof=False):
        self.workdir = workdir
        self.aof = aof
        self.primary = RedisNode(workdir, aof=aof)
        self.replica = None
        self.sentinels = []

    def start(self):
        self.primary.start()
        self.replica = RedisNode(self.workdir, replicaof=self.primary.port, aof=self.aof).start()
        gwtest.wait_for(lambda: b"master_link_status:up" in self.replica.cmd("INFO", "replication"), 20,
                        what="the replica in sync")
        self.sentinels = [Sentinel(self.workdir, self.primary.port).start() for _ in range(3)]

        def ready():
            # each sentinel sees the replica and the two other sentinels (hello messages every 2 s):
            # only then can they agree on a failover
            for s in self.sentinels:
                if len(s.cmd("SENTINEL", "replicas", MASTER)) != 1 or len(s.cmd("SENTINEL", "sentinels", MASTER)) != 2:
                    return False
            return True

        gwtest.wait_for(ready, 30, interval=0.2, what="sentinels that know the replica and each other")
        return self

    def addresses(self):
        return ["127.0.0.1:%d" % s.port for s in self.sentinels]

    def node(self, port):
        return next(n for n in (self.primary, self.replica) if n.port == port)

    def current_primary(self):
        return self.node(self.sentinels[0].master_port_now())

    def stop(self):
        for s in self.sentinels:
            s.stop()
        for n in (self.primary, self.replica):
            if n is not None:
                n.stop()


class Client:
    """HTTP/1.1 keep-alive over TLS to a gateway, one request at a time;
    counts the bytes of every complete response (head and body), which is
    what the gateway meters as egress for a proxied response."""

    def __init__(self, tls_port, host, ca, timeout=10):
        self.port = tls_port
        self.host = host
        self.ctx = ssl.create_default_context(cafile=ca)
        self.timeout = timeout
        self.sock = None
        self.buf = b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.buf = b""

    def _recv(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.buf += data

    def get(self, path):
        """Returns (status, received bytes, body); raises OSError on a broken connection."""
        if self.sock is None:
            raw = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout)
            self.sock = self.ctx.wrap_socket(raw, server_hostname=self.host)
            self.buf = b""
        try:
            self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\n\r\n" % (path, self.host)).encode())
            while b"\r\n\r\n" not in self.buf:
                self._recv()
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            lines = head.decode("iso-8859-1").split("\r\n")
            status = int(lines[0].split(" ")[1])
            length = 0
            close = False
            for line in lines[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
                elif k.strip().lower() == "connection" and v.strip().lower() == "close":
                    close = True
            while len(self.buf) < length:
                self._recv()
            body, self.buf = self.buf[:length], self.buf[length:]
            if close:
                self.close()
            return status, len(head) + 4 + length, body
        except (OSError, ConnectionError, ssl.SSLError):
            self.close()
            raise


def stream_records(redis, prefix="lizard:"):
    out = []
    for _id, fields in redis.cmd("XRANGE", prefix + "egress", "-", "+"):
        out.append({fields[i].decode(): fields[i + 1].decode() for i in range(0, len(fields), 2)})
    return out


def dedup(records):
    """What a billing consumer keeps: one record per (gateway, seq); a
    repeated seq must be the same record."""
    seen = {}
    for r in records:
        key = (r["gateway"], int(r["seq"]))
        if key in seen:
            assert seen[key] == r, "seq %r written twice with different content: %r %r" % (key, seen[key], r)
            continue
        seen[key] = r
    return list(seen.values())


def egress_of(records, sandbox_ids):
    return sum(int(r["egress"]) for r in records if r["sandbox"] in sandbox_ids)


def elapsed_since(t0):
    return time.monotonic() - t0


def stall_first_sync(primary, replica):
    """Restarts `replica` empty so that it needs a full sync, which the
    primary then holds back (diskless sync, an hour's delay): the replica is
    connected and listed by INFO as state=wait_bgsave, but holds nothing and
    ROLE does not list it. A failover can still promote it."""
    primary.cmd("CONFIG", "SET", "repl-diskless-sync", "yes")
    primary.cmd("CONFIG", "SET", "repl-diskless-sync-max-replicas", "0")
    primary.cmd("CONFIG", "SET", "repl-diskless-sync-delay", "3600")
    replica.stop()
    # the RDB of its earlier sync (the replica writes it to disk) would let it resync partially
    rdb = os.path.join(replica.workdir, "dump.rdb")
    if os.path.exists(rdb):
        os.unlink(rdb)
    replica.start()
    gwtest.wait_for(lambda: b"state=wait_bgsave" in primary.cmd("INFO", "replication"), 20,
                    what="the replica waiting for its first sync")
    assert len(primary.cmd("ROLE")[2]) == 0


def egress_total(redis, sandbox_id, prefix="lizard:"):
    v = redis.cmd("GET", "%segress:{%s}" % (prefix, sandbox_id))
    return int(v) if v is not None else 0
