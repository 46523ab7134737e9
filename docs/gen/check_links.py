#!/usr/bin/env python3
"""Every relative link of README.md and docs/*.md resolves, and README.md links every page.

    docs/gen/check_links.py     prints each broken link (file:line: target: why), exits 1 if any

A link is `[text](target)` outside code (fenced blocks and `spans`); http(s)
and mailto targets are not followed. A relative target must name a file or
folder of the tree; `page.md#anchor` and `#anchor` must name a heading of
that page, as GitHub makes anchors of headings (lower case, punctuation
dropped, spaces to hyphens, -1, -2 ... for repeats), or an <a id="...">.
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LINK = re.compile(r"(?<!\\)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]+)\)")


def pages():
    out = [os.path.join(ROOT, "README.md")]
    docs = os.path.join(ROOT, "docs")
    out += [os.path.join(docs, f) for f in sorted(os.listdir(docs)) if f.endswith(".md")]
    return out


def prose_lines(text):
    """(line number, line with inline code blanked) of the lines outside fenced code."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[:3]
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, re.sub(r"(`+)(?:(?!\1).)+?\1", lambda s: " " * len(s.group()), line)


def slug(heading):
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, out = {}, set()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.split("\n")
        for n, line in prose_lines(text):
            if re.match(r"^#{1,6} ", line):
                # the heading as written (code spans were blanked in `line`)
                base = slug(lines[n - 1].lstrip("#").strip())
                n = seen.get(base, 0)
                seen[base] = n + 1
                out.add(base if n == 0 else "%s-%d" % (base, n))
        out.update(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", text))
        _anchors[path] = out
    return _anchors[path]


def check(path):
    errors, linked = [], set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    rel = os.path.relpath(path, ROOT)
    for n, line in prose_lines(text):
        for m in LINK.finditer(line):
            target = m.group(2)
            if re.match(r"^(https?|mailto):", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = "%s:%d: %s" % (rel, n, target)
            if not dest.startswith(ROOT + os.sep) and dest != ROOT:
                errors.append("%s: outside the repository" % where)
                continue
            if not os.path.exists(dest):
                errors.append("%s: no such file" % where)
                continue
            linked.add(dest)
            if anchor:
                if not dest.endswith(".md") or os.path.isdir(dest):
                    errors.append("%s: an anchor into a file that is not markdown" % where)
                elif anchor not in anchors(dest):
                    errors.append("%s: %s has no heading #%s" % (where, os.path.relpath(dest, ROOT), anchor))
    return errors, linked


def main():
    errors = []
    for path in pages():
        errs, linked = check(path)
        errors += errs
        if path.endswith(os.sep + "README.md") and os.path.dirname(path) == ROOT:
            for page in pages()[1:]:
                if page not in linked:
                    errors.append("README.md: does not link %s" % os.path.relpath(page, ROOT))
    for e in errors:
        print(e)
    if errors:
        print("docs/gen/check_links.py: %d broken link(s)" % len(errors))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
