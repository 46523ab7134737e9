"""Helpers for the integration tests: processes (redis-server, the test
upstream, the gateway), a tiny RESP client, test certificates made with the
openssl CLI, and a curl wrapper. Stdlib only; everything on 127.0.0.1."""

import contextlib
import copy
import hashlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "deploy"))
from lizard_stream import RespError, RespReader  # noqa: E402,F401  (the project's one RESP parser; RespError for the tests)
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

DOMAIN = "lizard.test"


_HANDED_OUT = set()
_PORT_RNG = random.Random()


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now and that
    this process has never handed out before.

    Binding port 0 and closing lets the kernel give the same port to the next
    call (a gateway's three listeners once got two equal ports). So ports are
    drawn at random below the kernel's ephemeral range (which bind(0) and
    outgoing connections use, so nothing else takes them meanwhile), checked
    with a bind, and remembered for the whole run so none is handed out
    twice."""
    lo, _ = _ephemeral_range()
    if lo - 10000 >= 2000:
        for _ in range(200):
            p = _PORT_RNG.randrange(10000, lo)
            if p not in _HANDED_OUT and _bindable(p):
                _HANDED_OUT.add(p)
                return p
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p not in _HANDED_OUT:
            _HANDED_OUT.add(p)
            return p
    raise RuntimeError("no free TCP port on 127.0.0.1")


def wait_for(pred, timeout, interval=0.05, what="condition"):
    """Calls pred() until it returns a truthy value; returns it, or raises."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last_exc = e
        if time.monotonic() >= deadline:
            raise TimeoutError("timed out after %.1fs waiting for %s (last error: %r)" % (timeout, what, last_exc))
        time.sleep(interval)


def port_open(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def tail(path, n=60):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-n:])
    except OSError:
        return "(no %s)" % path


def stop_process(proc, timeout=10.0, sig=signal.SIGTERM):
    """Ends a Popen (SIGTERM, then SIGKILL); returns its exit code."""
    if proc is None:
        return None
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGCONT)  # a stopped process cannot exit
            proc.send_signal(sig)
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
            return None
        except ProcessLookupError:
            pass
    return proc.wait(timeout=5)


# ---------------------------------------------------------------------------
# Redis


class RespClient(RespReader):
    """A minimal RESP2 client on a socket: enough for HSET, DEL, PUBLISH...
    (the parsing is deploy/lizard_stream.py's)."""

    def __init__(self, port, host="127.0.0.1", timeout=5.0):
        self.addr = (host, port)
        self.timeout = timeout
        self.sock = None
        self.buf = b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.buf = b""

    def _connect(self):
        self.sock = socket.create_connection(self.addr, timeout=self.timeout)
        self.buf = b""

    def cmd(self, *args):
        """Sends one command and returns the reply; reconnects once."""
        for attempt in (0, 1):
            try:
                if self.sock is None:
                    self._connect()
                self.sock.sendall(self.encode(args))
                return self._reply()
            except (OSError, ConnectionError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")


class Redis:
    """A redis-server of our own on a free port, with no persistence."""

    def __init__(self, workdir, port=None):
        self.workdir = workdir
        self.port = port or free_port()
        self.proc = None
        self.log = os.path.join(workdir, "redis-%d.log" % self.port)
        self.client = RespClient(self.port)

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.workdir, "--daemonize", "no", "--protected-mode", "no"],
            stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()
        wait_for(lambda: self._ping(), 10, what="redis-server on port %d (log: %s)" % (self.port, self.log))
        return self

    def _ping(self):
        if self.proc.poll() is not None:
            raise RuntimeError("redis-server exited: %s" % tail(self.log))
        try:
            return self.client.cmd("PING") == "PONG"
        except OSError:
            return False

    def stop(self):
        self.client.close()
        stop_process(self.proc)
        self.proc = None

    def kill(self):
        """SIGKILL, as a crash would; the port is free again afterwards."""
        self.client.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def cmd(self, *args):
        return self.client.cmd(*args)


def sha256_hex(s):
    if isinstance(s, str):
        s = s.encode()
    return hashlib.sha256(s).hexdigest()


def new_sandbox_id(prefix="t"):
    return prefix + secrets.token_hex(6)


def register_sandbox(redis, sandbox_id, state="running", addr="127.0.0.1", ports=None, token=None, lifecycle=None,
                     project="proj1", prefix="lizard:", publish=True, extra=None):
    """Writes lizard:sbx:{id} as the control plane does, then publishes the
    id on lizard:routes. Returns the token."""
    if ports is None:
        ports = {3000: "private"}
    if token is None:
        token = secrets.token_urlsafe(24)
    key = "%ssbx:{%s}" % (prefix, sandbox_id)
    fields = {"state": state, "addr": addr, "lifecycle": lifecycle or ("lc-" + secrets.token_hex(4)),
              "project": project, "token_sha256": sha256_hex(token)}
    for p, vis in ports.items():
        fields["port:%d" % int(p)] = vis
    if extra:
        fields.update(extra)
    args = ["HSET", key]
    for k, v in fields.items():
        args += [k, str(v)]
    redis.cmd("DEL", key)
    redis.cmd(*args)
    if publish:
        redis.cmd("PUBLISH", prefix + "routes", sandbox_id)
    return token



def register_tcp_sandbox(redis, port, access="private", id_prefix="tcp"):
    """A new sandbox whose `port` is a raw TCP port (proto:<port> = tcp) with
    `access` (private or public), registered and published. Returns (id, token)."""
    sid = new_sandbox_id(id_prefix)
    token = register_sandbox(redis, sid, ports={port: access}, extra={"proto:%d" % port: "tcp"})
    return sid, token

def unregister_sandbox(redis, sandbox_id, prefix="lizard:"):
    redis.cmd("DEL", "%ssbx:{%s}" % (prefix, sandbox_id))
    redis.cmd("PUBLISH", prefix + "routes", sandbox_id)


# ---------------------------------------------------------------------------
# Certificates


def _openssl(args, cwd):
    r = subprocess.run(["openssl"] + args, cwd=cwd, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (" ".join(args), r.stderr.decode("utf-8", "replace")))


def make_certs(workdir, domain=DOMAIN):
    """A test CA and a leaf for *.<domain> and <domain> signed by it.
    Returns dict(ca=, cert=, key=) paths; cert is the leaf + CA chain."""
    os.makedirs(workdir, exist_ok=True)
    _openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
              "-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", "/CN=lizard test CA",
              "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
             workdir)
    _openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
              "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=*.%s" % domain], workdir)
    with open(os.path.join(workdir, "leaf.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:*.%s,DNS:%s\n" % (domain, domain))
    _openssl(["x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
              "-out", "leaf.pem", "-days", "30", "-extfile", "leaf.ext"], workdir)
    with open(os.path.join(workdir, "chain.pem"), "wb") as out:
        for name in ("leaf.pem", "ca.pem"):
            with open(os.path.join(workdir, name), "rb") as f:
                out.write(f.read())
    return {"ca": os.path.join(workdir, "ca.pem"), "cert": os.path.join(workdir, "chain.pem"),
            "key": os.path.join(workdir, "leaf.key")}


# ---------------------------------------------------------------------------
# The test upstream


class Upstream:
    def __init__(self, workdir):
        self.workdir = workdir
        self.proc = None
        self.port = None
        self.log = os.path.join(workdir, "upstream.log")

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([PYTHON, os.path.join(HERE, "upstream.py"), "--port", "0"],
                                     stdout=subprocess.PIPE, stderr=logf, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        logf.close()
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening "):
            stop_process(self.proc)
            raise RuntimeError("upstream did not start: %r %s" % (line, tail(self.log)))
        self.port = int(line.split()[1])
        return self

    def stop(self):
        stop_process(self.proc)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def get_json(self, path):
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open("http://127.0.0.1:%d%s" % (self.port, path), timeout=5) as r:
            return json.loads(r.read())

    def stats(self):
        return self.get_json("/_stats")


# ---------------------------------------------------------------------------
# The gateway

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "SUMMARY: UndefinedBehavior")
SANITIZER_SCAN_CHUNK = 1 << 20  # a log is read this many bytes at a time, never whole


def first_occurrences(path, markers, chunk=SANITIZER_SCAN_CHUNK):
    """{marker: byte offset of its first occurrence} over the whole file,
    read a chunk at a time (a marker across two chunks is found too)."""
    found = {}
    keep = max(len(m) for m in markers) - 1
    with open(path, "rb") as f:
        carry, carry_at = b"", 0
        while len(found) < len(markers):
            data = f.read(chunk)
            if not data:
                break
            window = carry + data
            for m in markers:
                i = window.find(m.encode()) if m not in found else -1
                if i >= 0:
                    found[m] = carry_at + i
            carry_at += len(window) - min(keep, len(window))
            carry = window[len(window) - min(keep, len(window)):]
    return found


def deep_merge(base, over):
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def gateway_binary():
    b = os.environ.get("GW_BINARY", os.path.join("build", "gateway", "lizard-gateway"))
    if not os.path.isabs(b):
        b = os.path.join(REPO, b)
    return b


_SANITIZED = {}


def gateway_is_sanitized():
    """Whether the gateway binary under test is built with AddressSanitizer
    (its runtime is linked in): memory figures then include ASan's shadow
    and the quarantine that keeps freed blocks from being reused."""
    b = gateway_binary()
    if b not in _SANITIZED:
        _SANITIZED[b] = bool(first_occurrences(b, ("__asan_init",)))
    return _SANITIZED[b]


def small_asan_quarantine(g):
    """Makes gateway g (not started yet) keep ASan's quarantine of freed
    blocks small (4 MB, 256 KB per thread) instead of 256 MB: a test that
    measures RSS then sees what the gateway holds, not what ASan keeps. No
    effect on a plain build."""
    base_env = g.env

    def env():
        e = base_env()
        e["ASAN_OPTIONS"] = e.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=4:thread_local_quarantine_size_kb=256"
        return e

    g.env = env


class Gateway:
    """One lizard-gateway process with a generated config.

    base config: TLS listener + plain listener on free ports, domains
    [lizard.test], the test certificate, our redis, allowed 127.0.0.0/8,
    admin on a free port, short timeouts so failures show quickly."""

    def __init__(self, workdir, certs, redis_port, overrides=None, name="gw"):
        self.workdir = workdir
        self.certs = certs
        self.redis_port = redis_port
        self.name = name
        self.proc = None
        self.tls_port = free_port()
        self.plain_port = free_port()
        self.admin_port = free_port()
        self.overrides = overrides or {}
        self.cookie_secret = secrets.token_hex(32)
        self.starts = 0
        self.log = None
        self.config_path = os.path.join(workdir, "%s.json" % name)
        self.sanitizer_reports = []

    def base_config(self):
        return {
            "listen": [
                {"address": "127.0.0.1:%d" % self.tls_port, "tls": True},
                {"address": "127.0.0.1:%d" % self.plain_port, "tls": False},
            ],
            "domains": [DOMAIN],
            "tls": {"certificates": [{"cert": self.certs["cert"], "key": self.certs["key"]}]},
            "redis": {"address": "127.0.0.1:%d" % self.redis_port, "prefix": "lizard:",
                      "lookup_timeout_ms": 1000, "reconnect_max_ms": 500},
            "auth": {"cookie_secrets_env": "LIZARD_COOKIE_SECRETS"},
            "routing": {"cache_ttl_ms": 10000},
            "upstream": {"allowed_networks": ["127.0.0.0/8"], "connect_timeout_ms": 2000},
            "metering": {"flush_interval_ms": 500, "spill_file": os.path.join(self.workdir, "%s.spill" % self.name)},
            "admin": {"address": "127.0.0.1:%d" % self.admin_port},
            "log": {"access": os.path.join(self.workdir, "%s-access.log" % self.name)},
            "workers": int(os.environ.get("GW_WORKERS", "2")),
        }

    def config(self):
        return deep_merge(self.base_config(), self.overrides)

    def write_config(self, path=None, cfg=None):
        path = path or self.config_path
        with open(path, "w") as f:
            json.dump(cfg if cfg is not None else self.config(), f, indent=2)
        return path

    def env(self):
        env = dict(os.environ)
        env["LIZARD_COOKIE_SECRETS"] = self.cookie_secret
        env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")  # as tests/run sets it for CI
        return env

    def start(self, timeout=15):
        os.makedirs(self.workdir, exist_ok=True)
        self.write_config()
        self.starts += 1
        self.log = os.path.join(self.workdir, "%s-%d.log" % (self.name, self.starts))
        binary = gateway_binary()
        if not os.access(binary, os.X_OK):
            raise RuntimeError("gateway binary %s is missing (set GW_BINARY)" % binary)
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([binary, "-c", self.config_path], stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env(), cwd=self.workdir,
                                     start_new_session=True)
        logf.close()

        def healthy():
            if self.proc.poll() is not None:
                raise RuntimeError("gateway exited with %s:\n%s" % (self.proc.returncode, tail(self.log)))
            return self.admin_get("/healthz")[0] == 200 and port_open(self.tls_port)

        try:
            wait_for(healthy, timeout, what="gateway /healthz")
        except Exception as e:
            self.stop()
            raise RuntimeError("gateway did not become healthy: %s\n--- log ---\n%s" % (e, tail(self.log))) from None
        return self

    def admin_get(self, path):
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open("http://127.0.0.1:%d%s" % (self.admin_port, path), timeout=3) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def redis_connected(self):
        """/readyz's report on Redis (every worker's connection up). /readyz's
        status does not depend on Redis (CONTRACT.md, Operations)."""
        status, body = self.admin_get("/readyz")
        return status == 200 and json.loads(body)["redis"] is True

    def stop(self):
        """SIGTERM; returns the exit code (None if it had to be killed)."""
        rc = stop_process(self.proc, timeout=15)
        self.proc = None
        self.collect_sanitizer_reports()
        return rc

    def restart(self, overrides=None):
        """Stops, applies overrides (deep-merged over the current ones, a
        None value removes a key) and starts again on the same ports."""
        self.stop()
        if overrides is not None:
            self.overrides = deep_merge(self.overrides, overrides)
        return self.start()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def collect_sanitizer_reports(self):
        if not self.log:
            return self.sanitizer_reports
        # the whole log: a report early in a long run is found as well as a late one
        try:
            found = first_occurrences(self.log, SANITIZER_MARKERS)
            with open(self.log, "rb") as f:
                for _, idx in sorted(found.items(), key=lambda kv: kv[1]):
                    f.seek(max(0, idx - 200))
                    text = f.read(min(idx, 200) + 3000).decode("utf-8", "replace")
                    rep = "%s: %s" % (self.log, text)
                    if rep not in self.sanitizer_reports:
                        self.sanitizer_reports.append(rep)
        except OSError:
            pass
        return self.sanitizer_reports

    def host(self, port, sandbox_id):
        return "%d-%s.%s" % (port, sandbox_id, DOMAIN)


# ---------------------------------------------------------------------------
# curl


class Response:
    def __init__(self, status, headers, header_list, body, http_version, raw_head):
        self.status = status
        self.headers = headers  # lowercase name -> value (repeated ones joined with ", ")
        self.header_list = header_list  # [(lowercase name, value), ...]
        self.body = body
        self.http_version = http_version
        self.raw_head = raw_head

    def json(self):
        return json.loads(self.body)

    def error_code(self):
        try:
            return self.json()["error"]["code"]
        except Exception:  # noqa: BLE001
            return None

    def get_all(self, name):
        name = name.lower()
        return [v for k, v in self.header_list if k == name]

    def __repr__(self):
        b = self.body[:300]
        return "<Response %s h%s %r body=%r>" % (self.status, self.http_version, self.headers, b)


def parse_head(raw):
    """Parses a curl -D dump; the last header block is the final response."""
    text = raw.decode("iso-8859-1")
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()]
    if not blocks:
        return 0, {}, []
    # skip 1xx blocks
    final = blocks[-1]
    lines = final.split("\n")
    status_line = lines[0]
    parts = status_line.split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    hl = []
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            hl.append((k.strip().lower(), v.strip()))
    hd = {}
    for k, v in hl:
        hd[k] = v if k not in hd else hd[k] + ", " + v
    return status, hd, hl


class Curl:
    def __init__(self, workdir, ca):
        self.workdir = workdir
        self.ca = ca
        self.n = 0
        os.makedirs(workdir, exist_ok=True)

    def request(self, url, resolve=None, http2=False, headers=None, data=None, method=None, timeout=20,
                extra_args=()):
        """Runs curl; returns Response. resolve: list of 'host:port:addr'."""
        self.n += 1
        base = os.path.join(self.workdir, "c%d" % self.n)
        body_f, head_f = base + ".body", base + ".head"
        args = ["curl", "-sS", "--max-time", str(timeout), "--cacert", self.ca, "-o", body_f, "-D", head_f,
                "-w", "%{http_code} %{http_version}", "--noproxy", "*"]
        args.append("--http2" if http2 else "--http1.1")
        for r in resolve or ():
            args += ["--resolve", r]
        for k, v in (headers or {}).items():
            args += ["-H", "%s: %s" % (k, v)]
        if data is not None:
            data_f = base + ".data"
            with open(data_f, "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode())
            args += ["--data-binary", "@" + data_f, "-H", "Expect:"]
        if method:
            args += ["-X", method]
        args += list(extra_args)
        args.append(url)
        r = subprocess.run(args, capture_output=True, timeout=timeout + 10)
        if r.returncode != 0:
            raise CurlError(r.returncode, r.stderr.decode("utf-8", "replace").strip(), args)
        code, _, ver = r.stdout.decode().partition(" ")
        with open(head_f, "rb") as f:
            raw = f.read()
        with open(body_f, "rb") if os.path.exists(body_f) else open(os.devnull, "rb") as f:
            body = f.read()
        status, hd, hl = parse_head(raw)
        for p in (body_f, head_f, base + ".data"):
            if os.path.exists(p):
                os.unlink(p)
        return Response(int(code) if code.isdigit() else status, hd, hl, body, ver.strip(), raw)


class CurlError(Exception):
    def __init__(self, rc, stderr, args):
        super().__init__("curl exited %d: %s (%s)" % (rc, stderr, " ".join(args)))
        self.rc = rc
        self.stderr = stderr


def curl_through(curl_runner, gateway):
    """The curl fixture's function, to gateway unless told gw=."""

    def run(host, path="/", http2=False, headers=None, data=None, method=None, gw=None, plain=False, port=None,
            timeout=20, extra_args=()):
        g = gw or gateway
        p = port or (g.plain_port if plain else g.tls_port)
        scheme = "http" if plain else "https"
        hostname = host.split(":")[0]
        url = "%s://%s:%d%s" % (scheme, hostname, p, path)
        return curl_runner.request(url, resolve=["%s:%d:127.0.0.1" % (hostname, p)], http2=http2, headers=headers,
                                   data=data, method=method, timeout=timeout, extra_args=extra_args)

    return run


def have_tool(name):
    return shutil.which(name) is not None


@contextlib.contextmanager
def blackhole_port():
    """A loopback port whose SYNs are dropped: a listener with listen(0)
    whose accept queue is full (the kernel then drops SYNs; no root needed)."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(0)
    port = lsock.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), timeout=2)  # fills the queue
    try:
        probe = socket.socket()
        probe.settimeout(0.3)
        try:
            probe.connect(("127.0.0.1", port))
            raise AssertionError("this kernel answered a SYN on a full accept queue: the test cannot make a blackhole")
        except socket.timeout:
            pass
        finally:
            probe.close()
        yield port
    finally:
        filler.close()
        lsock.close()


PATTERN_BLOCK = (b"0123456789abcdef" * 4096)[:65536]  # what upstream.py's /bytes/<n> repeats


def pattern_sha256(n):
    """The sha256 hex digest of upstream.py's /bytes/<n> body."""
    h = hashlib.sha256()
    while n > 0:
        piece = PATTERN_BLOCK[: min(n, len(PATTERN_BLOCK))]
        h.update(piece)
        n -= len(piece)
    return h.hexdigest()


def access_log_line(g, path, timeout=10):
    """The gateway g's access log record of the request for `path` (written by
    the log thread: waited for)."""
    def find():
        with open(g.config()["log"]["access"]) as f:
            for ln in f:
                if ln.strip():
                    rec = json.loads(ln)
                    if rec.get("path") == path:
                        return rec
        return None
    wait_for(lambda: find() is not None, timeout, what="the access log line of " + path)
    return find()


def rss_kib(pid):
    """The resident set size of process `pid` in KiB (/proc/<pid>/status VmRSS)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)
