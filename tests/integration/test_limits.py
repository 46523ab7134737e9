"""limits.max_connections_per_sandbox: one sandbox cannot hold more than its
share of the gateway's connections (429 too_many_connections), counted
across workers, and slots come back when exchanges end."""

import threading
import time

import gwtest


def test_connections_per_sandbox_limit(gw_factory, curl, register_sandbox, upstream):
    g = gw_factory({"limits": {"max_connections_per_sandbox": 2}}, name="gw-limit")
    sid, other = gwtest.new_sandbox_id(), gwtest.new_sandbox_id()
    for s in (sid, other):
        register_sandbox(s, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    assert curl(host, "/echo", gw=g).status == 200  # warm: the route is cached
    at_app = upstream.stats()["requests"]

    # two holders keep both slots until what follows is done: the app answers them once released
    slow = [None, None]
    gate = gwtest.new_sandbox_id("hold")

    def hold(i):
        slow[i] = curl(host, "/held/" + gate, gw=g, timeout=60)

    threads = [threading.Thread(target=hold, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()

    def both_held():
        # the warm request's slot is given back when its exchange is disposed, which on a loaded machine can
        # come after curl has its answer: a holder refused for it (429) is simply sent again
        for i in range(2):
            if slow[i] is not None and slow[i].status == 429:
                threads[i].join()
                slow[i] = None
                threads[i] = threading.Thread(target=hold, args=(i,))
                threads[i].start()
        return upstream.stats()["requests"] - at_app >= 2  # both reached the app: both hold a slot

    gwtest.wait_for(both_held, 30, what="both holders at the app")
    t0 = time.monotonic()
    r = curl(host, "/echo", gw=g)
    assert r.status == 429 and r.error_code() == "too_many_connections", r
    assert r.headers.get("cache-control") == "no-store"
    # a slot frees only when a holder is released (below); 5 s leaves a loaded machine's curl start and handshake
    # room
    assert time.monotonic() - t0 < 5.0, "the refusal must not wait for a slot"
    # another sandbox is not affected
    assert curl(g.host(upstream.port, other), "/echo", gw=g).status == 200
    upstream.get_json("/_release/" + gate)
    for t in threads:
        t.join(60)
    assert [x.status for x in slow] == [200, 200], slow
    # the slots came back (the holders' are given back as their exchanges are disposed, maybe after curl's answer)
    gwtest.wait_for(lambda: curl(host, "/echo", gw=g).status == 200, 10, what="a slot back")
    for _ in range(5):
        assert curl(host, "/echo", gw=g).status == 200


def test_slots_come_back_after_errors_and_client_aborts(gw_factory, curl, register_sandbox, upstream):
    g = gw_factory({"limits": {"max_connections_per_sandbox": 1},
                    "upstream": {"first_byte_timeout_ms": 300}}, name="gw-limit1")
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)
    # an upstream timeout, then a client that gives up mid-wait
    assert curl(host, "/slow-head/2000", gw=g).status == 504
    try:
        curl(host, "/slow-head/1000", gw=g, timeout=0.3, extra_args=("--max-time", "0.3"))
    except Exception:  # noqa: BLE001 - curl's own timeout is the point
        pass
    gwtest.wait_for(lambda: curl(host, "/echo", gw=g).status == 200, 5, what="the slot to come back")


def test_refused_by_the_sandbox_limit_gives_the_client_slot_back(gw_factory, curl, register_sandbox, upstream):
    """A request that got its client's slot and was then refused for the
    sandbox's (429) gives the client's slot back: after the sandbox's slot
    is free again, the same client is served, however often it was refused
    meanwhile (limits.max_connections_per_client 2, counted by the last
    X-Forwarded-For entry behind a trusted listener)."""
    g = gw_factory({"limits": {"max_connections_per_sandbox": 1, "max_connections_per_client": 2}},
                   name=gwtest.new_sandbox_id("gwl"), start=False)
    cfg_listen = g.base_config()["listen"]
    cfg_listen[1]["trusted"] = True
    g.overrides["listen"] = cfg_listen
    g.start()
    sid = gwtest.new_sandbox_id()
    register_sandbox(sid, ports={upstream.port: "public"})
    host = g.host(upstream.port, sid)

    def get(xff, path="/echo"):
        return curl(host, path, gw=g, plain=True, timeout=30, headers={"X-Forwarded-For": xff})

    assert get("10.0.0.2").status == 200  # warm: the route is cached
    slow = []
    gate = gwtest.new_sandbox_id("hold")

    def start_holder():
        # the holder keeps the slot until the refusals below are done: the app answers it once released
        t = threading.Thread(target=lambda: slow.append(get("10.0.0.1", "/held/" + gate)))
        t.start()
        return t

    holder = [start_holder()]

    def slot_taken():
        # the warm request's slot is given back when its exchange is disposed, which on a loaded machine can
        # come after curl has its answer: a holder that came first is refused (429) and is simply sent again
        if slow and slow[-1].status == 429:
            holder[0].join()
            slow.clear()
            holder[0] = start_holder()
            return False
        return get("10.0.0.2").status == 429

    # another client takes the sandbox's only slot: this one is refused, more than its own limit of times
    gwtest.wait_for(slot_taken, 30, what="the sandbox's slot to be taken")
    refused = [get("10.0.0.2") for _ in range(3)]
    upstream.get_json("/_release/" + gate)
    holder[0].join(60)
    assert [r.status for r in slow] == [200], slow
    assert [(r.status, r.error_code()) for r in refused] == [(429, "too_many_connections")] * 3, refused
    # the sandbox's slot is back (once the holder's exchange is disposed), and so are the client's
    gwtest.wait_for(lambda: get("10.0.0.2").status == 200, 10, what="the sandbox's slot back")
