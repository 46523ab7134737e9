"""Several gateways on one Redis, as a fleet runs behind an L4 load
balancer: a PUBLISH on <prefix>routes reaches every gateway (the next
request on each sees the change); metering from several gateways sums
exactly to the bytes delivered, with distinct gateway ids and seqs; two
gateways can never share a spill file, and --check says so."""

import os
import subprocess

import fleet
import gwtest


def two_gateways(gw_factory, redis, flush_ms=200):
    out = []
    for i in (1, 2):
        name = gwtest.new_sandbox_id("gwf")
        out.append(gw_factory({"redis": {"address": "127.0.0.1:%d" % redis.port}, "instance_id": "fleet-gw-%d-%s" % (i, name),
                               "metering": {"flush_interval_ms": flush_ms}}, name=name))
    return out


def test_publish_evicts_on_every_gateway(gw_factory, redis, upstream, curl):
    gws = two_gateways(gw_factory, redis)
    sid = gwtest.new_sandbox_id("fe")
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    for g in gws:
        for _ in range(2):  # the second answer comes from the route cache (10 s)
            r = curl(g.host(upstream.port, sid), "/bytes/10", gw=g)
            assert r.status == 200, r
    # unexpose the port: within one round trip of the publish, on every gateway
    redis.cmd("HDEL", "lizard:sbx:{%s}" % sid, "port:%d" % upstream.port)
    redis.cmd("PUBLISH", "lizard:routes", sid)
    for g in gws:
        r = curl(g.host(upstream.port, sid), "/bytes/10", gw=g)
        assert r.status == 404 and r.error_code() == "port_not_exposed", r
    # and back
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    for g in gws:
        assert curl(g.host(upstream.port, sid), "/bytes/10", gw=g).status == 200


def test_metering_from_two_gateways_sums_exactly(gw_factory, redis, upstream, certs):
    gws = two_gateways(gw_factory, redis)
    sid = gwtest.new_sandbox_id("fm")
    gwtest.register_sandbox(redis, sid, ports={upstream.port: "public"})
    start = redis.cmd("XREVRANGE", "lizard:egress", "+", "-", "COUNT", "1")
    start_id = start[0][0].decode() if start else "0"

    def mine():
        recs = []
        for _id, fields in redis.cmd("XRANGE", "lizard:egress", "(" + start_id if start_id != "0" else "-", "+"):
            d = {fields[i].decode(): fields[i + 1].decode() for i in range(0, len(fields), 2)}
            if d["sandbox"] == sid:
                recs.append(d)
        return recs

    received, responses = 0, 0
    clients = [fleet.Client(g.tls_port, g.host(upstream.port, sid), certs["ca"]) for g in gws]
    # one response first, to learn how many head bytes the gateway counts less than the client reads
    status, n, _ = clients[0].get("/bytes/1000")
    assert status == 200
    # egress is billed once the client's TCP acknowledged it (docs/metering.md Metering), up to a second after the
    # request's ingress: wait for the response's own bytes
    gwtest.wait_for(lambda: sum(int(r["egress"]) for r in mine()) >= 1000, 10, what="the first response billed")
    head_gap = n - sum(int(r["egress"]) for r in mine())
    assert 0 <= head_gap < 512, head_gap
    received, responses = n, 1
    for i in range(60):
        c = clients[i % 2]
        status, n, _ = c.get("/bytes/%d" % (1000 + 37 * i))
        assert status == 200
        received += n
        responses += 1
    for c in clients:
        c.close()
    for g in gws:
        assert g.stop() == 0  # the final flush writes what is left

    recs = mine()
    by_gateway = {}
    for r in recs:
        by_gateway.setdefault(r["gateway"], []).append(int(r["seq"]))
    assert sorted(by_gateway) == sorted(g.config()["instance_id"] for g in gws), by_gateway
    for seqs in by_gateway.values():
        assert seqs == sorted(set(seqs)), seqs  # per gateway: increasing, no duplicate
    assert sum(int(r["egress"]) for r in fleet.dedup(recs)) == received - head_gap * responses


def test_shared_spill_file_is_refused_by_check(gw_factory, redis):
    """A fleet host running several gateways must give each its own
    metering.spill_file: the file is flocked while a gateway runs, a second
    gateway refuses to start (test_metering.py), and --check reports it too,
    so a deploy that reuses one fails before it starts anything."""
    g1 = gw_factory({"redis": {"address": "127.0.0.1:%d" % redis.port}, "instance_id": "fleet-k1"},
                    name=gwtest.new_sandbox_id("gwk"))
    spill = g1.config()["metering"]["spill_file"]
    g2 = gw_factory({"redis": {"address": "127.0.0.1:%d" % redis.port}, "metering": {"spill_file": spill},
                     "instance_id": "fleet-k2"}, name=gwtest.new_sandbox_id("gwk"), start=False)

    def check(instance_id):
        g2.overrides["instance_id"] = instance_id
        g2.write_config()
        return subprocess.run([gwtest.gateway_binary(), "-c", g2.config_path, "--check"], capture_output=True,
                              env=g2.env(), timeout=30)

    r = check("fleet-k2")
    assert r.returncode == 1, r
    assert b"metering.spill_file %s is in use by another lizard-gateway" % spill.encode() in r.stderr, r.stderr
    # the running instance's own config, checked again (say before a restart), is not a second gateway
    r = check("fleet-k1")
    assert r.returncode == 0 and b": ok" in r.stdout, r
    assert g1.stop() == 0
    r = check("fleet-k2")
    assert r.returncode == 0 and b": ok" in r.stdout, r
    assert not os.path.exists(spill), "--check must not create the spill file"
