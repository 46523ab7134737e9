"""Access log rotation: the rotator moves the file away and sends SIGUSR1;
the gateway opens a new file at the configured path. Requests keep flowing
during the rotation: every request has exactly one line, in the old file
(before the signal) or in the new one (after), none lost, none split."""

import json
import os
import signal
import threading
import time

import fleet
import gwtest


def lines(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data == b"" or data.endswith(b"\n"), data[-200:]
    return [json.loads(line) for line in data.splitlines()]


def test_sigusr1_reopens_the_access_log(gw_factory, redis, upstream, certs):
    g = gw_factory({"redis": {"address": "127.0.0.1:%d" % redis.port}}, name=gwtest.new_sandbox_id("gwl"))
    log = g.config()["log"]["access"]
    sid = gwtest.new_sandbox_id("lr")
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    sent = []
    stop = threading.Event()

    def traffic():
        c = fleet.Client(g.tls_port, g.host(upstream.port, sid), certs["ca"])
        i = 0
        while not stop.is_set():
            path = "/bytes/10?n=%d" % i
            status, _, _ = c.get(path)
            assert status == 200
            sent.append(path)
            i += 1
        c.close()

    t = threading.Thread(target=traffic)
    t.start()
    try:
        gwtest.wait_for(lambda: len(sent) >= 20, 20, what="traffic")
        os.rename(log, log + ".1")
        time.sleep(0.2)  # lines keep going to the moved file until the signal
        os.kill(g.proc.pid, signal.SIGUSR1)
        gwtest.wait_for(lambda: os.path.exists(log) and os.path.getsize(log) > 0, 10, what="a new access log")
        n_at_reopen = len(sent)
        gwtest.wait_for(lambda: len(sent) >= n_at_reopen + 20, 20, what="traffic after the reopen")
    finally:
        stop.set()
        t.join(timeout=30)
    assert g.stop() == 0
    assert "access log reopened" in gwtest.tail(g.log)

    old, new = lines(log + ".1"), lines(log)
    assert len(old) >= 20 and len(new) >= 20, (len(old), len(new))
    logged = [line["path"] for line in old + new if line.get("sandbox") == sid]
    assert sorted(logged) == sorted(sent), (len(logged), len(sent))  # each request once, none lost
    # the switch is one point in time: every line of the old file comes before every line of the new
    order = {p: i for i, p in enumerate(sent)}
    # (one client, one request at a time; a line is written as its request ends, so allow a little overlap)
    assert max(order[line["path"]] for line in old) < min(order[line["path"]] for line in new) + 4
