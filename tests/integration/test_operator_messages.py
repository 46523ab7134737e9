"""What the gateway tells the people who run it and build on it (issue 21):
upstream_forbidden says whether the record's addr is missing, not an IP
literal or outside upstream.allowed_networks, and the gateway logs the addr
and why once per (sandbox, lifecycle); the port_not_open page does not tell a
user to listen on 0.0.0.0 "not 127.0.0.1" when the gateway reaches the
sandbox over loopback;
the start-up open-files warning names the shell's ulimit too; the access log
gives a WebSocket upgrade a duration."""

import asyncio
import json
import os
import resource
import ssl
import subprocess

import browser_helpers as bh
import gwtest


def log_text(g):
    with open(g.log, "rb") as f:
        return f.read().decode("utf-8", "replace")


def test_upstream_forbidden_says_why_and_logs_the_addr_once(gw_factory, redis, curl):
    g = gw_factory({"workers": 1})  # one worker: "once" is per worker
    sid = gwtest.new_sandbox_id("fb")
    host = g.host(3000, sid)

    def get(headers=None):
        return curl(host, "/", gw=g, headers=dict({bh.TOKEN_HEADER: token}, **(headers or {})))

    token = gwtest.register_sandbox(redis, sid, addr="vm-7.sandbox.internal", lifecycle="lc-a",
                                    ports={3000: "private"})
    for _ in range(3):
        r = get()
        assert r.status == 502 and r.error_code() == "upstream_forbidden", r
    msg = r.json()["error"]["message"]
    assert "not an IP address" in msg and "host names are never resolved" in msg, msg
    line = 'sandbox %s: addr "vm-7.sandbox.internal" refused: not an IP literal' % sid
    gwtest.wait_for(lambda: line in log_text(g), 5, what="the refusal in the log")
    assert log_text(g).count(line) == 1, log_text(g)

    # a new lifecycle with the same bad addr is said again, once
    gwtest.register_sandbox(redis, sid, addr="vm-7.sandbox.internal", lifecycle="lc-b", ports={3000: "private"},
                            token=token)
    get()
    gwtest.wait_for(lambda: log_text(g).count(line) == 2, 5, what="the second lifecycle's line")
    get()
    assert log_text(g).count(line) == 2

    # outside the allowed networks, and missing: each says so
    gwtest.register_sandbox(redis, sid, addr="10.9.9.9", ports={3000: "private"}, token=token)
    msg = get().json()["error"]["message"]
    assert "outside the allowed networks" in msg, msg
    gwtest.wait_for(lambda: 'addr "10.9.9.9" refused: outside upstream.allowed_networks' in log_text(g), 5,
                    what="the outside-networks line")
    key = "lizard:sbx:{%s}" % sid
    redis.cmd("HDEL", key, "addr")
    redis.cmd("PUBLISH", "lizard:routes", sid)
    r = get({"Accept": "text/html"})
    assert r.status == 502 and b"has no address" in r.body, r.body[:500]
    gwtest.wait_for(lambda: "addr (absent) refused: the record has no addr field" in log_text(g), 5,
                    what="the missing-addr line")


def test_port_not_open_over_loopback_does_not_say_listen_on_0000(gateway, register_sandbox, curl):
    """The gateway connects to 127.0.0.1 here: an app listening on 127.0.0.1
    would be reached, so "listen on 0.0.0.0, not 127.0.0.1" would send the
    user the wrong way; the hint names both."""
    closed = gwtest.free_port()
    sid = gwtest.new_sandbox_id("pno")
    register_sandbox(sid, ports={closed: "public"})
    host = gateway.host(closed, sid)
    r = curl(host, "/")
    assert r.status == 502 and r.error_code() == "port_not_open", r
    msg = r.json()["error"]["message"]
    assert "0.0.0.0 (not 127.0.0.1)" not in msg, msg
    assert "listening on 0.0.0.0 or 127.0.0.1" in msg and "loopback" in msg, msg
    page = curl(host, "/", headers={"Accept": "text/html"})
    assert b"Nothing is listening" in page.body and b"not 127.0.0.1" not in page.body, page.body[:800]


def test_open_files_warning_names_the_shells_ulimit(gw_factory):
    g = gw_factory({"workers": 1}, start=False)
    g.write_config()
    log = os.path.join(g.workdir, "nofile.log")

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))

    with open(log, "wb") as logf:
        proc = subprocess.Popen([gwtest.gateway_binary(), "-c", g.config_path], stdout=logf, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=g.env(), preexec_fn=low_limit, start_new_session=True)
    try:
        gwtest.wait_for(lambda: "open files limit 512 is below" in open(log).read() or proc.poll() is not None, 15,
                        what="the open-files warning")
    finally:
        gwtest.stop_process(proc)
    text = open(log).read()
    assert "raise LimitNOFILE=" in text and "ulimit -n" in text, text


def test_websocket_upgrade_has_a_duration_in_the_access_log(gateway, sandbox, certs):
    import websockets

    ctx = ssl.create_default_context(cafile=certs["ca"])
    path = "/ws?access-log=%s" % gwtest.new_sandbox_id()

    async def go():
        async with websockets.connect("wss://%s:%d%s" % (sandbox.host, gateway.tls_port, path), host="127.0.0.1",
                                      port=gateway.tls_port, ssl=ctx, server_hostname=sandbox.host,
                                      extra_headers=[(bh.TOKEN_HEADER, sandbox.token)], open_timeout=10) as ws:
            await ws.send("hello")
            return await asyncio.wait_for(ws.recv(), 10)

    assert asyncio.run(go()) == "hello"
    access = gateway.config()["log"]["access"]

    def line():
        with open(access) as f:
            for ln in f:
                if path in ln:
                    return json.loads(ln)
        return None

    rec = gwtest.wait_for(line, 10, what="the upgrade's access-log line")
    assert rec["status"] == 101, rec
    assert rec["duration_ms"] >= 0, "an upgrade's duration is the time to its 101, not -1: %r" % rec
