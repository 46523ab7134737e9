#!/usr/bin/python3
"""The summary of tests/bench/engines: reads every run's report (written by
tests/bench/run) and prints, per figure, each engine's median over the rounds
with its min-max, the master/2.2.5 ratio per round (median, min-max) and
lizard's ratio to nginx and HAProxy of the same run (median, min-max per
engine), then the extra sections and every run's own report.

    engines_report.py EXTRA_MD ROUND:ENGINE:REPORT_MD...
"""

import statistics
import sys

# (figure, the table's second header cell, row label, column, higher is better)
FIGURES = [
    ("keep-alive TLS req/s (public port)", "keep-alive req/s", "lizard (public port)", 1, True),
    ("keep-alive TLS CPU µs/req (public port)", "keep-alive req/s", "lizard (public port)", 3, False),
    ("keep-alive TLS req/s (private port + token)", "keep-alive req/s", "lizard (private port, X-Lizard-Access-Token)", 1, True),
    ("keep-alive TLS CPU µs/req (private port + token)", "keep-alive req/s", "lizard (private port, X-Lizard-Access-Token)", 3,
     False),
    ("new connection per request (resumed) req/s", "keep-alive req/s", "lizard (public port)", 5, True),
    ("new connection per request CPU µs/req", "keep-alive req/s", "lizard (public port)", 8, False),
    ("full handshakes/s", "keep-alive req/s", "lizard (public port)", 9, True),
    ("full handshake CPU µs", "keep-alive req/s", "lizard (public port)", 12, False),
    ("idle wss tunnel KiB RSS", "tunnels open", "lizard", 7, False),
    ("instructions/req, HTTP/1.1", "instructions / req", "lizard", 1, False),
    ("instructions/req, TLS 1.3", "instructions / req", "lizard, TLS 1.3", 1, False),
    ("allocator calls/req, HTTP/1.1", "instructions / req", "lizard", 3, False),
    ("system calls/req (strace -c)", "syscalls / req", "lizard", 1, False),
]
# the peers' rows for the same figure: the user table names them nginx/haproxy
PEERS = {"lizard (public port)": ("nginx", "haproxy"),
         "lizard (private port, X-Lizard-Access-Token)": ("nginx", "haproxy"),
         "lizard": ("nginx", "haproxy"), "lizard, TLS 1.3": ("nginx, TLS 1.3", "haproxy, TLS 1.3")}


def tables(path):
    """Every markdown table of a report: a list of (header cells, {row label: cells})."""
    out, cur = [], None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.startswith("|"):
            cur = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cur is None:
            cur = (cells, {})
            out.append(cur)
        elif not set(line) <= set("|-: "):
            cur[1][cells[0]] = cells
    return out


def value(tabs, head, row, col):
    """A number from the first table whose second header cell is HEAD and which has the row."""
    for cells, rows in tabs:
        if len(cells) < 2 or cells[1] != head or row not in rows:
            continue
        try:
            return float(rows[row][col].replace(",", ""))
        except (IndexError, ValueError):
            return None
    return None


def spread(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    med = statistics.median(vals)
    if len(vals) == 1:
        return fmt % med
    return (fmt + " [" + fmt + "-" + fmt + "]") % (med, min(vals), max(vals))


def get(tabs, head, row, col):
    return value(tabs, head, row, col)


def main():
    extra, runs = sys.argv[1], sys.argv[2:]
    parsed = []  # (round, engine, path, tables)
    for r in runs:
        rnd, eng, path = r.split(":", 2)
        parsed.append((int(rnd), eng, path, tables(path)))
    rounds = sorted({p[0] for p in parsed})
    print("# lizard-gateway on both engines: 2.2.5 and h2o master (tests/bench/engines)")
    print()
    print("%d rounds, engines alternated (A B, B A, ...); each run measures nginx and HAProxy beside its lizard." %
          len(rounds))
    print("Figures: median over the runs [min-max]; ratios: per run (to the peers of that run) or per round")
    print("(master/2.2.5 of the two adjacent runs), median [min-max]. The first line of each run's report says the")
    print("machine's load.")
    print()
    print("| figure | better | 2.2.5 | master | master / 2.2.5 | 2.2.5 / nginx | master / nginx | 2.2.5 / HAProxy"
          " | master / HAProxy | nginx | HAProxy |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, head, row, col, higher in FIGURES:
        per = {"2.2.5": [], "master": []}
        ratio_ngx = {"2.2.5": [], "master": []}
        ratio_ha = {"2.2.5": [], "master": []}
        peers = {"nginx": [], "haproxy": []}
        by_round = {}
        for rnd, eng, _, tabs in parsed:
            v = get(tabs, head, row, col)
            if v is None:
                continue
            per[eng].append(v)
            by_round.setdefault(rnd, {})[eng] = v
            for peer, acc, lst in zip(PEERS[row], ("nginx", "haproxy"), (ratio_ngx, ratio_ha)):
                pv = get(tabs, head, peer, col)
                if pv:
                    lst[eng].append(v / pv)
                    peers[acc].append(pv)
        if not per["2.2.5"] and not per["master"]:
            continue
        mr = [x["master"] / x["2.2.5"] for x in by_round.values() if "master" in x and x.get("2.2.5")]
        fmt = "%.0f" if max(per["2.2.5"] + per["master"]) >= 100 else "%.2f"
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, "higher" if higher else "lower", spread(per["2.2.5"], fmt), spread(per["master"], fmt),
            spread(mr, "%.2f"), spread(ratio_ngx["2.2.5"], "%.2f"), spread(ratio_ngx["master"], "%.2f"),
            spread(ratio_ha["2.2.5"], "%.2f"), spread(ratio_ha["master"], "%.2f"), spread(peers["nginx"], fmt),
            spread(peers["haproxy"], fmt)))
    print()
    sys.stdout.write(open(extra, encoding="utf-8").read())
    for rnd, eng, path, _ in parsed:
        print()
        print("---")
        print()
        print("# Round %d, %s" % (rnd, eng))
        print()
        for line in open(path, encoding="utf-8"):
            # the run's own headings one level down
            sys.stdout.write("#" + line if line.startswith("#") else line)


if __name__ == "__main__":
    main()
