#!/bin/sh
# The image's smoke test, runnable against any build of the binary:
#   deploy/container/smoke.sh [BINARY]      (default: lizard-gateway on PATH)
# The binary must run, find its shared libraries and accept
# deploy/container/smoke.json with --check (no certificate, no Redis needed;
# the metering journal's directory must exist and be writable, as in the image).
set -eu
bin=${1:-lizard-gateway}
here=$(dirname "$0")
cfg=${SMOKE_CONFIG:-$here/smoke.json}
"$bin" --version
"$bin" -c "$cfg" --check
