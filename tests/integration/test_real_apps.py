"""Real dev servers behind one gateway at once, each port with its own view
of its address (`host:<n>`, CONTRACT.md "The sandbox's view of its address"):

- Vite from npm (tests/integration/apps/vite) on a `localhost` port: the page,
  its client (/@vite/client), the HMR WebSocket reaching `connected`, and in
  headless Chromium an edit of a source file reaching the DOM without a
  reload;
- Debian's Jupyter Notebook 6 on a `preserve` port, started as docs/host-modes.md's
  host-mode table says (`--NotebookApp.allow_remote_access=True`): the tree,
  a new notebook through the contents API with its XSRF cookie, a kernel, and
  a cell whose output comes back over the kernel WebSocket;
- a plain upstream on a `preserve` port beside them, whose Host stays the
  preview host.

The applications are installed by the test command (tests/lib/deps.sh
gw_deps_apps: jupyter-notebook and python3-flask from Debian, Vite through
npm ci). Outside CI a missing one skips its tests; in CI (CI=true) it fails."""

import asyncio
import json
import os
import re
import select
import shutil
import socket
import ssl
import subprocess
import time
import uuid

import pytest

import browser_helpers as bh
import gwtest

HERE = os.path.dirname(os.path.abspath(__file__))
VITE_SRC = os.path.join(HERE, "apps", "vite")
BROWSER_DIR = os.path.join(HERE, "browser")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing(msg):
    if IN_CI:
        pytest.fail(msg + " - required in CI (tests/lib/deps.sh gw_deps_apps installs it)", pytrace=False)
    pytest.skip(msg)


def wait_port(port, proc, log, what, timeout=60):
    gwtest.wait_for(lambda: proc.poll() is not None or gwtest.port_open(port), timeout, interval=0.1, what=what)
    if proc.poll() is not None:
        raise RuntimeError("%s exited with %s:\n%s" % (what, proc.returncode, gwtest.tail(log)))


class App:
    """A real application process on 127.0.0.1:<port>, its log in workdir."""

    def __init__(self, name, workdir, argv, port, env=None, cwd=None):
        self.name, self.port, self.workdir = name, port, workdir
        self.log = os.path.join(workdir, name + ".log")
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=cwd or workdir, env=env or dict(os.environ), start_new_session=True)

    def stop(self):
        gwtest.stop_process(self.proc, timeout=10)


@pytest.fixture(scope="module")
def vite(tmp_path_factory):
    node = shutil.which("node")
    if node is None:
        missing("node is missing (apt-get install nodejs npm)")
    vite_js = os.path.join(VITE_SRC, "node_modules", "vite", "bin", "vite.js")
    if not os.path.exists(vite_js):
        missing("vite is not installed: npm ci --prefix tests/integration/apps/vite")
    # a copy of the project (the test edits its source), sharing node_modules
    root = str(tmp_path_factory.mktemp("vite"))
    for name in ("index.html", "vite.config.js", "package.json"):
        shutil.copy(os.path.join(VITE_SRC, name), root)
    shutil.copytree(os.path.join(VITE_SRC, "src"), os.path.join(root, "src"))
    os.symlink(os.path.join(VITE_SRC, "node_modules"), os.path.join(root, "node_modules"))
    port = gwtest.free_port()
    env = dict(os.environ, NO_COLOR="1", BROWSER="none")
    app = App("vite", root, [node, vite_js, "--host", "127.0.0.1", "--port", str(port), "--strictPort"], port,
              env=env)
    app.root = root
    try:
        wait_port(port, app.proc, app.log, "vite on 127.0.0.1:%d" % port)
    except Exception:
        app.stop()
        raise
    yield app
    app.stop()


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory):
    exe = shutil.which("jupyter-notebook")
    if exe is None:
        missing("jupyter-notebook is missing (apt-get install jupyter-notebook)")
    app = start_jupyter(exe, str(tmp_path_factory.mktemp("jupyter")))
    yield app
    app.stop()


def start_jupyter(exe, root):
    """Jupyter Notebook on a free port of 127.0.0.1, listening; its files under root."""
    port = gwtest.free_port()
    home = os.path.join(root, "home")
    os.makedirs(home)
    env = dict(os.environ, HOME=home, JUPYTER_CONFIG_DIR=os.path.join(home, "cfg"),
               JUPYTER_RUNTIME_DIR=os.path.join(home, "runtime"), JUPYTER_DATA_DIR=os.path.join(home, "data"),
               IPYTHONDIR=os.path.join(home, "ipython"))
    notebooks = os.path.join(root, "notebooks")
    os.makedirs(notebooks)
    # What the host-mode table of docs/host-modes.md says for Jupyter on a `preserve` port:
    # allow_remote_access (its Host check refuses a Host that is not local);
    # the gateway does the authentication, so no Jupyter token.
    argv = [exe, "--no-browser", "--ip=127.0.0.1", "--port=%d" % port, "--port-retries=0",
            "--notebook-dir=" + notebooks, "--NotebookApp.allow_remote_access=True", "--NotebookApp.token=",
            "--NotebookApp.password="]
    if os.geteuid() == 0:  # CI runs as root
        argv.append("--allow-root")
    app = App("jupyter", root, argv, port, env=env)
    try:
        wait_port(port, app.proc, app.log, "jupyter-notebook on 127.0.0.1:%d" % port, timeout=90)
    except Exception:
        app.stop()
        raise
    return app


@pytest.fixture(scope="module")
def apps(gateway, redis, vite, jupyter, upstream):
    """One sandbox with the three apps' ports, each with its own host mode."""

    class Apps:
        pass

    a = Apps()
    a.id = gwtest.new_sandbox_id("apps")
    a.vite, a.jupyter, a.plain = vite.port, jupyter.port, upstream.port
    a.token = gwtest.register_sandbox(
        redis, a.id, ports={vite.port: "private", jupyter.port: "private", upstream.port: "private"},
        extra={"host:%d" % vite.port: "localhost", "host:%d" % jupyter.port: "preserve",
               "host:%d" % upstream.port: "preserve"})
    # the same Jupyter on a `localhost` port of another sandbox: Host and Origin both say localhost:<n>
    a.id_localhost = gwtest.new_sandbox_id("appslh")
    gwtest.register_sandbox(redis, a.id_localhost, ports={jupyter.port: "private"}, token=a.token,
                            extra={"host:%d" % jupyter.port: "localhost"})
    a.gw = gateway
    yield a
    gwtest.unregister_sandbox(redis, a.id)
    gwtest.unregister_sandbox(redis, a.id_localhost)


def origin(gw, host):
    return "https://%s:%d" % (host, gw.tls_port)


def tls_ctx(certs):
    return ssl.create_default_context(cafile=certs["ca"])


def ws_connect(gw, host, path, certs, headers=None, subprotocols=None):
    import websockets

    return websockets.connect("wss://%s:%d%s" % (host, gw.tls_port, path), host="127.0.0.1", port=gw.tls_port,
                              ssl=tls_ctx(certs), server_hostname=host, extra_headers=list((headers or {}).items()),
                              subprotocols=subprotocols, compression=None, ping_interval=None, open_timeout=15,
                              close_timeout=5)


def run(coro, timeout=60):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


# --- Vite on a `localhost` port -------------------------------------------------


def test_vite_page_and_client(apps, curl):
    host = apps.gw.host(apps.vite, apps.id)
    hdr = {bh.TOKEN_HEADER: apps.token}
    page = curl(host, "/", headers=dict(hdr, Accept="text/html"))
    assert page.status == 200, (page.status, page.body[:300])
    assert b"/@vite/client" in page.body, "Vite injects its client into the page: %r" % page.body[:500]
    assert b'id="msg"' in page.body
    client = curl(host, "/@vite/client", headers=hdr)
    assert client.status == 200, (client.status, client.body[:300])
    assert "javascript" in client.headers.get("content-type", ""), client.headers
    assert b"vite-hmr" in client.body, "the HMR client (its WebSocket protocol) is missing"
    mod = curl(host, "/src/main.js", headers=hdr, http2=True)
    assert mod.status == 200 and b"message.js" in mod.body, (mod.status, mod.body[:300])


def test_vite_hmr_websocket_connected(apps, curl, certs):
    """The HMR socket as Vite's client opens it: the preview host, the token
    from /@vite/client, protocol vite-hmr; Vite's first message is
    {"type":"connected"}."""
    host = apps.gw.host(apps.vite, apps.id)
    client = curl(host, "/@vite/client", headers={bh.TOKEN_HEADER: apps.token})
    m = re.search(rb'const wsToken = "([^"]+)"', client.body)
    assert m, "no wsToken in /@vite/client"
    ws_token = m.group(1).decode()

    async def go():
        async with ws_connect(apps.gw, host, "/?token=" + ws_token, certs,
                              {bh.TOKEN_HEADER: apps.token, "Origin": origin(apps.gw, host)},
                              subprotocols=["vite-hmr"]) as ws:
            assert ws.subprotocol == "vite-hmr"
            return json.loads(await asyncio.wait_for(ws.recv(), 20))

    first = run(go())
    assert first.get("type") == "connected", first


@pytest.fixture(scope="module")
def browser_env():
    if not os.access(CHROMIUM, os.X_OK):
        missing("%s is missing (apt-get install chromium)" % CHROMIUM)
    node = shutil.which("node")
    if node is None or not os.path.isdir(os.path.join(BROWSER_DIR, "node_modules", "playwright-core")):
        missing("node or playwright-core is missing (npm ci --prefix tests/integration/browser)")
    return {"node": node, "chromium": CHROMIUM}


def test_vite_hmr_edit_reaches_the_page_without_reload(apps, vite, browser_env, tmp_path):
    host = apps.gw.host(apps.vite, apps.id)
    cfg = {"executablePath": browser_env["chromium"], "userDataDir": str(tmp_path / "profile"),
           "resolverRules": "MAP *.%s 127.0.0.1" % gwtest.DOMAIN,
           "url": "https://%s:%d/?lizard_token=%s" % (host, apps.gw.tls_port, apps.token), "selector": "#msg",
           "initial": "hello from vite", "edited": "edited through the gateway", "timeoutMs": 30000}
    proc = subprocess.Popen([browser_env["node"], os.path.join(BROWSER_DIR, "vite_hmr.js"), json.dumps(cfg)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=BROWSER_DIR)
    msgs = []

    def expect(key, timeout=120):
        deadline = time.monotonic() + timeout
        buf = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([proc.stdout], [], [], 1)
            if not r:
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.startswith(b"{"):
                    obj = json.loads(line)
                    msgs.append(obj)
                    if key in obj:
                        return obj
        proc.kill()
        raise AssertionError("vite_hmr.js gave no %r: %r\n%s" % (key, msgs, proc.stderr.read().decode()[-3000:]))

    try:
        ready = expect("ready")
        assert ready["initial_seen"], "the page never showed Vite's module output: %r" % ready
        assert ready["connected"], "Vite's client never logged '[vite] connected.' (HMR socket): %r" % ready
        with open(os.path.join(vite.root, "src", "message.js"), "w") as f:
            f.write("export const message = 'edited through the gateway';\n")
        proc.stdin.write(b"edited\n")
        proc.stdin.flush()
        res = expect("done")["result"]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert not res.get("error"), res
    assert res["landed_url"] == "https://%s:%d/" % (host, apps.gw.tls_port), res
    assert res["edit_seen"], "the edit never reached the page: %r" % res
    assert res["marker"] == "still here" and res["navigations_after_edit"] == 0, \
        "the page was reloaded instead of hot-updated: %r" % res
    assert any("[vite] hot updated" in ln for ln in res["console"]), res["console"]
    # the HMR WebSocket came over the page's HTTP/2 connection (RFC 8441): DevTools saw its handshake answered 200
    # (101 over HTTP/1.1), and the gateway's access log has it as a CONNECT over HTTP/2 (written when the stream ended)
    hs = res.get("ws_handshakes") or []
    assert hs and all(h["status"] == 200 for h in hs), "not an extended CONNECT: %r" % hs
    def h2_websockets():
        with open(apps.gw.config()["log"]["access"]) as f:
            recs = [json.loads(ln) for ln in f if ln.strip()]
        return [r for r in recs if r.get("sandbox") == apps.id and r.get("port") == apps.vite and r.get("method") == "CONNECT"]

    gwtest.wait_for(h2_websockets, 10, what="the access log line of the HMR WebSocket")
    assert all(r["protocol"] == "HTTP/2" and r["status"] == 200 for r in h2_websockets()), h2_websockets()


# --- Jupyter on a `preserve` port -------------------------------------------------


class JupyterClient:
    """curl with a cookie jar, as a browser tab on the preview host would be."""

    def __init__(self, apps, curl, tmp_path, sandbox_id):
        self.apps, self.curl = apps, curl
        self.host = apps.gw.host(apps.jupyter, sandbox_id)
        self.origin = origin(apps.gw, self.host)
        self.jar = str(tmp_path / "jar.txt")

    def req(self, path, method=None, data=None, headers=None):
        h = {bh.TOKEN_HEADER: self.apps.token}
        h.update(headers or {})
        return self.curl(self.host, path, method=method, data=data, headers=h,
                         extra_args=("-b", self.jar, "-c", self.jar))

    def xsrf(self):
        with open(self.jar) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 7 and parts[5] == "_xsrf":
                    return parts[6]
        return None


def execute_cell(j, kid, xsrf, certs, code, silence_s):
    """Runs `code` in kernel `kid` over its WebSocket through the gateway, as
    the notebook page does; waits up to silence_s for each message. Returns
    (the cell's output, the execute_reply status)."""
    session = uuid.uuid4().hex
    msg_id = uuid.uuid4().hex
    execute = {"header": {"msg_id": msg_id, "username": "test", "session": session, "msg_type": "execute_request",
                          "version": "5.3"},
               "parent_header": {}, "metadata": {}, "channel": "shell",
               "content": {"code": code, "silent": False, "store_history": True,
                           "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}

    async def go():
        out, status = [], None
        cookie = "_xsrf=" + xsrf
        async with ws_connect(j.apps.gw, j.host, "/api/kernels/%s/channels?session_id=%s" % (kid, session), certs,
                              {bh.TOKEN_HEADER: j.apps.token, "Origin": j.origin, "Cookie": cookie}) as ws:
            await ws.send(json.dumps(execute))
            while status != "ok" or not out:
                m = json.loads(await asyncio.wait_for(ws.recv(), silence_s))
                if m.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if m["msg_type"] == "stream":
                    out.append(m["content"]["text"])
                elif m["msg_type"] == "execute_reply":
                    status = m["content"]["status"]
        return "".join(out), status

    return run(go(), timeout=silence_s + 60)


@pytest.mark.parametrize("mode", ["preserve", "localhost"])
def test_jupyter_notebook_kernel_and_cell(apps, curl, certs, tmp_path, jupyter, mode):
    j = JupyterClient(apps, curl, tmp_path, apps.id if mode == "preserve" else apps.id_localhost)
    tree = j.req("/tree", headers={"Accept": "text/html"})
    assert tree.status == 200, "Jupyter's tree: %d %r\n%s" % (tree.status, tree.body[:300], gwtest.tail(jupyter.log))
    assert b"Jupyter" in tree.body
    xsrf = j.xsrf()
    assert xsrf, "Jupyter set no _xsrf cookie on the tree page"

    # a new notebook, as the tree page's "New" button does (same-origin POST with the XSRF header)
    api = {"Origin": j.origin, "X-XSRFToken": xsrf, "Content-Type": "application/json",
           "Referer": j.origin + "/tree"}
    nb = j.req("/api/contents", method="POST", data=json.dumps({"type": "notebook"}), headers=api)
    assert nb.status == 201, "POST /api/contents: %d %r\n%s" % (nb.status, nb.body[:300], gwtest.tail(jupyter.log))
    path = nb.json()["path"]
    assert path.endswith(".ipynb")

    kernel = j.req("/api/kernels", method="POST", data=json.dumps({"name": "python3"}), headers=api)
    assert kernel.status == 201, "POST /api/kernels: %d %r\n%s" % (kernel.status, kernel.body[:300],
                                                                   gwtest.tail(jupyter.log))
    kid = kernel.json()["id"]

    text, status = execute_cell(j, kid, xsrf, certs, "print('lizard says', 6 * 7)", 60)
    assert status == "ok"
    assert text == "lizard says 42\n", text
    gone = j.req("/api/kernels/" + kid, method="DELETE", headers=api)
    assert gone.status == 204, gone.status


# --- a `preserve` port beside them ----------------------------------------------------


def test_preserve_port_beside_them_keeps_the_host(apps, curl, upstream):
    host = apps.gw.host(apps.plain, apps.id)
    r = curl(host, "/echo", headers={bh.TOKEN_HEADER: apps.token, "Origin": origin(apps.gw, host)})
    assert r.status == 200, r
    seen = {k.lower(): v for k, v in r.json()["headers"]}
    assert seen.get("host") in (host, "%s:%d" % (host, apps.gw.tls_port)), seen
    assert seen.get("origin") == origin(apps.gw, host), seen


# --- a real app's big static file on the zero-copy path ---------------------------------


def spliced(g):
    """(lizard_spliced_responses_total, lizard_spliced_bytes_total)"""
    status, body = g.admin_get("/metrics")
    assert status == 200, body[-200:]
    got = {}
    for line in body.decode().splitlines():
        name, _, value = line.partition(" ")
        if name in ("lizard_spliced_responses_total", "lizard_spliced_bytes_total"):
            got[name] = int(float(value))
    return got["lizard_spliced_responses_total"], got["lizard_spliced_bytes_total"]


def test_jupyter_static_file_spliced_on_a_trusted_listener(gw_factory, redis, jupyter, curl):
    """Tornado (Jupyter's server) serves its static files with a Content-Length:
    over a trusted plain listener a big one takes splice(2) (upstream.splice,
    on by default), and the browser gets exactly the file on disk, twice on one
    connection. lizard_spliced_bytes_total shows the path was taken."""
    import importlib.util

    static = os.path.join(importlib.util.find_spec("notebook").submodule_search_locations[0], "static")
    rel = "notebook/js/main.min.js"  # 2.8 MB: what comes with the head (about 220 KB here) leaves most of it to splice
    with open(os.path.join(static, rel), "rb") as f:
        want = f.read()
    assert len(want) >= 256 * 1024, "Debian's %s is %d bytes: below the splice threshold" % (rel, len(want))
    g = gw_factory(name=gwtest.new_sandbox_id("gwj"), start=False)
    cfg = g.config()
    cfg["listen"][1]["trusted"] = True  # the plain listener serves (a TLS-terminating balancer in front)
    g.overrides = dict(g.overrides or {}, listen=cfg["listen"])
    g.start()
    sid = gwtest.new_sandbox_id("js")
    gwtest.register_sandbox(redis, sid, ports={jupyter.port: "public"}, extra={"host:%d" % jupyter.port: "preserve"})
    try:
        before = spliced(g)
        host = g.host(jupyter.port, sid)
        for _ in range(2):
            r = curl(host, "/static/" + rel, gw=g, plain=True)
            assert r.status == 200, (r.status, r.body[:200], gwtest.tail(jupyter.log))
            assert r.headers.get("content-length") == str(len(want)), r.headers
            assert r.body == want, "%d bytes, not the %d of the file on disk" % (len(r.body), len(want))
        # the path was taken: both responses, all of each body but what came with its head (tornado writes
        # the file in 64 KiB pieces; the first read took about 220 KB of it with the head here)
        responses, spliced_bytes = spliced(g)
        assert responses - before[0] == 2, "the static file did not take the zero-copy path"
        assert 0 < spliced_bytes - before[1] <= 2 * len(want), (before, responses, spliced_bytes)
    finally:
        gwtest.unregister_sandbox(redis, sid)
