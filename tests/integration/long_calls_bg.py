"""The real programs' long calls of test_long_calls.py
(test_real_long_calls_are_not_cut), run in the background of the whole
session: conftest.py starts them at the session's first test and orders
their test last, which joins them and judges each. Their silences (90 s and
120 s, by design: past main's 60 s cut) then overlap the rest of the suite
instead of adding two minutes to it.

They have everything of their own, so that no other test sees them and they
see no other test: a gateway on the default configuration (the shared
gateway's base config, gwtest.Gateway), a redis-server (no other test's
CLIENT PAUSE or pub/sub kill reaches them), the code-execution app, the MCP
server and Jupyter. A start that fails, or a program that is not installed,
is kept and reported by the test, never by the session's first test.

Also the helpers the other long-call tests share: Proc, curl_run, Scenario."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback
import types
import uuid

import gwtest
from test_real_apps import JupyterClient, execute_cell, start_jupyter

HERE = os.path.dirname(os.path.abspath(__file__))
MCP_DIR = os.path.join(HERE, "apps", "mcp-long")
TOKEN_HEADER = "X-Lizard-Access-Token"
TEST_FILE, TEST_NAME = "test_long_calls.py", "test_real_long_calls_are_not_cut"
# (scenario, path) of the four curl calls, judged by their access log lines too
CURL_CALLS = (("ndjson-h1", "/execute?silent_s=90"), ("ndjson-h2", "/execute?silent_s=90"),
              ("exec-h1", "/exec?after_s=120"), ("exec-h2", "/exec?after_s=120"))


def judged_by(item):
    """True for the test that judges the background (conftest.py: it is ordered last, and its
    presence in the session starts the background)."""
    return item.name == TEST_NAME and os.path.basename(str(item.fspath)) == TEST_FILE


class Proc:
    """A program on 127.0.0.1 that prints "listening <port>"."""

    def __init__(self, argv, workdir, name, cwd=None, env=None):
        os.makedirs(workdir, exist_ok=True)
        self.log = os.path.join(workdir, name + ".log")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(self.log, "ab"), stdin=subprocess.DEVNULL,
                                     cwd=cwd or workdir, env=env, start_new_session=True, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError("%s did not start: %r\n%s" % (name, line, gwtest.tail(self.log)))
        self.port = int(line.split()[1])

    def stop(self):
        gwtest.stop_process(self.proc, timeout=10)


def curl_run(curl_runner, g, host, path, http2, token, data="{}", timeout=300):
    """curl -N through the gateway: (exit code, body, seconds)."""
    url = "https://%s:%d%s" % (host, g.tls_port, path)
    args = ["curl", "-sS", "-N", "--max-time", str(timeout), "--cacert", curl_runner.ca, "--noproxy", "*",
            "--http2" if http2 else "--http1.1", "--resolve", "%s:%d:127.0.0.1" % (host, g.tls_port),
            "-H", "%s: %s" % (TOKEN_HEADER, token), "-H", "Content-Type: application/json", "--data-binary", data, url]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, timeout=timeout + 30)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace"), time.monotonic() - t0


class Scenario(threading.Thread):
    def __init__(self, name, fn):
        super().__init__(daemon=True, name=name)
        self.fn, self.result, self.error = fn, None, None

    def run(self):
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def jupyter_silent_cell(gw, jupyter_app, register, token, curl, certs, tmp_path, seconds):
    """A notebook cell silent for `seconds`, then its output, over the kernel
    WebSocket: (output, status, seconds taken)."""
    sid = gwtest.new_sandbox_id("jlong")
    register(sid, ports={jupyter_app.port: "private"}, token=token, extra={"host:%d" % jupyter_app.port: "preserve"})
    j = JupyterClient(types.SimpleNamespace(gw=gw, jupyter=jupyter_app.port, token=token), curl, tmp_path, sid)
    tree = j.req("/tree", headers={"Accept": "text/html"})
    assert tree.status == 200, tree.status
    xsrf = j.xsrf()
    api = {"Origin": j.origin, "X-XSRFToken": xsrf, "Content-Type": "application/json", "Referer": j.origin + "/tree"}
    kernel = j.req("/api/kernels", method="POST", data=json.dumps({"name": "python3"}), headers=api)
    assert kernel.status == 201, kernel.status
    kid = kernel.json()["id"]
    t0 = time.monotonic()
    text, status = execute_cell(j, kid, xsrf, certs, "import time\ntime.sleep(%d)\nprint('cell done', 6 * 7)" % seconds,
                                seconds + 60)
    took = time.monotonic() - t0
    j.req("/api/kernels/" + kid, method="DELETE", headers=api)
    return text, status, took


def programs_missing():
    """What the scenarios need and is not installed (None: all there)."""
    if shutil.which("node") is None:
        return "node is missing (apt-get install nodejs npm)"
    if not os.path.isdir(os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol")):
        return "the MCP SDK is not installed: npm ci --prefix tests/integration/apps/mcp-long"
    if shutil.which("jupyter-notebook") is None:
        return "jupyter-notebook is missing (apt-get install jupyter-notebook)"
    return None


class Background:
    """Starts everything and the six scenarios in a thread of its own (the session's first test does not
    wait for Jupyter); results() joins it."""

    def __init__(self, workdir, certs, curl_runner, tmp_path):
        self.workdir = os.path.join(workdir, "long-calls")
        self.certs, self.curl_runner, self.tmp_path = certs, curl_runner, tmp_path
        self.procs = []  # stopped by stop(), in reverse
        self.redis = self.gw = None
        self.ids = {k: uuid.uuid4().hex for k, _ in CURL_CALLS}
        self.missing = programs_missing()
        self.started_at = time.monotonic()
        self.thread = Scenario("long-calls", self._run)
        if self.missing is None:
            self.thread.start()

    def _run(self):
        self.redis = gwtest.Redis(os.path.join(self.workdir, "redis")).start()
        self.procs.append(self.redis)
        self.gw = gwtest.Gateway(self.workdir, self.certs, self.redis.port, name="gw-long-calls")
        self.gw.start()
        app = Proc([sys.executable, os.path.join(HERE, "long_call_app.py")], os.path.join(self.workdir, "app"), "app")
        self.procs.append(app)
        mcp_server = Proc([shutil.which("node"), os.path.join(MCP_DIR, "server.mjs"), "0"],
                          os.path.join(self.workdir, "mcp"), "mcp-server", cwd=MCP_DIR)
        self.procs.append(mcp_server)
        jupyter = start_jupyter(shutil.which("jupyter-notebook"), os.path.join(self.workdir, "jupyter"))
        self.procs.append(jupyter)

        def register(sandbox_id, **kw):
            return gwtest.register_sandbox(self.redis, sandbox_id, **kw)

        g, sid = self.gw, gwtest.new_sandbox_id("long")
        token = register(sid, ports={app.port: "private", mcp_server.port: "private"})
        host, mcp_host = g.host(app.port, sid), g.host(mcp_server.port, sid)
        curl = gwtest.curl_through(self.curl_runner, g)

        def mcp():
            env = dict(os.environ, NODE_EXTRA_CA_CERTS=self.certs["ca"])
            url = "https://%s:%d/mcp" % (mcp_host, g.tls_port)
            t0 = time.monotonic()
            r = subprocess.run([shutil.which("node"), os.path.join(MCP_DIR, "client.mjs"), url, "90", token],
                               capture_output=True, text=True, timeout=400, env=env, cwd=MCP_DIR)
            return r.returncode, r.stdout.strip(), r.stderr[-2000:], time.monotonic() - t0

        scenarios = {k: (lambda k=k, p=p: curl_run(self.curl_runner, g, host, self.path(k, p), k.endswith("h2"), token))
                     for k, p in CURL_CALLS}
        scenarios["mcp"] = mcp
        scenarios["jupyter"] = lambda: jupyter_silent_cell(g, jupyter, register, token, curl, self.certs, self.tmp_path,
                                                           120)
        threads = {k: Scenario(k, fn) for k, fn in scenarios.items()}
        for t in threads.values():
            t.start()
        for t in threads.values():
            t.join(420)
        return threads

    def path(self, scenario, path):
        return "%s&id=%s" % (path, self.ids[scenario])

    def results(self):
        """{scenario: its Scenario thread, ended}; raises what the start raised."""
        self.thread.join(600)
        assert not self.thread.is_alive(), "the long calls' background did not end within 600 s"
        if self.thread.error is not None:
            raise AssertionError("the long calls' background failed: %s" % "".join(
                traceback.format_exception(self.thread.error)))
        return self.thread.result

    def stop_gateway(self):
        """SIGTERM to the background's gateway: (exit code, sanitizer reports)."""
        rc = self.gw.stop() if self.gw is not None and self.gw.proc is not None else 0
        return rc, self.gw.collect_sanitizer_reports() if self.gw is not None else []

    def stop(self):
        self.stop_gateway()
        for p in reversed(self.procs):
            p.stop()
