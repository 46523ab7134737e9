#!/usr/bin/env bash
# Re-pins the vendored h2o master (docs/libh2o.md, "Re-pinning"; issue 40):
# replaces third_party/h2o-master/src with the files
# libh2o-evloop compiles at COMMIT of a local clone of h2o, re-applies our
# series (patches/series, in order, patch -p1), and regenerates the build
# list (meson.build here) and UPSTREAM.
#
#   third_party/h2o-master/repin.sh GIT_DIR COMMIT
#
# GIT_DIR is the clone's git directory (a bare repository, or a work tree's
# .git); COMMIT is resolved to its 40 hex digits. Needs git, cmake, a C
# compiler and /usr/bin/python3; no network. Review and commit the result in
# two steps: the pristine tree first (run with an empty series), then the
# patches and build files.
#
# What is vendored: every source file of h2o's own CMake target
# libh2o-evloop (configured with the options below: no mruby, libuv, brotli,
# zstd, fusion, DTrace), every header those sources and all of include/
# reach (gcc -M), all of include/, and the licence files of h2o and of each
# deps/ project a vendored file comes from (its README where that is where
# the licence is stated). Plain text, so a re-pin is a
# reviewable diff.
#
# The pristine archive whose sha256 UPSTREAM records is
#   git --git-dir=GIT_DIR archive --format=tar COMMIT | sha256sum
# (uncompressed tar, no prefix; the same git version gives the same bytes:
# the tool's version is written beside the hash).
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 GIT_DIR COMMIT" >&2; exit 2; }
GIT_DIR=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
COMMIT=$(git --git-dir="$GIT_DIR" rev-parse --verify "$2^{commit}")
WORK=$(mktemp -d /tmp/h2o-repin.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# --- 1. the pristine archive and its hash -------------------------------------------------
git --git-dir="$GIT_DIR" archive --format=tar "$COMMIT" >"$WORK/pristine.tar"
SHA256=$(sha256sum "$WORK/pristine.tar" | cut -d' ' -f1)
mkdir "$WORK/src"
tar -xf "$WORK/pristine.tar" -C "$WORK/src"
VERSION=$(sed -n 's/^#define H2O_VERSION_BASE "\(.*\)"$/\1/p' "$WORK/src/include/h2o/version.h")
LIBVERSION=$(sed -n 's/^#define H2O_LIBRARY_VERSION "\(.*\)"$/\1/p' "$WORK/src/include/h2o/version.h")

# --- 2. what h2o's CMake compiles for libh2o-evloop --------------------------------------------
# configure only (a few seconds): compile_commands.json lists each source
# with its flags; nothing is built
cmake -S "$WORK/src" -B "$WORK/bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
    -DWITH_MRUBY=OFF -DDISABLE_LIBUV=ON -DWITH_BROTLI=OFF -DWITH_ZSTD=OFF -DWITH_FUSION=OFF -DWITH_DTRACE=OFF \
    -DWITH_CCACHE=OFF -DBUILD_SHARED_LIBS=OFF >"$WORK/cmake.log" 2>&1 || {
    tail -n 30 "$WORK/cmake.log" >&2
    exit 1
}

# --- 3. the file set, the build list -------------------------------------------------------------
"$PY" - "$WORK" "$HERE" <<'EOF'
import json, os, re, shlex, subprocess, sys

work, here = sys.argv[1], sys.argv[2]
src = os.path.join(work, 'src')
cmds = [c for c in json.load(open(os.path.join(work, 'bld', 'compile_commands.json')))
        if '/libh2o-evloop.dir/' in c['command']]
if not cmds:
    sys.exit('repin: no libh2o-evloop sources in compile_commands.json')
sources, includes, defines = [], [], []
for c in cmds:
    args = shlex.split(c['command'])
    sources.append(os.path.relpath(c['file'], src))
    for a in args:
        if a.startswith('-I'):
            rel = os.path.relpath(a[2:], src)
            if not rel.startswith('..') and rel not in includes:
                includes.append(rel)
        # h2o's own defines, minus the tracer header that CMake generates
        # with perl (QUIC is not used: no UDP listener) and the install paths
        # of h2o's standalone server
        elif a.startswith('-D') and not a.startswith(('-DQUICLY_USE_TRACER', '-DH2O_ROOT', '-DH2O_CONFIG_PATH',
                                                      '-DH2O_LOCALSTATEDIR')) and a not in defines:
            defines.append(a)
sources.sort()
flags = ['-std=c99', '-D_GNU_SOURCE', '-pthread'] + ['-I' + os.path.join(src, i) for i in includes] + \
    [d for d in defines if d != '-D_GNU_SOURCE']

# every header the sources and include/ reach
public = []
for d, _, files in os.walk(os.path.join(src, 'include')):
    public += [os.path.join(d, f) for f in files if f.endswith('.h')]
keep = set(sources) | {os.path.relpath(p, src) for p in public}
for path in [os.path.join(src, s) for s in sources] + public:
    out = subprocess.run(['cc', '-M', '-MG', '-w'] + flags + ['-x', 'c', path], capture_output=True, text=True)
    for dep in out.stdout.replace('\\\n', ' ').split(':', 1)[-1].split():
        full = os.path.normpath(os.path.join(src, dep) if not os.path.isabs(dep) else dep)
        if full.startswith(src + '/') and os.path.isfile(full):
            keep.add(os.path.relpath(full, src))
# licences: h2o's, and each deps/ project's (nested ones too) that gave a file
licence = re.compile(r'^(licen[cs]e|copying|copyright)', re.I)
roots = {''}
for f in keep:
    parts = f.split('/')
    for i in range(len(parts) - 1):
        if parts[i] == 'deps' and i + 1 < len(parts) - 1:
            roots.add('/'.join(parts[:i + 2]))
for r in roots:
    names = [f for f in os.listdir(os.path.join(src, r) if r else src) if os.path.isfile(os.path.join(src, r, f))]
    # a project with no licence file states it in its README (picotls, picohttpparser, klib, ...)
    found = [f for f in names if licence.match(f)] or [f for f in names if f.lower().startswith('readme')]
    keep.update(os.path.join(r, f) if r else f for f in found)
with open(os.path.join(work, 'files.txt'), 'w') as out:
    out.write('\n'.join(sorted(keep)) + '\n')

def q(s):
    return "'" + s.replace('\\', '\\\\').replace("'", "\\'") + "'"
with open(os.path.join(work, 'meson.build'), 'w') as m:
    m.write('# GENERATED by third_party/h2o-master/repin.sh from h2o\'s CMake (target libh2o-evloop): do not edit.\n')
    m.write('# Built with the gateway (the root meson.build); the tree\'s optimisation, sanitizers and LTO apply.\n')
    m.write('h2o_master_sources = files(\n' + ''.join('  ' + q('src/' + s) + ',\n' for s in sources) + ')\n')
    m.write('h2o_master_inc = include_directories(\n' + ''.join('  ' + q('src/' + i) + ',\n' for i in includes
                                                                if any(f.startswith(i + '/') for f in keep)) +
            '  is_system : true)\n')
    m.write('h2o_master_args = [\n' + ''.join('  ' + q(d) + ',\n' for d in defines if d != '-D_GNU_SOURCE') + ']\n')
    m.write("h2o_master_lib = static_library('h2o-evloop-master', h2o_master_sources,\n"
            "  include_directories : h2o_master_inc,\n"
            "  # h2o's own warnings (CMakeLists.txt CC_WARNING_FLAGS), not the tree's -Werror\n"
            "  c_args : h2o_master_args + ['-D_GNU_SOURCE', '-Wno-unused-value', '-Wno-unused-function',\n"
            "    '-Wno-unused-but-set-variable', '-Wno-unused-result', '-Werror=implicit-function-declaration',\n"
            "    '-Werror=incompatible-pointer-types'],\n"
            "  override_options : ['c_std=c99', 'warning_level=1', 'werror=false'],\n"
            "  pic : true,\n"
            "  dependencies : [ssl_dep, dependency('zlib'), cc.find_library('m'), dependency('threads'), cc.find_library('dl')])\n")
    m.write("h2o_master_dep = declare_dependency(\n"
            "  include_directories : h2o_master_inc,\n"
            "  compile_args : ['-DH2O_USE_LIBUV=0'],\n"
            "  link_with : h2o_master_lib,\n"
            "  dependencies : [ssl_dep, dependency('zlib'), cc.find_library('m'), dependency('threads'), cc.find_library('dl')])\n")
print('repin: %d sources, %d files' % (len(sources), len(keep)))
EOF

# --- 4. replace the tree, re-apply the series -------------------------------------------------------
rm -rf "$HERE/src"
mkdir -p "$HERE/src"
(cd "$WORK/src" && tar -cf - -T "$WORK/files.txt") | tar -xf - -C "$HERE/src"
mkdir -p "$HERE/patches"
[ -f "$HERE/patches/series" ] || printf '# our patches on the vendored h2o master, applied in order by repin.sh\n' >"$HERE/patches/series"
while read -r p; do
    p=${p%%#*}
    p=${p//[[:space:]]/}
    [ -n "$p" ] || continue
    echo "repin: applying $p"
    patch -d "$HERE/src" -p1 -s --no-backup-if-mismatch <"$HERE/patches/$p" || { echo "repin: $p does not apply" >&2; exit 1; }
done <"$HERE/patches/series"
cp "$WORK/meson.build" "$HERE/meson.build"
cat >"$HERE/UPSTREAM" <<EOF
# The vendored h2o (src/): written by repin.sh, do not edit.
repository https://github.com/h2o/h2o
commit $COMMIT
commit-date $(git --git-dir="$GIT_DIR" show -s --format=%cI "$COMMIT")
version $VERSION (libh2o $LIBVERSION)
# sha256 of \`git archive --format=tar $COMMIT\` (uncompressed, no prefix), made with $(git --version)
archive-sha256 $SHA256
files $(wc -l <"$WORK/files.txt") of $(tar -tf "$WORK/pristine.tar" | grep -vc '/$')
EOF
echo "repin: h2o $VERSION at $COMMIT, $(du -sh "$HERE/src" | cut -f1) in src/"
