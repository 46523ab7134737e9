# Sourced by tests/bench/run: section "desktop" (issue 42), a full-HD
# framebuffer update stream from an RFB origin, read by one client directly
# and through lizard's desktop tunnel (proto:<n> = rfb, the plain trusted
# listener) with a full credential and with a view-only link (the client's
# bytes walked as RFB, its PointerEvents dropped). bench_desktop measures,
# report_desktop prints its part of the report; the variables of run (WORK,
# DOMAIN, TOKEN, TOKEN_SHA, GW_BIN, PIDS, QUICK) and its helpers are used as
# they are.

DT_ROUNDS=3
DT_TARGETS="direct lizard-full lizard-view"
declare -A DT_RUNS DT_CPU DT_MED DT_CPU_MED
bench_desktop() {
    local p_origin p_lz p_lz_tls p_lz_admin keys view r t pid c0 c1 v host
    local -a args
    DT_FRAMES=64
    [ "$QUICK" = 1 ] && DT_FRAMES=16
    read -r p_origin p_lz p_lz_tls p_lz_admin < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(4)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
    note "desktop: an RFB origin (1920x1080, raw) and lizard with link keys"
    /usr/bin/python3 "$ROOT/tests/bench/rfb_stream.py" origin "$p_origin" "$WORK/dt.ready" >"$WORK/dt-origin.log" 2>&1 &
    DT_ORIGIN_PID=$!
    PIDS+=("$DT_ORIGIN_PID")
    keys=$WORK/dt-link-keys
    printf 'kb:%s\n' "bench-link-secret-$RANDOM$RANDOM-0123456789abcdef0123456789" >"$keys"
    chmod 600 "$keys"
    lizard_config lizard-dt "$p_lz" "$p_lz_tls" "$p_lz_admin" 10000 60000 2
    /usr/bin/python3 - "$WORK/lizard-dt.json" "$keys" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["auth"]["link_keys_file"] = sys.argv[2]
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
    "$GW_BIN" -c "$WORK/lizard-dt.json" >"$WORK/lizard-dt.log" 2>&1 &
    DT_LZ_PID=$!
    PIDS+=("$DT_LZ_PID")
    wait_port "$p_lz" "lizard-gateway (desktop)" "$DT_LZ_PID"
    lizard_ready "$p_lz_admin"
    for _ in $(seq 100); do
        [ -f "$WORK/dt.ready" ] && break
        sleep 0.1
    done
    rcli HSET 'lizard:sbx:{dt1}' state running addr 127.0.0.1 lifecycle lc-dt1 project bench token_sha256 "$TOKEN_SHA" \
        "port:$p_origin" private "proto:$p_origin" rfb >/dev/null
    host=$p_origin-dt1.$DOMAIN
    # a view-only link minted as a control plane would (tests/integration/share_link_ref.py)
    view=$(/usr/bin/python3 -c '
import sys, time
sys.path.insert(0, sys.argv[1])
import share_link_ref as ref
kid, secret = open(sys.argv[2]).read().strip().split(":", 1)
print(ref.mint(kid, secret.encode(), "dt1", int(sys.argv[3]), int(time.time()) + 3600, 0, view_only=True))' \
        "$ROOT/tests/integration" "$keys" "$p_origin")
    for r in $(seq "$DT_ROUNDS"); do
        for t in $DT_TARGETS; do
            case $t in
            direct) pid=$DT_ORIGIN_PID args=(direct "$p_origin" x) ;;
            lizard-full) pid=$DT_LZ_PID args=(ws "$p_lz" "$host" "$TOKEN") ;;
            lizard-view) pid=$DT_LZ_PID args=(ws "$p_lz" "$host" "$view") ;;
            esac
            c0=$(cpu_ticks "$pid")
            v=$(/usr/bin/python3 "$ROOT/tests/bench/rfb_stream.py" client "${args[@]:0:3}" "$DT_FRAMES" "${args[@]:3}" |
                awk '{print $1}') || v=0
            c1=$(cpu_ticks "$pid")
            DT_RUNS[$t]="${DT_RUNS[$t]:-} ${v:-0}"
            # CPU ms of the gateway (direct: the origin) per MiB of updates (ticks of 1/CLK_TCK s)
            DT_CPU[$t]="${DT_CPU[$t]:-} $(awk -v t=$((c1 - c0)) -v hz="$CLK_TCK" -v f="$DT_FRAMES" \
                'BEGIN {printf "%.3f", t * 1000 / hz / (f * 8294416 / 1048576)}')"
            echo "desktop round $r: $t ${v:-0} MiB/s" >&2
        done
    done
    for t in $DT_TARGETS; do
        # shellcheck disable=SC2086
        DT_MED[$t]=$(median ${DT_RUNS[$t]}) DT_CPU_MED[$t]=$(median ${DT_CPU[$t]})
    done
    DT_DROPS=$(curl -s "http://127.0.0.1:$p_lz_admin/metrics" | awk '$1 == "lizard_desktop_input_dropped_total" {print $2}')
    stop "$DT_LZ_PID"
    stop "$DT_ORIGIN_PID"
}

report_desktop() {
    local t
    echo
    echo "## 5c. desktop: a full-HD framebuffer update stream ($DT_FRAMES raw 1920x1080 updates, 8 MiB each), median of $DT_ROUNDS rounds"
    echo
    echo "| path | MiB/s | vs direct | CPU ms / MiB | rounds |"
    echo "|---|---:|---:|---:|---|"
    for t in $DT_TARGETS; do
        printf '| %s | %s | %s | %s | %s |\n' "$t" "${DT_MED[$t]}" "$(ratio "${DT_MED[$t]}" "${DT_MED[direct]}")" \
            "${DT_CPU_MED[$t]}" "${DT_RUNS[$t]# }"
    done
    echo
    echo "direct: RFB over TCP to the origin (CPU: the origin, Python); lizard-full: the desktop tunnel (GET /.lizard/rfb,"
    echo "subprotocol binary) on the trusted plain listener with the access token; lizard-view: the same with a view-only"
    echo "link (lzv1): the client's bytes walked as RFB (rfb_walk.h), its PointerEvents dropped (CPU: the gateway, 2 workers)."
    echo "The client sends its $DT_FRAMES FramebufferUpdateRequests, each with 4 PointerEvents, at once and reads the"
    echo "updates with recv_into (tests/bench/rfb_stream.py). Input the view-only runs dropped: ${DT_DROPS:-0} messages."
}
