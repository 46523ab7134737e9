#!/usr/bin/env bash
# Builds libh2o-evloop as a static PIC library from Debian's own h2o source
# package (pinned by sha256), with Debian's patch series and then the
# project's (third_party/h2o/patches/series) applied. meson runs this at
# configure time (see meson.build); it is also usable by hand:
#
#   third_party/h2o/build.sh OUTDIR CC [CFLAG...]
#
# OUTDIR receives lib/libh2o-evloop.a, include/ and build.log. A stamp of
# every input (this script, the pins, the series, each patch, CC, CFLAGS)
# makes a second run with the same inputs a no-op, and any change a rebuild.
# The source comes through apt-get with a private deb-src list derived from
# the machine's own apt sources: no host is named here, /etc/apt is never
# edited. Prints one line on success: the version string, e.g.
# "2.2.5+dfsg2-7+lizard.7". Logs go to OUTDIR/build.log; on failure its tail
# goes to stderr and the exit status is non-zero.
set -euo pipefail

DEB_VERSION=2.2.5+dfsg2-7
ORIG_TAR=h2o_2.2.5+dfsg2.orig.tar.xz
ORIG_SHA256=a46894bd85da6528d4ad90ce0443b48118718296175061a1a1156e9e3af60a0d
DEBIAN_TAR=h2o_2.2.5+dfsg2-7.debian.tar.xz
DEBIAN_SHA256=cdac721373a73bd6a94707cfa90ea0ac25cf33898727f7137dd9acdb351f2964

[ $# -ge 2 ] || { echo "usage: $0 OUTDIR CC [CFLAG...]" >&2; exit 2; }
OUT=$1
CC_BIN=$2
shift 2
CFLAGS_H2O="$*"
HERE=$(cd "$(dirname "$0")" && pwd)
PATCHES=$HERE/patches
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/build.log

# Our series: file names, blank lines and '#' comments ignored.
mapfile -t SERIES < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$PATCHES/series" | grep -v '^$' || true)
VERSION="$DEB_VERSION+lizard.${#SERIES[@]}"

stamp() {
    {
        cat "$0"
        printf '%s\n' "$CC_BIN" "$CFLAGS_H2O" "$("$CC_BIN" --version 2>/dev/null | head -n 1)"
        cat "$PATCHES/series"
        for p in "${SERIES[@]}"; do cat "$PATCHES/$p"; done
    } | sha256sum | cut -d' ' -f1
}
STAMP=$(stamp)
if [ -f "$OUT/stamp" ] && [ "$(cat "$OUT/stamp")" = "$STAMP" ] && [ -f "$OUT/lib/libh2o-evloop.a" ]; then
    echo "$VERSION"
    exit 0
fi

fail() {
    echo "h2o: $*" >&2
    [ -f "$LOG" ] && tail -n 40 "$LOG" >&2
    exit 1
}

: >"$LOG"
rm -f "$OUT/stamp"

# --- 1. source, verified --------------------------------------------------------
DL=$OUT/download
verified() { [ -f "$DL/$1" ] && [ "$(sha256sum "$DL/$1" | cut -d' ' -f1)" = "$2" ]; }
if ! verified "$ORIG_TAR" "$ORIG_SHA256" || ! verified "$DEBIAN_TAR" "$DEBIAN_SHA256"; then
    APT=$OUT/apt
    rm -rf "$APT"
    mkdir -p "$APT/parts" "$APT/lists/partial" "$APT/cache/archives/partial" "$DL"
    found=0
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        sed 's/^Types:.*/Types: deb-src/' "$f" >"$APT/parts/$(basename "$f")"
        found=1
    done
    if [ -f /etc/apt/sources.list ]; then
        sed -n 's/^deb[[:space:]]\(.*\)/deb-src \1/p' /etc/apt/sources.list >"$APT/parts/legacy.list"
        [ -s "$APT/parts/legacy.list" ] && found=1
    fi
    [ "$found" = 1 ] || fail "no apt sources on this machine to derive a deb-src list from"
    opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$APT/parts"
        -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache" -o "APT::Sandbox::User=root")
    echo "h2o: fetching Debian source package h2o=$DEB_VERSION" >&2
    apt-get "${opts[@]}" update -qq >>"$LOG" 2>&1 || fail "apt-get update (deb-src) failed"
    (cd "$DL" && apt-get "${opts[@]}" source --download-only "h2o=$DEB_VERSION") >>"$LOG" 2>&1 ||
        fail "apt-get source h2o=$DEB_VERSION failed"
    verified "$ORIG_TAR" "$ORIG_SHA256" || fail "$ORIG_TAR: sha256 mismatch (expected $ORIG_SHA256)"
    verified "$DEBIAN_TAR" "$DEBIAN_SHA256" || fail "$DEBIAN_TAR: sha256 mismatch (expected $DEBIAN_SHA256)"
fi

# --- 2. Debian's patches, then ours -------------------------------------------------
SRC=$OUT/src
rm -rf "$SRC"
mkdir -p "$SRC"
tar -xJf "$DL/$ORIG_TAR" -C "$SRC" --strip-components=1
tar -xJf "$DL/$DEBIAN_TAR" -C "$SRC"
while read -r p; do
    p=${p%%#*}
    p=${p//[[:space:]]/}
    [ -n "$p" ] || continue
    patch -d "$SRC" -p1 -s --no-backup-if-mismatch <"$SRC/debian/patches/$p" >>"$LOG" 2>&1 || fail "Debian patch $p does not apply"
done <"$SRC/debian/patches/series"
for p in "${SERIES[@]}"; do
    echo "h2o: applying $p" >>"$LOG"
    patch -d "$SRC" -p1 -s --no-backup-if-mismatch <"$PATCHES/$p" >>"$LOG" 2>&1 || fail "patch $p does not apply"
done

# --- 3. build the library only ---------------------------------------------------------
BLD=$OUT/cmake
rm -rf "$BLD"
echo "h2o: building libh2o-evloop $VERSION" >&2
CC=$CC_BIN cmake -S "$SRC" -B "$BLD" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="$CFLAGS_H2O" \
    -DWITH_MRUBY=OFF -DWITH_PICOTLS=OFF -DWITH_BUNDLED_SSL=OFF -DDISABLE_LIBUV=ON \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON >>"$LOG" 2>&1 || fail "cmake configure failed"
ninja -C "$BLD" libh2o-evloop >>"$LOG" 2>&1 || fail "build failed"

# --- 4. install: the archive and the headers ---------------------------------------------
rm -rf "$OUT/lib" "$OUT/include"
mkdir -p "$OUT/lib"
cp "$BLD/libh2o-evloop.a" "$OUT/lib/"
cp -r "$SRC/include" "$OUT/include"
# picohttpparser is compiled into the library and exported by it; its header
# lives in deps/, so it goes beside h2o's own
cp "$SRC/deps/picohttpparser/picohttpparser.h" "$OUT/include/"
echo "$STAMP" >"$OUT/stamp"
echo "$VERSION"
