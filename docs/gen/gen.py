#!/usr/bin/env python3
"""The reference pages of docs/, written from the code's own tables.

    docs/gen/gen.py           writes docs/configuration.md, docs/errors.md, docs/metrics.md
    docs/gen/gen.py --check   writes nothing; exits 1, with a diff, when a checked-in page
                              differs from what it would write, or when a config key, an
                              error code or a metric name appears nowhere in docs/

Sources (python3's standard library only, no compiler):

- config/config.c's key table (gw_config_keys: path, type, range, default)
  with docs/gen/configuration.md: the page's introduction, then one row per
  key, `| key | default | meaning |`, the words a person wrote (the default
  cell may say more than the code, "none (cookies off)", but must begin with
  the code's default; tests/unit/config/test_config_documented.c checks the
  same rows against the table and deploy/gateway.example.json);
- errors/errors.c (code_names, defs: status, title, cause, hint,
  Retry-After, technical detail) with docs/gen/errors.md, the introduction;
- observe/metrics.c (every metric() and family() call: name, type, help;
  the sample() calls after it: labels) with docs/gen/metrics.md.

A row of any of these tables that the script cannot read is an error that
names it, never a silently shorter page.
"""
import difflib
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GEN = os.path.join(ROOT, "docs", "gen")


class GenError(Exception):
    pass


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


# --- a small C tokenizer: enough for initializers and calls -------------------------------

TOKEN = re.compile(
    r"""(?P<ws>\s+)|(?P<comment>/\*.*?\*/|//[^\n]*)|(?P<pp>^[ \t]*\#[^\n]*(?:\\\n[^\n]*)*)"""
    r"""|(?P<str>"(?:[^"\\\n]|\\.)*")|(?P<chr>'(?:[^'\\\n]|\\.)*')"""
    r"""|(?P<num>\d[\w.]*)|(?P<id>[A-Za-z_]\w*)|(?P<punct>->|[^\s\w])""",
    re.S | re.M,
)
ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def c_string(lit):
    body, out, i = lit[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\":
            out.append(ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def tokenize(text):
    """(kind, value) pairs; adjacent string literals are one ("s", text), as the compiler joins them."""
    toks = []
    for m in TOKEN.finditer(text):
        kind = m.lastgroup
        if kind in ("ws", "comment", "pp"):
            continue
        if kind == "str":
            if toks and toks[-1][0] == "s":
                toks[-1] = ("s", toks[-1][1] + c_string(m.group()))
            else:
                toks.append(("s", c_string(m.group())))
        else:
            toks.append((kind[0], m.group()))
    return toks


def split_args(toks, i):
    """toks[i] is "(" or "{": the comma-separated items up to its match, and the index after it."""
    close = {"(": ")", "{": "}", "[": "]"}
    stack, items, cur = [toks[i][1]], [], []
    i += 1
    while True:
        kind, val = toks[i]
        if kind == "p" and val in close:
            stack.append(val)
        elif kind == "p" and val in (")", "}", "]"):
            stack.pop()
            if not stack:
                if cur:
                    items.append(cur)
                return items, i + 1
        if kind == "p" and val == "," and len(stack) == 1:
            items.append(cur)
            cur = []
        else:
            cur.append((kind, val))
        i += 1


def find_initializer(toks, name):
    """The items of `... name[...] = { items };`."""
    for i, (kind, val) in enumerate(toks):
        if kind == "i" and val == name:
            j = i + 1
            while toks[j][1] != "=" and toks[j][1] != ";" and toks[j][1] != "(":
                j += 1
            if toks[j][1] == "=" and toks[j + 1][1] == "{":
                return split_args(toks, j + 1)[0]
    raise GenError("no initializer of %s" % name)


def defines(*files):
    """#define NAME <integer expression> of the files, evaluated."""
    out = {}
    for rel in files:
        for m in re.finditer(r"^#define (\w+) (\(?[\d\s*+()]+\)?)\s*(?:/\*.*)?$", read(rel), re.M):
            out[m.group(1)] = int(eval(m.group(2), {"__builtins__": {}}))  # digits, * + ( ) only
    return out


def value_of(item, consts, what):
    """An integer argument: 123, UINT64_C(123), NAME."""
    if len(item) == 1 and item[0][0] == "n":
        return int(item[0][1].rstrip("uUlL"))
    if len(item) == 1 and item[0][0] == "i" and item[0][1] in consts:
        return consts[item[0][1]]
    if len(item) == 4 and item[0][1] == "UINT64_C" and item[2][0] == "n":
        return int(item[2][1])
    raise GenError("%s: cannot read the value %s" % (what, " ".join(v for _, v in item)))


def string_array(rel, name):
    """The string literals of a `const char *name[] = {...}` or `char name[N][M] = {[X] = "..."}` table, in order."""
    out = []
    for item in find_initializer(tokenize(read(rel)), name):
        strs = [v for k, v in item if k == "s"]
        if len(strs) == 1:
            out.append(strs[0])
    return out


# --- markdown ------------------------------------------------------------------------------


def cell(text):
    """Text from C as one table cell: no pipe, no HTML, no line break."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(text.split())


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def banner(sources):
    return ("<!-- Generated by docs/gen/gen.py from %s; edit those and run docs/gen/gen.py. "
            "tests/docs fails when this page differs from what it writes. -->\n" % ", ".join(sources))


def intro(rel):
    """A docs/gen/*.md file up to its first table row: the page's own words."""
    text = read(rel)
    head = text.split("\n| ", 1)[0]
    return head.rstrip("\n") + "\n", text


# --- configuration -------------------------------------------------------------------------

TYPE_WORDS = {
    "GW_CONFIG_UINT": "integer",
    "GW_CONFIG_STRING": "string",
    "GW_CONFIG_ENV_NAME": "environment variable name",
    "GW_CONFIG_BOOL": "boolean",
    "GW_CONFIG_ADDRESS": "address",
    "GW_CONFIG_LIST": "list",
}
MACRO_ARGS = {  # config.c's row macros: their arguments, by name
    "UINT": ["path", "field", "min", "max", "dflt"],
    "STRING": ["path", "field", "min", "max", "dflt"],
    "CHECKED_STRING": ["path", "field", "min", "max", "dflt", "valid", "expected_valid"],
    "ENV_NAME": ["path", "field"],
    "ENUM": ["path", "field", "names", "dflt"],
    "BOOL": ["path", "field", "dflt"],
    "ADDRESS": ["path", "field", "aux", "allow_unix", "dflt"],
    "LIST": ["path", "parse", "dflt"],
}
MACRO_TYPES = {"UINT": "GW_CONFIG_UINT", "STRING": "GW_CONFIG_STRING", "CHECKED_STRING": "GW_CONFIG_STRING",
               "ENV_NAME": "GW_CONFIG_ENV_NAME", "ENUM": "GW_CONFIG_ENUM", "BOOL": "GW_CONFIG_BOOL",
               "ADDRESS": "GW_CONFIG_ADDRESS", "LIST": "GW_CONFIG_LIST"}


def config_keys():
    """config.c's key table: dicts of path, type, min, max, dflt (JSON text or None), names, nullable, allow_unix."""
    text = read("config/config.c")
    toks = tokenize(text)
    consts = defines("config/config.c", "config/config.h")
    names = {}
    for m in re.finditer(r"static const char \*const (\w+)\[\] = \{([^}]*)\}", text):
        names[m.group(1)] = re.findall(r'"([^"]*)"', m.group(2))
    keys = []
    for item in find_initializer(toks, "gw_config_keys"):
        what = " ".join(v for _, v in item)[:80]
        k = {"nullable": False, "allow_unix": False, "dflt": None, "min": None, "max": None, "names": None}
        if item[0][0] == "i" and item[0][1] in MACRO_ARGS:
            args, _ = split_args(item, 1)
            k["type"] = MACRO_TYPES[item[0][1]]
            for name, arg in zip(MACRO_ARGS[item[0][1]], args):
                k[name] = arg
        elif item[0] == ("p", "{"):
            fields, _ = split_args(item, 0)
            for f in fields:
                if len(f) >= 3 and f[0] == ("p", ".") and f[2] == ("p", "="):
                    k[f[1][1]] = f[3:]
                elif f[0] == ("i", "OR_NULL"):
                    k["nullable"] = True
            k["type"] = k["type"][0][1]
            if k.get("aux_offset") is None and k["type"] == "GW_CONFIG_ADDRESS":
                raise GenError("config.c: %s: an address row without aux_offset" % what)
        else:
            raise GenError("config.c: a key table row this script cannot read: %s" % what)
        row = {"path": None, "type": k["type"], "nullable": k["nullable"]}
        path = k["path"]
        if len(path) != 1 or path[0][0] != "s":
            raise GenError("config.c: a row whose path is not a string: %s" % what)
        row["path"] = path[0][1]
        row["min"] = value_of(k["min"], consts, row["path"]) if k.get("min") else None
        row["max"] = value_of(k["max"], consts, row["path"]) if k.get("max") else None
        d = k.get("dflt")
        if d is None or d == [("i", "NULL")]:
            row["dflt"] = None
        elif len(d) == 1 and d[0][0] == "s":
            row["dflt"] = d[0][1]
        elif len(d) == 4 and d[0] == ("i", "STR") and d[2][0] == "s":
            row["dflt"] = '"%s"' % d[2][1]
        else:
            raise GenError("config.c: %s: a default this script cannot read" % row["path"])
        au = k.get("allow_unix")
        row["allow_unix"] = bool(au) and au[0][1] not in ("0",)
        if row["type"] == "GW_CONFIG_ENUM":
            n = k["names"][0][1]
            if n not in names:
                raise GenError("config.c: %s: no name list %s" % (row["path"], n))
            row["names"] = names[n]
        else:
            row["names"] = None
        keys.append(row)
    return keys


def config_rows(text, rel):
    """The rows of docs/gen/configuration.md: key -> (key as written, default cell, meaning)."""
    rows = {}
    for line in text.split("\n"):
        m = re.match(r"^\| `([^`]+)` \| (.*?) \| (.*) \|$", line)
        if not m:
            if line.startswith("| `"):
                raise GenError("%s: a row that is not `| key | default | meaning |`: %s" % (rel, line[:80]))
            continue
        key = m.group(1)[:-2] if m.group(1).endswith("[]") else m.group(1)
        if key in rows:
            raise GenError("%s: two rows for %s" % (rel, key))
        rows[key] = (m.group(1), m.group(2), m.group(3))
    return rows


def default_words(dflt):
    """How a default (JSON text) of a scalar key is written: 1000, `lax`, false."""
    if dflt.startswith('"'):
        return "`%s`" % dflt[1:-1]
    return dflt


def config_type(k):
    t = k["type"]
    if t == "GW_CONFIG_ENUM":
        words = " or ".join("`%s`" % n for n in k["names"])
    elif t == "GW_CONFIG_ADDRESS":
        words = "address (`ip:port`, `[v6]:port`%s)" % (" or `unix:/path`" if k["allow_unix"] else "")
    elif t == "GW_CONFIG_LIST":
        words = "list" if k["dflt"] is None or k["dflt"].startswith("[") else "object"
    else:
        words = TYPE_WORDS[t]
    return words + (", or null" if k["nullable"] else "")


def config_range(k):
    if k["type"] == "GW_CONFIG_UINT":
        return "%d to %d" % (k["min"], k["max"])
    if k["type"] == "GW_CONFIG_STRING" and k["max"] is not None:
        return "%d to %d bytes" % (k["min"], k["max"])
    return ""


def configuration_page():
    rel = "docs/gen/configuration.md"
    head, text = intro(rel)
    rows = config_rows(text, rel)
    keys = config_keys()
    paths = [k["path"] for k in keys]
    extra = sorted(set(rows) - set(paths))
    if extra:
        raise GenError("%s: rows for keys config/config.c does not have: %s" % (rel, ", ".join(extra)))
    out = []
    for k in keys:
        if k["path"] not in rows:
            raise GenError("%s: no row for %s (config/config.c has it): add `| `%s` | default | meaning |`"
                           % (rel, k["path"], k["path"]))
        written, dflt_cell, meaning = rows[k["path"]]
        if k["type"] != "GW_CONFIG_LIST" and k["dflt"] is not None:
            want = default_words(k["dflt"])
            if not dflt_cell.startswith(want) or dflt_cell[len(want):len(want) + 1].isdigit():
                raise GenError("%s: the default of %s is \"%s\"; config/config.c says %s"
                               % (rel, k["path"], dflt_cell, want))
        out.append(["`%s`" % written, config_type(k), dflt_cell, config_range(k), meaning])
    return (banner(["config/config.c", rel]) + head + "\n"
            + table(["key", "type", "default", "range", "meaning"], out))


# --- errors ------------------------------------------------------------------------------

PLACEHOLDERS = {"$S": "sandbox <id>", "$s": "Sandbox <id>", "$P": "port <n>", "$p": "Port <n>"}


def error_text(s):
    for k, v in PLACEHOLDERS.items():
        s = s.replace(k, v)
    return s


def errors_page():
    rel = "docs/gen/errors.md"
    toks = tokenize(read("errors/errors.c"))
    names = {}
    for item in find_initializer(toks, "code_names"):
        if len(item) != 5 or item[0] != ("p", "[") or item[3] != ("p", "=") or item[4][0] != "s":
            raise GenError("errors.c: a code_names entry this script cannot read")
        names[item[1][1]] = item[4][1]
    rows = []
    for item in find_initializer(toks, "defs"):
        if len(item) < 5 or item[0] != ("p", "[") or item[3] != ("p", "="):
            raise GenError("errors.c: a defs entry this script cannot read")
        enum = item[1][1]
        fields, _ = split_args(item, 4)
        vals = [f[0][1] if len(f) == 1 else None for f in fields]
        if len(vals) != 7 or enum not in names or not vals[0].isdigit():
            raise GenError("errors.c: %s: expected {status, reason, title, cause, hint, retry_after, tech}" % enum)
        status, reason, title, cause, hint, retry, tech = vals
        what_to_do = error_text(hint) + ((" " + tech) if tech not in (None, "NULL") else "")
        rows.append(["`%s`" % names.pop(enum), "%s %s" % (status, reason), cell(title), cell(error_text(cause)),
                     cell(what_to_do), retry if retry != "0" else ""])
    if names:
        raise GenError("errors.c: codes without a definition: %s" % ", ".join(sorted(names.values())))
    head, _ = intro(rel)
    return (banner(["errors/errors.c", rel]) + head + "\n"
            + table(["code", "status", "title", "what happened", "what to do", "Retry-After"], rows))


# --- metrics -------------------------------------------------------------------------------

# Label values metrics.c writes with snprintf from a name function: where the names are.
LABEL_NAMES = {
    "gw_error_code_name": ("errors/errors.c", "code_names", 0),
    "gw_cut_reason_name": ("errors/cut.c", "reason_names", 1),
    "gw_mcp_method_name": ("observe/mcp.c", "method_names", 0),
    "gw_dyncert_reason_name": ("tls/dyncert.c", "reason_names", 1),
}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metrics():
    """[(name, type, help, {label: [values]})], by name."""
    rel = "observe/metrics.c"
    toks = tokenize(read(rel))
    arrays = {}
    for item in find_initializer(toks, "HTTP2_EVENTS"):
        fields, _ = split_args(item, 0)
        arrays.setdefault("HTTP2_EVENTS", []).append(fields[0][0][1])
    fams, order, label_fmt = {}, [], None
    i = 0
    while i < len(toks):
        kind, val = toks[i]
        if kind == "i" and val in ("metric", "family", "sample", "snprintf") and toks[i + 1] == ("p", "("):
            args, nxt = split_args(toks, i + 1)
            if val == "snprintf" and len(args) >= 3 and args[0] == [("i", "label")] and args[2][0][0] == "s":
                label_fmt = (args[2][0][1], args[3] if len(args) > 3 else None)
            elif val in ("metric", "family") and len(args) >= 4 and args[1][0][0] == "s":
                name, typ, hlp = args[1][0][1], args[2][0][1], args[3][0][1]
                if name in fams:
                    raise GenError("%s: %s is declared twice" % (rel, name))
                fams[name] = (typ, hlp, {})
                order.append(name)
            elif val == "sample" and len(args) >= 3 and args[1][0][0] == "s":
                name = args[1][0][1]
                base = name
                for suf in HISTOGRAM_SUFFIXES:
                    if name.endswith(suf) and name[: -len(suf)] in fams and fams[name[: -len(suf)]][0] == "histogram":
                        base = name[: -len(suf)]
                if base not in fams:
                    raise GenError("%s: a sample of %s, which no metric() or family() declared" % (rel, name))
                labels = fams[base][2]
                lab = args[2]
                if base != name:
                    pass  # le="..." of a histogram: Prometheus's own
                elif lab == [("i", "NULL")]:
                    pass
                elif len(lab) == 1 and lab[0][0] == "s":
                    for k, v in re.findall(r'(\w+)="([^"]*)"', lab[0][1]):
                        labels.setdefault(k, []).append(v)
                elif lab[0] == ("i", "HTTP2_EVENTS"):
                    for s in arrays["HTTP2_EVENTS"]:
                        for k, v in re.findall(r'(\w+)="([^"]*)"', s):
                            labels.setdefault(k, []).append(v)
                elif lab == [("i", "label")] and label_fmt is not None:
                    fmt, src = label_fmt
                    m = re.match(r'^(\w+)="(.*)"$', fmt)
                    if not m:
                        raise GenError("%s: %s: a label format this script cannot read: %s" % (rel, name, fmt))
                    fn = src[0][1] if src else None
                    if m.group(2) == "%s" and fn in LABEL_NAMES:
                        frel, arr, skip = LABEL_NAMES[fn]
                        labels.setdefault(m.group(1), []).extend(string_array(frel, arr)[skip:])
                    elif m.group(1) == "worker":
                        labels.setdefault("worker", []).append("0, 1, ... (one per worker)")
                    else:
                        labels.setdefault(m.group(1), []).append(m.group(2).replace("%llu", "N"))
                else:
                    raise GenError("%s: %s: labels this script cannot read" % (rel, name))
            i = nxt
            continue
        i += 1
    return [(n, fams[n][0], fams[n][1], fams[n][2]) for n in sorted(order)]


def metrics_page():
    rel = "docs/gen/metrics.md"
    rows = []
    for name, typ, hlp, labels in metrics():
        lab = "; ".join("`%s`: %s" % (k, ", ".join("`%s`" % v if "..." not in v else v for v in dict.fromkeys(vs)))
                        for k, vs in labels.items())
        if typ == "histogram":
            lab = (lab + "; " if lab else "") + "`le` (buckets)"
        rows.append(["`%s`" % name, typ, cell(lab), cell(hlp)])
    head, _ = intro(rel)
    return banner(["observe/metrics.c", rel]) + head + "\n" + table(["name", "type", "labels", "help"], rows)


# --- main ----------------------------------------------------------------------------------

PAGES = {
    "docs/configuration.md": configuration_page,
    "docs/errors.md": errors_page,
    "docs/metrics.md": metrics_page,
}


def docs_text():
    out = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "docs")):
        if os.path.relpath(dirpath, ROOT).startswith(os.path.join("docs", "gen")):
            continue
        for f in sorted(files):
            if f.endswith(".md"):
                with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                    out.append(fh.read())
    return "\n".join(out)


def names_missing():
    """Config keys, error codes and metric names that appear nowhere in docs/ (its pages, not docs/gen/)."""
    text = docs_text()
    names = [("config key", k["path"]) for k in config_keys()]
    names += [("error code", c) for c in string_array("errors/errors.c", "code_names")]
    names += [("metric", m[0]) for m in metrics()]
    return ["%s %s" % (what, n) for what, n in names if not re.search(r"(?<![\w.])%s(?![\w])" % re.escape(n), text)]


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        sys.stderr.write(__doc__)
        return 2
    try:
        pages = {rel: fn() for rel, fn in PAGES.items()}
    except GenError as e:
        print("docs/gen/gen.py: %s" % e, file=sys.stderr)
        return 1
    failed = 0
    for rel, text in pages.items():
        path = os.path.join(ROOT, rel)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if old == text:
            continue
        if check:
            failed = 1
            print("%s differs from what docs/gen/gen.py writes (run docs/gen/gen.py and commit it):" % rel)
            sys.stdout.writelines(list(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                            "a/" + rel, "b/" + rel))[:60])
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            print("wrote %s" % rel)
    if check:
        for miss in names_missing():
            failed = 1
            print("docs/: the %s appears on no page" % miss)
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv))
