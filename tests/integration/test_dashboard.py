"""deploy/grafana/lizard-gateway.json queries only what the gateway exposes:
every metric name in every panel's PromQL is a family (or a histogram's
_bucket/_sum/_count) of a real gateway's /metrics, and every literal label
matcher (result="hit") names a label value one of its samples carries. A
renamed metric would otherwise leave an empty panel nobody notices."""

import json
import os
import re

import gwtest

DASHBOARD = os.path.join(gwtest.REPO, "deploy", "grafana", "lizard-gateway.json")


def exposition(g):
    status, body = g.admin_get("/metrics")
    assert status == 200
    families, samples = {}, []
    for line in body.decode().splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            families[m.group(1)] = m.group(2)
        elif line and not line.startswith("#"):
            m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s", line)
            assert m, line
            samples.append((m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))))
    names = set(families)
    for name, kind in families.items():
        if kind == "histogram":
            names |= {name + "_bucket", name + "_sum", name + "_count"}
    return names, samples


def queries(dash):
    for p in dash["panels"]:
        for t in p.get("targets", []):
            yield p["title"], t["expr"]
    for v in dash.get("templating", {}).get("list", []):
        if isinstance(v.get("query"), str) and "lizard_" in v["query"]:
            yield "variable " + v["name"], v["query"]


def test_dashboard_queries_exposed_metrics(gateway):
    with open(DASHBOARD) as f:
        dash = json.load(f)
    names, samples = exposition(gateway)
    checked = set()
    for title, expr in queries(dash):
        used = re.findall(r"\b(lizard_[a-z0-9_]+)\b", expr)
        assert used, (title, expr)
        for name in used:
            assert name in names, "panel %r queries %s, which /metrics does not expose" % (title, name)
            checked.add(name)
        for name, matchers in re.findall(r"\b(lizard_[a-z0-9_]+)\{([^}]*)\}", expr):
            for label, value in re.findall(r'(\w+)="([^"$]*)"', matchers):
                assert any(n == name and l.get(label) == value for n, l in samples), \
                    "panel %r: no %s{%s=%r} in /metrics" % (title, name, label, value)
    # what the issue asks the dashboard to show
    for want in ("lizard_responses_total", "lizard_errors_total", "lizard_route_cache_total", "lizard_upstream_connects_total",
                 "lizard_websockets_open", "lizard_metering_pending_records", "lizard_redis_connected_workers",
                 "lizard_wake_milliseconds_bucket", "lizard_metering_unacknowledged_batches",
                 "lizard_metering_unacknowledged_bytes", "lizard_metering_journal_bytes",
                 "lizard_metering_batches_reexecuted_total", "lizard_metering_batches_held_total", "lizard_responses_cut_total"):
        assert want in checked, want
