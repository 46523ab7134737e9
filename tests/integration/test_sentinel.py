"""Redis Sentinel: a real primary + replica and three redis-sentinel
processes on loopback. The gateway finds the primary through the
sentinels, keeps serving cached routes while the primary is killed, answers
uncached lookups 503 routing_unavailable quickly during the failover,
serves them again from the new primary, refuses a server that is a replica,
and meters every byte exactly once into the new primary's stream."""

import os
import signal
import threading
import time

import pytest

import fleet
import gwtest

pytestmark = pytest.mark.skipif(not gwtest.have_tool("redis-sentinel"), reason="redis-sentinel (Debian package) missing")

INSTANCE = "sentinel-gw-1"


@pytest.fixture
def cluster(workdir):
    c = fleet.Cluster(os.path.join(workdir, "sentinel-%s" % gwtest.new_sandbox_id()))
    try:
        c.start()
    except Exception:
        c.stop()
        raise
    yield c
    c.stop()


def sentinel_gateway(gw_factory, sentinels, master_name=fleet.MASTER, **extra):
    over = {"redis": {"address": None, "sentinels": sentinels, "master_name": master_name,
                      "connect_timeout_ms": 500, "lookup_timeout_ms": 1000, "reconnect_max_ms": 500},
            "metering": {"flush_interval_ms": 200}, "instance_id": INSTANCE}
    over.update(extra)
    return gw_factory(over, name=gwtest.new_sandbox_id("gws"))


def ready(g):
    return g.redis_connected()


def metric(g, name):
    status, body = g.admin_get("/metrics")
    assert status == 200, status
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError("no metric %s" % name)


def test_failover_mid_traffic(cluster, gw_factory, upstream, certs):
    primary = cluster.primary
    g = sentinel_gateway(gw_factory, cluster.addresses())
    gwtest.wait_for(lambda: ready(g), 15, what="/readyz through the sentinels")

    cached, uncached = gwtest.new_sandbox_id("sc"), gwtest.new_sandbox_id("su")
    for sid in (cached, uncached):
        gwtest.register_sandbox(primary, sid, ports={upstream.port: "public"})
    # both records must survive the failover: the replica has them before the primary dies
    assert primary.cmd("WAIT", "1", "5000") >= 1

    received = {cached: 0, uncached: 0}  # bytes of complete proxied responses, as the clients read them
    responses = {cached: 0, uncached: 0}
    errors = []
    stop = threading.Event()
    a = fleet.Client(g.tls_port, g.host(upstream.port, cached), certs["ca"])
    status, n, _ = a.get("/bytes/5000")
    assert status == 200, status
    received[cached] += n
    responses[cached] += 1
    # The gateway counts a response head as the HTTP/1.1 text it built from the upstream's head,
    # which is a fixed number of bytes shorter than what the client reads (h2o adds its own
    # fields): measured once here, so that the totals below can be compared exactly.
    gwtest.wait_for(lambda: fleet.egress_of(fleet.stream_records(primary), {cached}) >= 5000, 10, what="the first response billed")
    head_gap = n - fleet.egress_of(fleet.stream_records(primary), {cached})
    assert 0 <= head_gap < 512, head_gap

    def cached_traffic():
        # a cached route keeps serving throughout (stale while Redis cannot answer)
        while not stop.is_set():
            try:
                status, n, _ = a.get("/bytes/5000")
            except OSError as e:
                errors.append(repr(e))
                continue
            if status == 200:
                received[cached] += n
                responses[cached] += 1
            else:
                errors.append(status)
            time.sleep(0.01)

    t = threading.Thread(target=cached_traffic)
    t.start()
    try:
        time.sleep(1.0)  # traffic flows and is metered into the first primary
        t_kill = time.monotonic()
        primary.kill()  # SIGKILL mid-traffic

        b = fleet.Client(g.tls_port, g.host(upstream.port, uncached), certs["ca"])
        unavailable, slowest_503 = 0, 0.0
        while True:
            t0 = time.monotonic()
            status, n, body = b.get("/bytes/3000")
            took = time.monotonic() - t0
            if status == 200:
                received[uncached] += n
                responses[uncached] += 1
                break
            assert status == 503 and b"routing_unavailable" in body, (status, body)
            unavailable += 1
            slowest_503 = max(slowest_503, took)
            # 60 s: the sentinels need down-after (1 s) + election + promotion; the rest is slack
            # for a loaded 2-core machine
            assert time.monotonic() - t_kill < 60, "uncached lookups did not recover within 60 s"
            time.sleep(0.05)
        recovery = time.monotonic() - t_kill
        print("\nsentinel failover: uncached lookups served again %.2f s after the primary was killed "
              "(%d x 503 routing_unavailable meanwhile, slowest %.0f ms)" % (recovery, unavailable, slowest_503 * 1000))
        assert unavailable > 0  # it did fail over: the gateway could not answer for a while
        # "quickly": no request waited for a Redis that was gone beyond the lookup deadline (1 s),
        # plus slack for the loaded machine
        assert slowest_503 < 5.0, slowest_503
        for _ in range(5):  # the new primary answers every time
            status, n, _ = b.get("/bytes/3000")
            assert status == 200, status
            received[uncached] += n
            responses[uncached] += 1
        time.sleep(0.5)
    finally:
        stop.set()
        t.join(timeout=30)
    a.close()
    b.close()
    assert errors == [], errors[:5]

    new_primary = cluster.current_primary()
    assert new_primary is cluster.replica
    # every count reaches the new primary: the flusher's and, at SIGTERM, the final flush's
    assert g.stop() == 0
    recs = fleet.stream_records(new_primary)
    kept = fleet.dedup(recs)
    assert all(r["gateway"] == INSTANCE for r in kept)
    for sid in (cached, uncached):
        expected = received[sid] - head_gap * responses[sid]
        assert fleet.egress_of(kept, {sid}) == expected, (sid, fleet.egress_of(kept, {sid}), expected, responses[sid])
    log = gwtest.tail(g.log, 1000)
    assert "switch-master" in log or "cannot connect" in log, log


def test_replica_is_refused(workdir, gw_factory, upstream, certs):
    """A sentinel that names a replica as the primary (here: one told to
    monitor the replica) does not get the gateway to use it: ROLE is checked
    before any command, so routes are not read from it and nothing is
    written to it."""
    d = os.path.join(workdir, "sentinel-replica-%s" % gwtest.new_sandbox_id())
    primary = fleet.RedisNode(d).start()
    replica = fleet.RedisNode(d, replicaof=primary.port).start()
    s = fleet.Sentinel(d, replica.port)
    try:
        gwtest.wait_for(lambda: b"master_link_status:up" in replica.cmd("INFO", "replication"), 20, what="replica sync")
        s.start()
        assert s.master_port_now() == replica.port
        sid = gwtest.new_sandbox_id("sr")
        gwtest.register_sandbox(primary, sid, ports={upstream.port: "public"})
        assert primary.cmd("WAIT", "1", "5000") >= 1
        g = sentinel_gateway(gw_factory, ["127.0.0.1:%d" % s.port])
        gwtest.wait_for(lambda: "not a primary" in gwtest.tail(g.log), 15, what="the gateway refusing the replica")
        c = fleet.Client(g.tls_port, g.host(upstream.port, sid), certs["ca"])
        status, _, body = c.get("/bytes/10")
        c.close()
        assert status == 503 and b"routing_unavailable" in body, (status, body)
        assert not g.redis_connected() and g.admin_get("/readyz")[0] == 200
    finally:
        s.stop()
        replica.stop()
        primary.stop()


def test_batch_waits_for_a_replica(cluster, gw_factory, upstream, certs):
    """With a replica, a metering batch counts as written only once WAIT
    says a replica has it: with the replica stopped (SIGSTOP) the records
    are in the primary's stream but stay pending; they are settled once the
    replica is back."""
    primary, replica = cluster.primary, cluster.replica
    g = sentinel_gateway(gw_factory, cluster.addresses())
    gwtest.wait_for(lambda: ready(g), 15, what="/readyz through the sentinels")
    sid = gwtest.new_sandbox_id("sw")
    gwtest.register_sandbox(primary, sid, ports={upstream.port: "public"})
    c = fleet.Client(g.tls_port, g.host(upstream.port, sid), certs["ca"])
    assert c.get("/bytes/100")[0] == 200
    # its egress too (a batch after its ingress, once the client's ACK is seen): nothing of it may settle later
    gwtest.wait_for(lambda: sum(int(r["egress"]) for r in records_of(primary, sid)) >= 100 and
                    metric(g, "lizard_metering_pending_records") == 0, 10, what="the first request's batches written")
    written = metric(g, "lizard_metering_records_written_total")

    before = len(records_of(primary, sid))
    replica.pause()
    try:
        assert c.get("/bytes/200")[0] == 200
        # the request's first batch (its ingress; its egress is billed once acknowledged, a batch later,
        # and queued behind this one) reaches the primary's stream and stays pending there
        gwtest.wait_for(lambda: len(records_of(primary, sid)) > before, 10, what="the second batch in the stream")
        time.sleep(2.5)  # > 2 WAIT rounds of 1 s
        assert metric(g, "lizard_metering_records_written_total") == written
        assert metric(g, "lizard_metering_pending_records") >= 1
    finally:
        replica.resume()
    gwtest.wait_for(lambda: metric(g, "lizard_metering_records_written_total") > written, 15,
                    what="the batch settled once the replica acknowledged it")
    c.close()
    assert g.stop() == 0
    kept = fleet.dedup(fleet.stream_records(primary))
    assert sum(1 for r in kept if r["sandbox"] == sid) >= 2


def records_of(redis, sid):
    return [r for r in fleet.stream_records(redis) if r["sandbox"] == sid]


def test_replica_in_first_sync_does_not_count(cluster, gw_factory, upstream, certs):
    """A replica still in its first sync (connected, state=wait_bgsave) holds
    nothing, and ROLE does not list it: the batch must not count as written
    on the primary alone. The primary is killed two flush intervals after
    the bytes were delivered, the sentinels promote that replica, and the new
    primary holds the bytes, once: the INCRBY total and the stream."""
    primary, replica = cluster.primary, cluster.replica
    g = sentinel_gateway(gw_factory, cluster.addresses())
    gwtest.wait_for(lambda: ready(g), 15, what="/readyz through the sentinels")
    sid = gwtest.new_sandbox_id("sf")
    gwtest.register_sandbox(primary, sid, ports={upstream.port: "public"})
    assert primary.cmd("WAIT", "1", "5000") >= 1
    c = fleet.Client(g.tls_port, g.host(upstream.port, sid), certs["ca"])
    # the route is cached: nothing more is read from Redis; the same size as below: the same head
    status, n0, _ = c.get("/bytes/1000000")
    assert status == 200
    gwtest.wait_for(lambda: metric(g, "lizard_metering_pending_records") == 0 and fleet.egress_total(primary, sid) > 0,
                    10, what="the first request written")
    # the gateway counts a response head as the HTTP/1.1 text it built, a fixed number of bytes
    # shorter than what the client reads (see test_failover_mid_traffic)
    head_gap = n0 - fleet.egress_total(primary, sid)
    assert 0 <= head_gap < 512, head_gap

    recs_before = len(records_of(primary, sid))
    fleet.stall_first_sync(primary, replica)
    status, n, _ = c.get("/bytes/1000000")
    assert status == 200 and n > 1000000, (status, n)
    c.close()
    expected = n - head_gap  # what the new primary must hold (the first request went with the replica's restart)
    # a batch of this request executed on the primary: its ingress at least (its egress is billed once
    # acknowledged and may wait, queued behind that batch, which no replica acknowledges)
    gwtest.wait_for(lambda: len(records_of(primary, sid)) > recs_before, 10, what="a batch executed on the primary")
    time.sleep(2 * 0.2 + 0.2)  # two flush intervals (200 ms) after the bytes
    primary.kill()

    gwtest.wait_for(lambda: cluster.sentinels[0].master_port_now() == replica.port, 60, interval=0.2,
                    what="the sentinels promoting the replica that was in its first sync")
    # the gateway sends the batch again to the new primary (60 s: the sentinels' failover on a loaded machine)
    gwtest.wait_for(lambda: fleet.egress_total(replica, sid) > 0 or records_of(replica, sid), 60, interval=0.2,
                    what="the new primary getting the metering")
    # the new primary has no replica: nothing counts as written; at exit the final flush executes the
    # rest there and the journal keeps everything for the next start
    assert metric(g, "lizard_metering_pending_records") >= 1
    assert g.stop() == 0, gwtest.tail(g.log)
    assert "kept, written at the next start" in gwtest.tail(g.log, 200)
    recs = records_of(replica, sid)
    assert len(fleet.dedup(recs)) == len(recs), recs  # no (gateway, seq) twice
    assert fleet.egress_of(recs, {sid}) == expected, (fleet.egress_of(recs, {sid}), expected)
    assert fleet.egress_total(replica, sid) == expected


def test_failover_during_first_sync_writes_every_batch(cluster, gw_factory, upstream, certs):
    """The only replica is in its first sync (the primary holds the sync
    back): no replica acknowledges anything. Four 1 MB downloads, a batch
    or more each: every one reaches the primary as it forms (none waits for
    an earlier one's acknowledgement), and after the primary is SIGKILLed
    for good and that replica promoted (empty), every delivered byte is on
    the new primary within 15 s, in the stream and in the INCRBY total, none
    twice. (Before: one batch, then nothing until SIGTERM.)"""
    primary, replica = cluster.primary, cluster.replica
    g = sentinel_gateway(gw_factory, cluster.addresses())
    gwtest.wait_for(lambda: ready(g), 15, what="/readyz through the sentinels")
    sid = gwtest.new_sandbox_id("sh")
    gwtest.register_sandbox(primary, sid, ports={upstream.port: "public"})
    assert primary.cmd("WAIT", "1", "5000") >= 1
    c = fleet.Client(g.tls_port, g.host(upstream.port, sid), certs["ca"])
    status, n0, _ = c.get("/bytes/1000000")  # the route cached, and the head's gap measured
    assert status == 200
    gwtest.wait_for(lambda: metric(g, "lizard_metering_pending_records") == 0 and fleet.egress_total(primary, sid) > 0,
                    10, what="the first request written")
    head_gap = n0 - fleet.egress_total(primary, sid)
    assert 0 <= head_gap < 512, head_gap

    fleet.stall_first_sync(primary, replica)
    delivered = 0
    for i in range(4):
        status, n, _ = c.get("/bytes/1000000")
        assert status == 200 and n > 1000000, (status, n)
        delivered += n - head_gap
        # the next download after this one's batch formed (flush interval 200 ms): batches of their own
        gwtest.wait_for(lambda: fleet.egress_total(primary, sid) >= n0 - head_gap + delivered, 10,
                        what="download %d on the primary, as its batch formed" % (i + 1))
    c.close()
    assert metric(g, "lizard_metering_unacknowledged_batches") >= 4
    primary.kill()  # for good

    gwtest.wait_for(lambda: cluster.sentinels[0].master_port_now() == replica.port, 60, interval=0.2,
                    what="the sentinels promoting the replica that was in its first sync")
    t_promoted = time.monotonic()
    # the bound under test: 15 s from the promotion (the gateway's reconnect and one INFO)
    gwtest.wait_for(lambda: fleet.egress_total(replica, sid) == delivered, 15, interval=0.1,
                    what="every delivered byte in the new primary's INCRBY total")
    recs = records_of(replica, sid)
    print("\nfailover during a first sync: %d bytes on the new primary %.1f s after the promotion, %d batches "
          "executed again" % (fleet.egress_of(recs, {sid}), time.monotonic() - t_promoted,
                              metric(g, "lizard_metering_batches_reexecuted_total")))
    assert len(fleet.dedup(recs)) == len(recs), recs  # no (gateway, seq) twice
    assert fleet.egress_of(recs, {sid}) == delivered
    assert metric(g, "lizard_metering_batches_reexecuted_total") >= 4
    assert g.stop() == 0, gwtest.tail(g.log)
    recs = records_of(replica, sid)
    assert len(fleet.dedup(recs)) == len(recs) and fleet.egress_of(recs, {sid}) == delivered
    assert fleet.egress_total(replica, sid) == delivered


def flusher_clients(primary):
    """The metering flusher's connection: while batches wait for a replica it asks INFO replication every tick."""
    return [ln for ln in primary.cmd("CLIENT", "LIST").decode().splitlines() if "cmd=info" in ln]


def test_executed_batch_is_never_executed_again_on_its_primary(cluster, gw_factory, upstream, certs):
    """EXEC took a batch, no replica acknowledges it (the replica stopped
    with SIGSTOP); the flusher's connection is killed (a blip after EXEC),
    then SIGTERM, then a start on the journal: the flusher after its
    reconnect, the final flush and the replay at the next start find the
    batch held by the same primary (same replication id, offset below its
    own) and never execute it again. The total equals the bytes, each record
    is in the stream once, and the replay settles once the replica is back."""
    primary, replica = cluster.primary, cluster.replica
    g = sentinel_gateway(gw_factory, cluster.addresses())
    spill = g.config()["metering"]["spill_file"]
    gwtest.wait_for(lambda: ready(g), 15, what="/readyz through the sentinels")
    sid = gwtest.new_sandbox_id("sd")
    gwtest.register_sandbox(primary, sid, ports={upstream.port: "public"})
    assert primary.cmd("WAIT", "1", "5000") >= 1
    c = fleet.Client(g.tls_port, g.host(upstream.port, sid), certs["ca"])
    assert c.get("/bytes/10")[0] == 200
    gwtest.wait_for(lambda: metric(g, "lizard_metering_pending_records") == 0 and records_of(primary, sid), 10,
                    what="the first batch written")

    n_before = len(records_of(primary, sid))
    replica.pause()
    try:
        assert c.get("/bytes/50000")[0] == 200
        c.close()
        # a batch of this request (its ingress at least; its egress is billed once acknowledged)
        gwtest.wait_for(lambda: len(records_of(primary, sid)) > n_before, 10, what="the batch executed")
        gwtest.wait_for(lambda: metric(g, "lizard_metering_unacknowledged_batches") >= 1 and flusher_clients(primary), 10,
                        what="the flusher waiting for a replica's acknowledgement")
        assert metric(g, "lizard_metering_pending_records") >= 1
        # a connection blip after EXEC: the flusher reconnects to the same primary
        before_blip = records_of(primary, sid)
        killed = {ln.split("id=", 1)[1].split(" ", 1)[0] for ln in flusher_clients(primary)}
        for cid in killed:
            primary.cmd("CLIENT", "KILL", "ID", cid)
        gwtest.wait_for(lambda: [ln for ln in flusher_clients(primary) if ln.split("id=", 1)[1].split(" ", 1)[0] not in killed],
                        10, what="the flusher on a new connection, waiting for a replica again")
        time.sleep(0.5)  # its INFO compared with the batch, and two ticks (200 ms) in which it could have sent it
        assert records_of(primary, sid) == before_blip
        assert g.stop() == 0, gwtest.tail(g.log)
        assert os.path.exists(spill), gwtest.tail(g.log, 100)
        after_stop = records_of(primary, sid)
        assert len(fleet.dedup(after_stop)) == len(after_stop), after_stop  # no (gateway, seq) twice
        assert fleet.egress_total(primary, sid) == fleet.egress_of(after_stop, {sid})
        g.start()  # replays the journal: the replica is still stopped, so it stays pending
        gwtest.wait_for(lambda: metric(g, "lizard_metering_unacknowledged_batches") >= 1, 10,
                        what="the replayed batch found held by the primary")
        assert records_of(primary, sid) == after_stop
    finally:
        replica.resume()
    gwtest.wait_for(lambda: metric(g, "lizard_metering_pending_records") == 0, 15,
                    what="the replay settled once the replica acknowledged")
    assert records_of(primary, sid) == after_stop
    assert fleet.egress_total(primary, sid) == fleet.egress_of(after_stop, {sid})
    assert g.stop() == 0
    assert not os.path.exists(spill)
    assert records_of(primary, sid) == after_stop
    assert fleet.egress_total(primary, sid) == fleet.egress_of(after_stop, {sid})
