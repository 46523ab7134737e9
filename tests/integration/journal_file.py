"""The metering journal (metering.spill_file) as a test reads and writes it
(metering/journal_format.h): a header line, then "<crc32 8 hex> <JSON>\\n"
entries. A spill file of version 1 (JSON lines of records) is read too."""

import json
import zlib

HEADER = b"lizard-gateway metering journal 2\n"


def entry(obj):
    """One entry's line (bytes), checksum included."""
    text = json.dumps(obj, separators=(",", ":")).encode()
    return b"%08x " % zlib.crc32(text) + text + b"\n"


def entries(path):
    """The entries of a version 2 journal, as dicts, checked; raises on damage."""
    with open(path, "rb") as f:
        data = f.read()
    assert data.startswith(HEADER), data[:80]
    out = []
    for line in data[len(HEADER):].split(b"\n")[:-1]:
        crc, text = line.split(b" ", 1)
        assert int(crc, 16) == zlib.crc32(text), line
        out.append(json.loads(text))
    return out


def pending(path):
    """What the next start replays: (sealed records, open counts), each a
    list of dicts, as metering/journal_format.c reads them."""
    with open(path, "rb") as f:
        head = f.read(1)
    if head == b"{":
        with open(path, "rb") as f:
            return [json.loads(l) for l in f.read().splitlines() if l.strip()], []
    batches, open_ = [], {}
    for e in entries(path):
        t = e["t"]
        if t == "batch":
            open_ = {}
            batches.append({"first": e["first"], "last": e["last"], "recs": []})
        elif t == "rec":
            batches[-1]["recs"].append(e)
        elif t == "open":
            k = (e["sandbox"], e["project"])
            o = open_.setdefault(k, dict(e, egress=0, ingress=0))
            o["egress"] += e["egress"]
            o["ingress"] += e["ingress"]
        elif t == "done":
            batches = [b for b in batches if (b["first"], b["last"]) != (e["first"], e["last"])]
    return [r for b in batches for r in b["recs"]], list(open_.values())


def sealed(path):
    return pending(path)[0]
