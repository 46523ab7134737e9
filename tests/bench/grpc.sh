# Sourced by tests/bench/run: section "grpc" (issue 41), unary gRPC calls per
# second with h2load (a gRPC-framed request body, content-type
# application/grpc, te: trailers) to one gRPC server at a time, python3-grpcio
# (tests/bench/grpc_echo.py) then Node's http2 (tests/bench/grpc_node.js):
# directly over h2c, and over TLS 1.3 + HTTP/2 through lizard (a private h2c
# port, proto:<n> = h2c, with its token; run's main gateway, 2 workers), nginx
# (grpc_pass, keepalive upstream) and HAProxy (a server line with proto h2).
# bench_grpc measures, report_grpc prints its part of the report; the
# variables of run and its helpers are used as they are.

GR_TARGETS="direct lizard nginx haproxy"
GR_CONNS=8
GR_STREAMS=16
GR_PAYLOAD=64
GR_ORIGINS="grpcio node"
declare -A GR_RUNS GR_CPU GR_OK GR_REQS GR_SERVED GR_MED GR_CPU_MED GR_H2C_CONNS

# gr_h2load TARGET SECONDS OUT: h2load of gRPC calls to TARGET
gr_h2load() {
    local -a args=(-c"$GR_CONNS" -m"$GR_STREAMS" -D "$2" -d "$WORK/grpc-msg.bin" -H 'content-type: application/grpc'
        -H 'te: trailers' -H 'user-agent: grpc-bench h2load')
    local path=/lizard.bench.B/Echo
    case $1 in
    direct) timeout $(($2 + 30)) h2load "${args[@]}" "http://127.0.0.1:$GR_PORT$path" ;;
    lizard) timeout $(($2 + 30)) h2load "${args[@]}" -H ":authority: $GR_HOST" -H "x-lizard-access-token: $TOKEN" \
        "https://127.0.0.1:$P_LZ_TLS$path" ;;
    nginx) timeout $(($2 + 30)) h2load "${args[@]}" -H ":authority: $GR_HOST" "https://127.0.0.1:$GR_NGX_TLS$path" ;;
    haproxy) timeout $(($2 + 30)) h2load "${args[@]}" -H ":authority: $GR_HOST" "https://127.0.0.1:$GR_HA_TLS$path" ;;
    esac >"$3" 2>&1 || true
}

gr_pids() {
    case $1 in direct) echo "$GR_ORIGIN_PID" ;; lizard) echo "$LZ_PID" ;; nginx) echo "$GR_NGX_WORKERS" ;; haproxy) echo "$GR_HA_PID" ;; esac
}

# gr_served: Echo calls the server has answered so far
gr_served() {
    local n
    n=$(/usr/bin/python3 "$ROOT/tests/bench/grpc_echo.py" call "127.0.0.1:$GR_PORT" "$GR_HOST" - - Calls x 2>/dev/null) || n=
    [[ $n =~ ^[0-9]+$ ]] || n=0
    echo "$n"
}

# gr_origin ORIGIN: starts that gRPC server on GR_PORT (grpcio: tests/bench/grpc_echo.py; node: grpc_node.js)
gr_origin() {
    rm -f "$WORK/grpc.ready"
    # started directly (not in a subshell), so that GR_ORIGIN_PID is the server's and stop() ends it
    if [ "$1" = grpcio ]; then
        /usr/bin/python3 "$ROOT/tests/bench/grpc_echo.py" serve "$GR_PORT" "$WORK/grpc.ready" >"$WORK/grpc-origin-$1.log" 2>&1 &
    else
        node "$ROOT/tests/bench/grpc_node.js" "$GR_PORT" "$WORK/grpc.ready" >"$WORK/grpc-origin-$1.log" 2>&1 &
    fi
    GR_ORIGIN_PID=$!
    PIDS+=("$GR_ORIGIN_PID")
    for _ in $(seq 100); do
        [ -f "$WORK/grpc.ready" ] && return 0
        alive "$GR_ORIGIN_PID" || die "gRPC server ($1) exited: $(tail -3 "$WORK/grpc-origin-$1.log")"
        sleep 0.1
    done
    die "gRPC server ($1) did not listen within 10 s"
}

# gr_proxies: starts nginx (grpc_pass) and HAProxy (proto h2) in front of GR_PORT
gr_proxies() {
    ngx_conf ngx-grpc <<NGX
    keepalive_requests 10000000;
    upstream grpc_app {
        server 127.0.0.1:$GR_PORT;
        keepalive 64;
        keepalive_requests 10000000;
    }
    server {
        listen 127.0.0.1:$GR_NGX_TLS ssl http2;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        location / { grpc_pass grpc://grpc_app; }
    }
NGX
    nginx -p "$WORK/ngx-grpc" -e "$WORK/ngx-grpc/error.log" -c "$WORK/ngx-grpc/nginx.conf" &
    GR_NGX_PID=$!
    PIDS+=("$GR_NGX_PID")
    printf '%s\n' global '    nbthread 2' '    maxconn 4096' defaults '    mode http' '    timeout connect 5s' \
        '    timeout client 60s' '    timeout server 60s' '    http-reuse always' 'frontend fe' \
        "    bind 127.0.0.1:$GR_HA_TLS ssl crt $WORK/haproxy.pem alpn h2" '    default_backend be' 'backend be' \
        "    server g 127.0.0.1:$GR_PORT proto h2" >"$WORK/haproxy-grpc.cfg"
    haproxy -db -f "$WORK/haproxy-grpc.cfg" >>"$WORK/haproxy-grpc.log" 2>&1 &
    GR_HA_PID=$!
    PIDS+=("$GR_HA_PID")
    wait_port "$GR_NGX_TLS" "nginx (gRPC)" "$GR_NGX_PID"
    wait_port "$GR_HA_TLS" "haproxy (gRPC)" "$GR_HA_PID"
    GR_NGX_WORKERS=$(pids_of "$GR_NGX_PID" | tail -n +2 | tr '\n' ' ')
}

# gr_round ORIGIN TARGET ROUND: one measured h2load run after its warm-up
gr_round() {
    local k=$1-$2 pids c0 c1 s0 s1 rps reqs ok out=$WORK/grpc-$1-$2-$3.txt
    note "gRPC h2load -c$GR_CONNS -m$GR_STREAMS, $1 server: $2, round $3 of $GR_ROUNDS"
    pids=$(gr_pids "$2")
    gr_h2load "$2" "$WARMUP" "$WORK/grpc-warm-$k.txt"
    s0=$(gr_served)
    # shellcheck disable=SC2086
    c0=$(cpu_ticks $pids)
    gr_h2load "$2" "$DURATION" "$out"
    # shellcheck disable=SC2086
    c1=$(cpu_ticks $pids)
    s1=$(gr_served)
    rps=$(awk '/^finished in/ {for (i = 1; i <= NF; i++) if ($i == "req/s,") printf "%.0f", $(i - 1)}' "$out")
    reqs=$(awk '/^requests:/ {print $2}' "$out")
    ok=$(awk '/^status codes:/ {print $3}' "$out")
    GR_RUNS[$k]="${GR_RUNS[$k]:-} ${rps:-0}"
    GR_CPU[$k]="${GR_CPU[$k]:-} $(us_per_req $((c1 - c0)) "${reqs:-0}")"
    GR_OK[$k]=$((${GR_OK[$k]:-0} + ${ok:-0})) GR_REQS[$k]=$((${GR_REQS[$k]:-0} + ${reqs:-0}))
    GR_SERVED[$k]=$((${GR_SERVED[$k]:-0} + s1 - s0))
    printf '%s: %s calls/s, %s/%s 2xx, the server answered %s\n' "$k" "${rps:-0}" "${ok:-0}" "${reqs:-0}" $((s1 - s0)) >&2
}

bench_grpc() {
    local o r t p answer gr_p1 gr_p2
    read -r gr_p1 gr_p2 GR_NGX_TLS GR_HA_TLS < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(4)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
    GR_ROUNDS=3
    [ "$QUICK" = 1 ] && GR_ROUNDS=1
    # a port of its own for each server (one h2c port of the sandbox each)
    rcli HSET 'lizard:sbx:{grpc1}' state running addr 127.0.0.1 lifecycle lc-grpc1 project bench token_sha256 "$TOKEN_SHA" \
        "port:$gr_p1" private "proto:$gr_p1" h2c "port:$gr_p2" private "proto:$gr_p2" h2c >/dev/null
    # one message: the 5-byte gRPC prefix (not compressed, length) and GR_PAYLOAD bytes
    /usr/bin/python3 -c 'import struct, sys; n = int(sys.argv[2]); open(sys.argv[1], "wb").write(struct.pack("!BI", 0, n) + b"g" * n)' \
        "$WORK/grpc-msg.bin" "$GR_PAYLOAD"
    for o in $GR_ORIGINS; do
        note "gRPC: the $o server, nginx grpc_pass and HAProxy proto h2 before it"
        GR_PORT=$gr_p1
        [ "$o" = node ] && GR_PORT=$gr_p2
        GR_HOST=$GR_PORT-grpc1.$DOMAIN
        gr_origin "$o"
        gr_proxies
        # each path answers a real gRPC client's call with the app's bytes and status OK (trailers included)
        for t in $GR_TARGETS; do
            case $t in
            direct) p="127.0.0.1:$GR_PORT -" ;; lizard) p="127.0.0.1:$P_LZ_TLS $WORK/cert.pem" ;;
            nginx) p="127.0.0.1:$GR_NGX_TLS $WORK/cert.pem" ;; haproxy) p="127.0.0.1:$GR_HA_TLS $WORK/cert.pem" ;;
            esac
            # shellcheck disable=SC2086
            answer=$(/usr/bin/python3 "$ROOT/tests/bench/grpc_echo.py" call ${p% *} "$GR_HOST" ${p#* } "$TOKEN" Echo hello 2>&1) ||
                die "gRPC call to the $o server through $t failed: $answer"
            [ "$answer" = hello ] || die "gRPC call to the $o server through $t answered '$answer', expected 'hello'"
        done
        for r in $(seq "$GR_ROUNDS"); do
            for t in $GR_TARGETS; do
                gr_round "$o" "$t" "$r"
            done
        done
        for t in $GR_TARGETS; do
            # shellcheck disable=SC2086
            GR_MED[$o-$t]=$(median ${GR_RUNS[$o-$t]}) GR_CPU_MED[$o-$t]=$(median ${GR_CPU[$o-$t]})
        done
        GR_H2C_CONNS[$o]=$(ss -Htn state established dst "127.0.0.1:$GR_PORT" | wc -l)
        for p in "$GR_NGX_PID" "$GR_HA_PID" "$GR_ORIGIN_PID"; do
            stop "$p"
        done
    done
}

report_grpc() {
    local o t label
    echo
    echo "## 11. gRPC unary calls, h2load -c$GR_CONNS -m$GR_STREAMS -D $DURATION, median of $GR_ROUNDS interleaved rounds"
    echo
    echo "| server | target | calls/s | vs direct | vs nginx | 2xx / calls | calls the server answered / calls | proxy CPU µs / call |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for o in $GR_ORIGINS; do
        for t in $GR_TARGETS; do
            case $t in
            direct) label="direct (h2c; CPU: the server)" ;;
            lizard) label="lizard (TLS, private h2c port, x-lizard-access-token)" ;;
            nginx) label="nginx (TLS, grpc_pass)" ;;
            haproxy) label="HAProxy (TLS, server proto h2)" ;;
            esac
            printf '| %s | %s | %s | %s | %s | %s / %s | %s | %s |\n' "$o" "$label" "${GR_MED[$o-$t]}" \
                "$(ratio "${GR_MED[$o-$t]}" "${GR_MED[$o-direct]}")" "$(ratio "${GR_MED[$o-$t]}" "${GR_MED[$o-nginx]}")" \
                "${GR_OK[$o-$t]}" "${GR_REQS[$o-$t]}" "$(ratio "${GR_SERVED[$o-$t]}" "${GR_REQS[$o-$t]}")" "${GR_CPU_MED[$o-$t]}"
        done
    done
    echo
    echo "Two servers, each in one process: grpcio (python3-grpcio's grpc.aio, tests/bench/grpc_echo.py) and node"
    echo "(Node's http2 module speaking gRPC's framing and trailers itself, tests/bench/grpc_node.js: a faster server,"
    echo "so that the proxy is what limits). Each answers a call's $GR_PAYLOAD-byte message; every path was first checked"
    echo "with a grpcio client call (the echo and status OK in the trailers). h2load: $GR_CONNS connections of"
    echo "$GR_STREAMS streams, POST of one gRPC-framed message, content-type application/grpc, te: trailers, ${DURATION} s"
    echo "after a ${WARMUP} s h2load warm-up; h2load counts HTTP statuses, not grpc-status: \"calls the server answered\""
    echo "(its own counter) says they reached it (about 1.00). Through lizard: run's main gateway (2 workers), TLS"
    echo "1.3 to 127.0.0.1 (no SNI), :authority the sandbox's h2c port. Connections to the server at the end of"
    echo "each server's runs: grpcio ${GR_H2C_CONNS[grpcio]}, node ${GR_H2C_CONNS[node]} (lizard's one per worker, nginx's"
    echo "keepalive pool, HAProxy's); direct, the server takes h2load's $GR_CONNS connections, through a proxy the"
    echo "proxy's few. The server shares the machine's $(nproc) CPUs with h2load and the proxy."
}
