#!/usr/bin/python3
"""An example of the control plane's side of waking paused sandboxes
(CONTRACT.md, "Waking a paused sandbox"; docs/wake.md, "Waking paused sandboxes").

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

Stdlib only (the tiny RESP client and consumer loop of deploy/lizard_stream.py). Usage:

    resume-consumer.py [--redis 127.0.0.1:6379 | --redis unix:/path] [--prefix lizard:]
                       [--group control-plane] [--consumer NAME] [--delay 1.0]

Prints "ready" on stdout once its group exists; logs one line per entry on
stderr. SIGTERM/SIGINT stop it.
"""

import argparse
import os
import secrets
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lizard_stream import Resp, add_redis_args, consume, password_of  # noqa: E402  (deploy/lizard_stream.py)


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
    add_redis_args(ap, "control-plane")
    ap.add_argument("--delay", type=float, default=1.0, help="seconds a resume takes (the simulated VM restore)")
    args = ap.parse_args()
    password = password_of(args)

    def handle(entry_id, fields):
        threading.Thread(target=resume, args=(args, password, entry_id, fields), daemon=True).start()

    # "$": requests older than the group are not replayed; each entry is acknowledged by its thread
    consume(args, args.prefix + "resume", "$", handle, count=64, ack=False)


if __name__ == "__main__":
    main()
