#!/usr/bin/python3
"""An example of the control plane's side of waking paused sandboxes
(CONTRACT.md, "Waking a paused sandbox"; README, "Waking paused sandboxes").

Gateways append a request to the stream <prefix>resume when a request comes
for a paused sandbox whose hash says `resume: auto`; they hold that request
until the hash says `running` and a message on <prefix>routes tells them to
read it again. This consumer reads the stream with a consumer group (so that
several control-plane replicas share the work and a crash leaves the entry
pending, to be read again), and for each entry:

  1. skips it when the sandbox is no longer paused (already resumed, or
     stopped meanwhile: a stopped sandbox is never woken);
  2. writes state=starting and publishes (held requests keep waiting);
  3. "restores the VM" -- here: waits --delay seconds; a real control plane
     restores the snapshot and learns the VM's address;
  4. writes state=running with a new lifecycle (and the new addr), then
     publishes the id on <prefix>routes: every gateway reads the hash again
     and releases its held requests at once;
  5. XACKs the entry.

Stdlib only (a tiny RESP client). Usage:

    resume-consumer.py [--redis 127.0.0.1:6379 | --redis unix:/path] [--prefix lizard:]
                       [--group control-plane] [--consumer NAME] [--delay 1.0]

Prints "ready" on stdout once its group exists; logs one line per entry on
stderr. SIGTERM/SIGINT stop it.
"""

import argparse
import os
import secrets
import signal
import socket
import sys
import threading
import time


class Resp:
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
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._reply()

    def _line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("redis closed the connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("redis closed the connection")
                self.buf += data
            value, self.buf = self.buf[:n], self.buf[n + 2 :]
            return value
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)


def log(msg):
    print("resume-consumer: %s" % msg, file=sys.stderr, flush=True)


def resume(args, password, entry_id, fields):
    """Steps 1-5 for one stream entry, on a connection of its own (entries
    for different sandboxes resume in parallel)."""
    sandbox = fields.get("sandbox", "")
    r = Resp(args.redis, password)
    try:
        key = "%ssbx:{%s}" % (args.prefix, sandbox)
        routes = args.prefix + "routes"
        state = r.cmd("HGET", key, "state")
        if state != b"paused":
            log("%s: %s is %s, nothing to do" % (entry_id, sandbox, state.decode() if state else "gone"))
        else:
            log("%s: resuming %s (asked by gateway %s)" % (entry_id, sandbox, fields.get("gateway", "?")))
            r.cmd("HSET", key, "state", "starting")
            r.cmd("PUBLISH", routes, sandbox)
            time.sleep(args.delay)  # a real control plane restores the VM here
            # the new VM: a new lifecycle (pooled connections to the old one are never reused), its addr
            r.cmd("HSET", key, "state", "running", "lifecycle", "lc-" + secrets.token_hex(6))
            r.cmd("PUBLISH", routes, sandbox)
            log("%s: %s is running" % (entry_id, sandbox))
        r.cmd("XACK", args.prefix + "resume", args.group, entry_id)
    finally:
        r.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", default="127.0.0.1:6379", help="host:port or unix:/path")
    ap.add_argument("--password-env", default="REDIS_PASSWORD", help="environment variable holding the password")
    ap.add_argument("--prefix", default="lizard:")
    ap.add_argument("--group", default="control-plane")
    ap.add_argument("--consumer", default="%s-%d" % (socket.gethostname(), os.getpid()))
    ap.add_argument("--delay", type=float, default=1.0, help="seconds a resume takes (the simulated VM restore)")
    args = ap.parse_args()
    password = os.environ.get(args.password_env) or None
    stream = args.prefix + "resume"

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    r = Resp(args.redis, password)
    try:
        # "$": requests older than the group are not replayed; MKSTREAM: the stream may not exist yet
        r.cmd("XGROUP", "CREATE", stream, args.group, "$", "MKSTREAM")
    except RuntimeError as e:
        if "BUSYGROUP" not in str(e):
            raise
    print("ready", flush=True)

    # first what this consumer read before a crash and never acknowledged ("0"), then new entries (">")
    start_id = "0"
    while not stop.is_set():
        reply = r.cmd("XREADGROUP", "GROUP", args.group, args.consumer, "COUNT", "64", "BLOCK", "500",
                      "STREAMS", stream, start_id)
        entries = reply[0][1] if reply else []
        if start_id == "0" and not entries:
            start_id = ">"
            continue
        for entry_id, flat in entries:
            if flat is None:  # deleted from the stream meanwhile
                r.cmd("XACK", stream, args.group, entry_id)
                continue
            fields = {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
            threading.Thread(target=resume, args=(args, password, entry_id.decode(), fields), daemon=True).start()
        if start_id == "0":
            start_id = ">"
    r.close()


if __name__ == "__main__":
    main()
