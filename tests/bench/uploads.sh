# Sourced by tests/bench/run: section "upload" (issue 41), a large request body
# uploaded with curl -T over TLS 1.3 (HTTP/1.1 and HTTP/2) to a private port
# with its token, through lizard, nginx (proxy_request_buffering off, and as
# shipped: the body buffered to a temp file before it is sent on) and HAProxy,
# to one origin that reads and discards the body and answers with the bytes it
# read (tests/bench/upload_origin.py); direct: the same upload to the origin
# over plain HTTP/1.1. Then UP_CONC uploads at once through each. Each proxy is
# an instance of its own (2 workers / threads). bench_upload measures,
# report_upload prints its part of the report; the variables of run (WORK,
# DOMAIN, TOKEN, TOKEN_SHA, GW_BIN, PIDS, QUICK) and its helpers are used as
# they are.

UP_TARGETS="direct lizard-h1 lizard-h2 nginx-h1 nginx-h2 nginx-buf-h1 nginx-buf-h2 haproxy-h1 haproxy-h2"
UP_CONC=10
declare -A UP_SPEEDS UP_N UP_BAD UP_PEAK UP_TEMP UP_TICKS UP_MED UP_CPU
declare -A UPC_OK UPC_SPEED UPC_PEAK UPC_TEMP

# up_temp_bytes: bytes of nginx's client body temp files (unlinked at creation: seen through the workers' descriptors)
up_temp_bytes() {
    local t=0 pid fd target
    for pid in $UP_NGX_WORKERS; do
        for fd in /proc/"$pid"/fd/*; do
            target=$(readlink "$fd" 2>/dev/null) || continue
            case $target in
            "$WORK/ngx-up/client_temp/"*) t=$((t + $(stat -L -c %s "$fd" 2>/dev/null || echo 0))) ;;
            esac
        done
    done
    echo "$t"
}

# up_pids TARGET: the proxy's processes (nginx: its workers; direct: the origin)
up_pids() {
    case $1 in
    direct) echo "$UP_ORIGIN_PID" ;; lizard-*) echo "$UP_LZ_PID" ;; nginx-*) echo "$UP_NGX_WORKERS" ;; haproxy-*) echo "$UP_HA_PID" ;;
    esac
}

# up_curl TARGET FILE UA OUT: one upload with curl; writes "code bytes_sent speed body" to OUT
up_curl() {
    local t=$1 port path=/upload proto=--http1.1 host=$UP_HOST
    local -a args=(-s -k -X POST -T "$2" -A "$3" -w '%{http_code} %{size_upload} %{speed_upload} ' -o "$4.body")
    case $t in
    direct) port=$UP_PORT ;; lizard-*) port=$UP_LZ_TLS ;; nginx-buf-*) port=$UP_NGX_TLS path=/buffered/upload ;;
    nginx-*) port=$UP_NGX_TLS ;; haproxy-*) port=$UP_HA_TLS ;;
    esac
    [ "${t##*-}" = h2 ] && proto=--http2
    if [ "$t" = direct ]; then
        timeout 900 curl "${args[@]}" "http://127.0.0.1:$port$path" >"$4" || true
    else
        timeout 900 curl "${args[@]}" "$proto" --resolve "$host:$port:127.0.0.1" -H "X-Lizard-Access-Token: $TOKEN" \
            "https://$host:$port$path" >"$4" || true
    fi
    { cat "$4.body" 2>/dev/null || true; echo; } >>"$4"
}

# up_watch PIDS_OF_CLIENTS -- TARGET: samples the proxy's RSS (KiB) and nginx's temp bytes while the clients run;
# sets W_BASE W_PEAK W_TEMP
up_watch() {
    local target=$2 v
    W_PEAK=$W_BASE W_TEMP=0
    while :; do
        local any=0 c
        for c in $1; do alive "$c" && any=1; done
        [ "$any" = 0 ] && break
        # shellcheck disable=SC2046
        v=$(rss_kb $(up_pids "$target")) && [ "$v" -gt "$W_PEAK" ] && W_PEAK=$v
        case $target in nginx-buf-*) v=$(up_temp_bytes) && [ "$v" -gt "$W_TEMP" ] && W_TEMP=$v ;; esac
        sleep 0.1
    done
}

bench_upload() {
    local p r t i c0 c1 out code sent speed body pids clients w0 w1 ok total
    read -r UP_PORT UP_LZ UP_LZ_TLS UP_LZ_ADMIN UP_NGX_TLS UP_HA_TLS < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(6)]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
    UP_SIZE=1G UP_CONC_SIZE=100M UP_ROUNDS=3
    [ "$QUICK" = 1 ] && UP_SIZE=300M UP_CONC_SIZE=30M UP_ROUNDS=1
    truncate -s "$UP_SIZE" "$WORK/upload-src"
    truncate -s "$UP_CONC_SIZE" "$WORK/upload-conc"
    UP_BYTES=$(stat -c %s "$WORK/upload-src") UP_CONC_BYTES=$(stat -c %s "$WORK/upload-conc")
    note "uploads: origin, lizard, nginx and HAProxy for $(mb "$UP_BYTES") MiB bodies"
    /usr/bin/python3 "$ROOT/tests/bench/upload_origin.py" "$UP_PORT" "$WORK/up.ready" "$WORK/up-origin.txt" \
        >"$WORK/up-origin.log" 2>&1 &
    UP_ORIGIN_PID=$!
    PIDS+=("$UP_ORIGIN_PID")
    rcli HSET 'lizard:sbx:{up1}' state running addr 127.0.0.1 lifecycle lc-up1 project bench token_sha256 "$TOKEN_SHA" \
        "port:$UP_PORT" private >/dev/null
    UP_HOST=$UP_PORT-up1.$DOMAIN
    lizard_config lizard-up "$UP_LZ" "$UP_LZ_TLS" "$UP_LZ_ADMIN" 10000 60000 2 "" '"max_request_body_bytes": 17179869184'
    "$GW_BIN" -c "$WORK/lizard-up.json" >"$WORK/lizard-up.log" 2>&1 &
    UP_LZ_PID=$!
    PIDS+=("$UP_LZ_PID")
    ngx_conf ngx-up <<EOF
    client_max_body_size 0;
    upstream up {
        server 127.0.0.1:$UP_PORT;
        keepalive 64;
    }
    server {
        listen 127.0.0.1:$UP_NGX_TLS ssl http2;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host \$host;
        proxy_set_header X-Forwarded-For \$remote_addr;
        location / {
            proxy_pass http://up;
            proxy_request_buffering off;
        }
        location /buffered/ {
            proxy_pass http://up/;
        }
    }
EOF
    nginx -p "$WORK/ngx-up" -e "$WORK/ngx-up/error.log" -c "$WORK/ngx-up/nginx.conf" &
    UP_NGX_PID=$!
    PIDS+=("$UP_NGX_PID")
    printf '%s\n' global '    nbthread 2' '    maxconn 4096' defaults '    mode http' '    timeout connect 5s' \
        '    timeout client 60s' '    timeout server 60s' '    option http-keep-alive' 'frontend fe' \
        "    bind 127.0.0.1:$UP_HA_TLS ssl crt $WORK/haproxy.pem alpn h2,http/1.1" '    option forwardfor' \
        '    default_backend be' 'backend be' "    server up 127.0.0.1:$UP_PORT" >"$WORK/haproxy-up.cfg"
    haproxy -db -f "$WORK/haproxy-up.cfg" >"$WORK/haproxy-up.log" 2>&1 &
    UP_HA_PID=$!
    PIDS+=("$UP_HA_PID")
    wait_port "$UP_LZ" "lizard-gateway (uploads)" "$UP_LZ_PID"
    wait_port "$UP_NGX_TLS" "nginx (uploads)" "$UP_NGX_PID"
    wait_port "$UP_HA_TLS" "haproxy (uploads)" "$UP_HA_PID"
    lizard_ready "$UP_LZ_ADMIN"
    for _ in $(seq 100); do
        [ -f "$WORK/up.ready" ] && break
        sleep 0.1
    done
    UP_NGX_WORKERS=$(pids_of "$UP_NGX_PID" | tail -n +2 | tr '\n' ' ')
    # warm-up: one small upload through each, checked (the page cache holds the source file after it)
    head -c 4194304 /dev/zero >"$WORK/upload-warm"
    cat "$WORK/upload-src" >/dev/null
    for t in $UP_TARGETS; do
        up_curl "$t" "$WORK/upload-warm" "bench-warm-$t" "$WORK/up-warm-$t.txt"
        read -r code sent speed body <"$WORK/up-warm-$t.txt"
        [ "$code $body" = "200 4194304" ] || die "upload warm-up through $t: '$(cat "$WORK/up-warm-$t.txt")' (expected 200 4194304)"
    done
    for r in $(seq "$UP_ROUNDS"); do
        for t in $UP_TARGETS; do
            note "upload $(mb "$UP_BYTES") MiB: $t, round $r of $UP_ROUNDS"
            pids=$(up_pids "$t")
            sleep 1
            # shellcheck disable=SC2086
            W_BASE=$(rss_kb $pids) c0=$(cpu_ticks $pids)
            out=$WORK/up-$t-$r.txt
            up_curl "$t" "$WORK/upload-src" "bench-$t-$r" "$out" &
            clients=$!
            up_watch "$clients" "$t"
            wait "$clients" || true
            # shellcheck disable=SC2086
            c1=$(cpu_ticks $pids)
            read -r code sent speed body <"$out"
            printf '%s: %s, %s bytes sent, origin read %s, %s MiB/s, peak RSS +%s KiB\n' "$t" "$code" "$sent" "$body" \
                "$(mb "${speed%.*}")" $((W_PEAK - W_BASE)) >&2
            if [ "$code" = 200 ] && [ "$body" = "$UP_BYTES" ]; then
                UP_SPEEDS[$t]="${UP_SPEEDS[$t]:-} ${speed%.*}" UP_N[$t]=$((${UP_N[$t]:-0} + 1))
                UP_TICKS[$t]=$((${UP_TICKS[$t]:-0} + c1 - c0))
            else
                UP_BAD[$t]=$((${UP_BAD[$t]:-0} + 1))
                echo "bench: upload through $t: expected 200 and $UP_BYTES bytes at the origin, got '$(cat "$out")'" >&2
            fi
            [ $((W_PEAK - W_BASE)) -gt "${UP_PEAK[$t]:-0}" ] && UP_PEAK[$t]=$((W_PEAK - W_BASE))
            [ "$W_TEMP" -gt "${UP_TEMP[$t]:-0}" ] && UP_TEMP[$t]=$W_TEMP
        done
    done
    for t in $UP_TARGETS; do
        # shellcheck disable=SC2086
        UP_MED[$t]=$(median ${UP_SPEEDS[$t]:-})
        UP_CPU[$t]=$(awk -v t="${UP_TICKS[$t]:-0}" -v n="${UP_N[$t]:-0}" -v b="$UP_BYTES" -v hz="$CLK_TCK" \
            'BEGIN { if (n > 0) printf "%.2f", t / hz / (n * b / 1073741824); else printf "-" }')
    done
    # UP_CONC uploads at once through each proxy, each on its own connection
    for t in $UP_TARGETS; do
        [ "$t" = direct ] && continue
        note "upload: $UP_CONC x $(mb "$UP_CONC_BYTES") MiB at once through $t"
        pids=$(up_pids "$t")
        sleep 1
        # shellcheck disable=SC2086
        W_BASE=$(rss_kb $pids)
        clients=
        w0=$(date +%s.%N)
        for i in $(seq "$UP_CONC"); do
            up_curl "$t" "$WORK/upload-conc" "bench-conc-$t-$i" "$WORK/upc-$t-$i.txt" &
            clients="$clients $!"
        done
        up_watch "$clients" "$t"
        # shellcheck disable=SC2086
        wait $clients || true
        w1=$(date +%s.%N)
        ok=0
        for i in $(seq "$UP_CONC"); do
            read -r code sent speed body <"$WORK/upc-$t-$i.txt"
            [ "$code" = 200 ] && [ "$body" = "$UP_CONC_BYTES" ] && ok=$((ok + 1))
        done
        total=$((ok * UP_CONC_BYTES))
        UPC_OK[$t]=$ok UPC_PEAK[$t]=$((W_PEAK - W_BASE)) UPC_TEMP[$t]=$W_TEMP
        UPC_SPEED[$t]=$(awk -v b="$total" -v a="$w0" -v z="$w1" 'BEGIN { printf "%.0f", b / (z - a) }')
        printf '%s: %s of %s complete, %s MiB/s in all, peak RSS +%s KiB, temp %s bytes\n' "$t" "$ok" "$UP_CONC" \
            "$(mb "${UPC_SPEED[$t]}")" "${UPC_PEAK[$t]}" "$W_TEMP" >&2
    done
    UP_LZ_LIVE=yes
    alive "$UP_LZ_PID" || UP_LZ_LIVE="no: it exited ($(tail -3 "$WORK/lizard-up.log" | tr '\n' ' '))"
    for p in "$UP_LZ_PID" "$UP_NGX_PID" "$UP_HA_PID" "$UP_ORIGIN_PID"; do
        stop "$p"
    done
}

report_upload() {
    local t label ng
    echo
    echo "## 10. uploads: $(mb "$UP_BYTES") MiB request body over TLS 1.3 to a private port with its token, median of $UP_ROUNDS interleaved rounds"
    echo
    echo "| target | MiB/s | vs direct | vs nginx (unbuffered, same protocol) | peak RSS growth MiB | peak temp file MiB | proxy CPU s / GiB | complete uploads |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for t in $UP_TARGETS; do
        case $t in
        direct) label="origin direct (plain HTTP/1.1; CPU: the origin)" ;;
        nginx-buf-*) label="nginx ${t##*-} (proxy_request_buffering on, the default)" ;;
        nginx-*) label="nginx ${t##*-} (proxy_request_buffering off)" ;;
        *) label="${t%-*} ${t##*-}" ;;
        esac
        ng=nginx-${t##*-}
        [ "$t" = direct ] && ng=nginx-h1
        printf '| %s | %s | %s | %s | %s | %s | %s | %s / %s |\n' "$label" "$(mb "${UP_MED[$t]}")" \
            "$(ratio "${UP_MED[$t]}" "${UP_MED[direct]}")" "$(ratio "${UP_MED[$t]}" "${UP_MED[$ng]}")" \
            "$(mb $((${UP_PEAK[$t]:-0} * 1024)))" "$(mb "${UP_TEMP[$t]:-0}")" "${UP_CPU[$t]}" "${UP_N[$t]:-0}" "$UP_ROUNDS"
    done
    echo
    echo "### $UP_CONC uploads of $(mb "$UP_CONC_BYTES") MiB at once (one connection each)"
    echo
    echo "| target | complete | MiB/s in all | peak RSS growth MiB | vs nginx (unbuffered, same protocol) | peak temp file MiB |"
    echo "|---|---:|---:|---:|---:|---:|"
    for t in $UP_TARGETS; do
        [ "$t" = direct ] && continue
        ng=nginx-${t##*-}
        printf '| %s | %s / %s | %s | %s | %s | %s |\n' "$t" "${UPC_OK[$t]}" "$UP_CONC" "$(mb "${UPC_SPEED[$t]}")" \
            "$(mb $((UPC_PEAK[$t] * 1024)))" "$(ratio "${UPC_PEAK[$t]}" "${UPC_PEAK[$ng]}")" "$(mb "${UPC_TEMP[$t]:-0}")"
    done
    echo
    echo "curl -T (a sparse file from the page cache) with X-Lizard-Access-Token, TLS 1.3, --http1.1 (curl asks"
    echo "Expect: 100-continue) or --http2; the origin (tests/bench/upload_origin.py, python3, one thread per"
    echo "connection) reads the body to its end, discards it and answers the byte count: an upload counts only when"
    echo "it answered 200 with exactly the bytes sent. Each proxy an instance of its own, 2 workers / threads:"
    echo "lizard with limits.max_request_body_bytes 16 GiB; nginx client_max_body_size 0, HTTP/2 on its TLS"
    echo "listener, proxy_request_buffering off (streams) and on (the default: the whole body goes to a temp file"
    echo "first, then to the origin); HAProxy (streams). Peak RSS growth: the proxy's RSS (nginx: its workers)"
    echo "sampled every 0.1 s during the upload, minus the RSS just before it. Temp file: nginx's client body temp"
    echo "files (unlinked at creation) seen through its workers' descriptors. lizard alive at the end: $UP_LZ_LIVE."
}
