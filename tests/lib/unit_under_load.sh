#!/usr/bin/env bash
# Runs the whole unit suite of a build tree N times while another process
# keeps one core busy, and says which tests failed in which run: a timing
# assertion that only holds on an idle machine shows up here.
#
#   tests/lib/unit_under_load.sh [BUILD_DIR] [N]      (defaults: build, 5)
#
# Exits non-zero when any run failed. The tree must be built already
# (meson test --no-rebuild).
#
# UNDER_LOAD_BUSY_NICE=N runs the busy process at nice N (default 0). tests/run
# sets 19 and runs this while it builds the ASan tree: the build is the load
# then (both cores), and the busy process takes only what the build leaves,
# so that one core is busy from the first run to the last all the same.
set -euo pipefail

cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
RUNS=${2:-5}

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    echo "unit_under_load: $BUILD_DIR is not a configured build tree" >&2
    exit 2
fi

# One busy core: what the other users of a shared 2-core CI machine do.
nice -n "${UNDER_LOAD_BUSY_NICE:-0}" yes >/dev/null &
BUSY=$!
trap 'kill "$BUSY" 2>/dev/null || true' EXIT

failed_runs=0
for i in $(seq 1 "$RUNS"); do
    log=$(mktemp)
    if meson test -C "$BUILD_DIR" --no-rebuild --suite unit --print-errorlogs --timeout-multiplier 3 >"$log" 2>&1; then
        echo "run $i/$RUNS: ok ($(grep -c ' OK ' "$log") tests)"
    else
        failed_runs=$((failed_runs + 1))
        echo "run $i/$RUNS: FAILED"
        grep -E '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT)|:[FE]:' "$log" | sed 's/^/    /' || true
    fi
    rm -f "$log"
done

echo "unit_under_load: $((RUNS - failed_runs)) of $RUNS runs passed ($BUILD_DIR, one core kept busy)"
[ "$failed_runs" -eq 0 ]
