# Sourced by tests/bench/run: section "wsh2" (issue 41), idle WebSockets over
# HTTP/2 (RFC 8441 extended CONNECT, ws_h2_client.py: 100 streams per TLS
# connection) against the same WebSockets as HTTP/1.1 upgrades over TLS, the
# proxies and the origin of section 5 (run calls bench_wsh2 inside that
# section, with its ws_measure and instances). Every proxy is offered both:
# nginx's and HAProxy's TLS listeners of section 5 take ALPN h2 too, and a
# proxy that does not offer SETTINGS_ENABLE_CONNECT_PROTOCOL shows as such
# (its tunnels failed: "no extended CONNECT"). Each row starts from a fresh
# process of the proxy (wsh2_fresh). report_wsh2 prints its part of
# the report; the variables and helpers of run are used as they are.

WSH2_TARGETS="lizard-h2 lizard-h1tls nginx-h2 nginx-h1tls haproxy-h2 haproxy-h1tls"
# wsh2_fresh TARGET: restarts the proxy of TARGET (section 5's config), so that each row starts from a
# process that never held tunnels (the heap a process keeps after section 5's 10,000 would hide the growth)
wsh2_fresh() {
    case $1 in
    lizard-*)
        stop "$LZW_PID"
        "$GW_BIN" -c "$WORK/lizard-ws.json" >>"$WORK/lizard-ws.log" 2>&1 &
        LZW_PID=$!
        PIDS+=("$LZW_PID")
        wait_port "$P_LZW_TLS" "lizard-gateway (WebSockets)" "$LZW_PID"
        lizard_ready "$P_LZW_ADMIN"
        ;;
    nginx-*)
        stop "$NGXW_PID"
        nginx -p "$WORK/ngx-ws" -e "$WORK/ngx-ws/error.log" -c "$WORK/ngx-ws/nginx.conf" &
        NGXW_PID=$!
        PIDS+=("$NGXW_PID")
        wait_port "$P_NGXW_TLS" "nginx (WebSockets)" "$NGXW_PID"
        ;;
    haproxy-*)
        stop "$HAW_PID"
        haproxy -db -f "$WORK/haproxy-ws.cfg" >>"$WORK/haproxy-ws.log" 2>&1 &
        HAW_PID=$!
        PIDS+=("$HAW_PID")
        wait_port "$P_HAW_TLS" "haproxy (WebSockets)" "$HAW_PID"
        ;;
    esac
    sleep 0.5
}

bench_wsh2() {
    local t port addr pid
    WSH2_N=${BENCH_WSH2_TUNNELS:-2000}
    [ "$QUICK" = 1 ] && WSH2_N=${BENCH_WSH2_TUNNELS:-500}
    # two descriptors per tunnel over HTTP/1.1 (the client's and the upstream socket), one over HTTP/2
    [ "$NOFILE" != unlimited ] && [ $((2 * WSH2_N + 500)) -gt "$NOFILE" ] && WSH2_N=$(((NOFILE - 500) / 2))
    [ "$WSH2_N" -gt "$WS_TUNNELS" ] && WSH2_N=$WS_TUNNELS
    # a warm-up of 20 tunnels: the heap a larger one leaves behind would take the first tunnels measured
    WS_N=$WSH2_N WS_WARM=20
    for t in $WSH2_TARGETS; do
        wsh2_fresh "$t"
        case $t in
        lizard-*) port=$P_LZW_TLS addr=127.0.0.2 pid=$LZW_PID ;;
        nginx-*) port=$P_NGXW_TLS addr=127.0.0.3 pid=$NGXW_PID ;;
        haproxy-*) port=$P_HAW_TLS addr=127.0.0.4 pid=$HAW_PID ;;
        esac
        WS_CLIENT_PY=$WORK/ws_client.py
        [ "${t##*-}" = h2 ] && WS_CLIENT_PY=$ROOT/tests/bench/ws_h2_client.py
        ws_measure "$t" "$port" "$addr" "$pid" "$WORK/cert.pem"
        WSH2_CONNS[$t]=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("connections", "-"))' \
            "$WORK/ws-$t.json" 2>/dev/null || echo -)
    done
    WS_N=$WS_TUNNELS WS_CLIENT_PY=$WORK/ws_client.py WS_WARM=200
}
declare -A WSH2_CONNS

report_wsh2() {
    local t label h1
    echo
    echo "## 5d. idle WebSockets over HTTP/2 (RFC 8441) and over HTTP/1.1, TLS 1.3: $WSH2_N tunnels per row"
    echo
    echo "| proxy | protocol | tunnels open | failed | dropped while held | client connections | at origin | RSS before MiB | RSS open MiB | KiB / tunnel | vs HTTP/1.1 | vs nginx HTTP/1.1 | vs HAProxy HTTP/1.1 | descriptors / tunnel | kernel slab KiB / tunnel | open s |"
    echo "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for t in $WSH2_TARGETS; do
        h1=${t%-*}-h1tls
        label=HTTP/1.1
        [ "${t##*-}" = h2 ] && label="HTTP/2 extended CONNECT"
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "${t%-*}" "$label" \
            "${WS_OK[$t]}" "${WS_FAIL[$t]}" "${WS_DROP[$t]}" "${WSH2_CONNS[$t]:-${WS_OK[$t]}}" "${WS_AT_ORIGIN[$t]}" \
            "$(mb $((WS_RSS0[$t] * 1024)))" "$(mb $((WS_RSS1[$t] * 1024)))" "${WS_KIB[$t]}" \
            "$(ratio "${WS_KIB[$t]}" "${WS_KIB[$h1]}")" "$(ratio "${WS_KIB[$t]}" "${WS_KIB[nginx-h1tls]}")" \
            "$(ratio "${WS_KIB[$t]}" "${WS_KIB[haproxy-h1tls]}")" "${WS_FDS[$t]}" "${WS_SLAB[$t]}" "${WS_SECS[$t]}"
    done
    echo
    echo "The instances and origin of section 5 (2 workers / threads each, the origin a python3 asyncio program"
    echo "that answers 101 and holds the connection). HTTP/2 rows: tests/bench/ws_h2_client.py, python3-h2, $WSH2_N"
    echo "CONNECT streams (:protocol websocket) on TLS connections of at most 100 streams each, each checked for"
    echo "its 200; a proxy whose SETTINGS do not carry SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 gets no CONNECT and its"
    echo "row fails (\"no extended CONNECT\"). HTTP/1.1 rows: section 5's client over each proxy's TLS listener, one"
    echo "TLS connection per tunnel. KiB / tunnel and descriptors / tunnel: the growth of the proxy's RSS and of"
    echo "its open descriptors with the tunnels open, per tunnel, each row on a fresh process of the proxy after 20"
    echo "tunnels opened and closed as a warm-up (a larger warm-up leaves heap that the first tunnels measured reuse)."
    echo "vs HTTP/1.1: the ratio to the same proxy's HTTP/1.1 row; lizard HTTP/2 to lizard HTTP/1.1:"
    echo "memory $(ratio "${WS_KIB[lizard-h2]}" "${WS_KIB[lizard-h1tls]}")x, descriptors $(ratio "${WS_FDS[lizard-h2]}" "${WS_FDS[lizard-h1tls]}")x."
}
