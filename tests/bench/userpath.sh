# Sourced by tests/bench/run: the user-path sections that are not section
# "user" (issue 28): TLS + HTTP/2 over 16 sandboxes (h2many), the large
# download over TLS and over the trusted plain listener (dltls), and the
# report of the idle wss:// tunnels that section 5 measures (wss). Each
# section is a function that measures (bench_*) and one that prints its part
# of the report (report_*); the variables of run (ports, pids, helpers) are
# used as they are.

# --- h2many: TLS 1.3 + HTTP/2, 16 sandboxes ------------------------------------------
# One h2load per sandbox, all at once (h2load sends one :authority per run):
# H2M_SANDBOXES processes, each -c1 -m16, 256 streams in flight in all as in
# section 2, but to 16 sandboxes (rr0..rr15, public, the same origin), so that
# the gateway keeps 16 upstream pools busy instead of one.
H2M_SANDBOXES=16
declare -A H2M_RPS H2M_OK H2M_REQS H2M_CPU H2M_UPC H2M_NEWC H2M_FWD
bench_h2many() {
    local t port pids q0 a0 t0 t1 a1 q1 i hp out
    for t in nginx haproxy lizard; do
        case $t in
        nginx) port=$P_NGX_TLS pids=$NGX_PIDS ;;
        haproxy) port=$P_HA_TLS pids=$HA_PID ;;
        lizard) port=$P_LZ_TLS pids=$LZ_PID ;;
        esac
        note "h2load x $H2M_SANDBOXES sandboxes: $t"
        # shellcheck disable=SC2086
        q0=$(origin_requests) a0=$(origin_accepts) t0=$(cpu_ticks $pids)
        hp=()
        for i in $(seq 0 $((H2M_SANDBOXES - 1))); do
            timeout $((DURATION + WARMUP + 30)) h2load -c1 -m"$H2_STREAMS" -D "$DURATION" --warm-up-time="$WARMUP" \
                -H ":authority: $P_ORIGIN-rr$i.$DOMAIN" "https://127.0.0.1:$port/" >"$WORK/h2many-$t-$i.txt" 2>&1 &
            hp+=($!)
        done
        wait "${hp[@]}" 2>/dev/null || true
        # shellcheck disable=SC2086
        t1=$(cpu_ticks $pids) a1=$(origin_accepts) q1=$(origin_requests)
        out=$(cat "$WORK"/h2many-"$t"-*.txt)
        H2M_RPS[$t]=$(awk '/^finished in/ {for (i = 1; i <= NF; i++) if ($i == "req/s,") s += $(i - 1)} END {printf "%.0f", s}' <<<"$out")
        H2M_REQS[$t]=$(awk '/^requests:/ {s += $2} END {print s + 0}' <<<"$out")
        H2M_OK[$t]=$(awk '/^status codes:/ {s += $3} END {print s + 0}' <<<"$out")
        H2M_UPC[$t]=$((a1 - a0))
        H2M_NEWC[$t]=$(awk -v c=$((a1 - a0)) -v q=$((q1 - q0 - 2)) 'BEGIN { if (q > 0) printf "%.4f", c / q; else printf "-" }')
        # CPU and origin requests include the warm-up, h2load's counts do not: scale
        H2M_CPU[$t]=$(awk -v t=$((t1 - t0)) -v n="${H2M_REQS[$t]}" -v hz="$CLK_TCK" -v d="$DURATION" -v w="$WARMUP" \
            'BEGIN { if (n > 0) printf "%.1f", t * d / (d + w) * 1e6 / hz / n; else printf "-" }')
        H2M_FWD[$t]=$(awk -v q=$((q1 - q0 - 2)) -v n="${H2M_REQS[$t]}" -v d="$DURATION" -v w="$WARMUP" \
            'BEGIN { if (n > 0) printf "%.2f", q * d / (d + w) / n; else printf "-" }')
        printf '%s: %s req/s over %s sandboxes, %s/%s 2xx, CPU %s µs/req\n' "$t" "${H2M_RPS[$t]}" "$H2M_SANDBOXES" \
            "${H2M_OK[$t]}" "${H2M_REQS[$t]}" "${H2M_CPU[$t]}" >&2
    done
}
report_h2many() {
    local t
    echo
    echo "## 2b. TLS 1.3 + HTTP/2 over $H2M_SANDBOXES sandboxes: $H2M_SANDBOXES h2load at once, each -c1 -m$H2_STREAMS -D $DURATION"
    echo
    echo "| target | req/s | vs nginx | vs HAProxy | 2xx / requests | CPU µs/req | CPU vs HAProxy | origin conns | new conns/req | origin req/req |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for t in nginx haproxy lizard; do
        printf '| %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s |\n' "$t" "${H2M_RPS[$t]}" \
            "$(ratio "${H2M_RPS[$t]}" "${H2M_RPS[nginx]}")" "$(ratio "${H2M_RPS[$t]}" "${H2M_RPS[haproxy]}")" \
            "${H2M_OK[$t]}" "${H2M_REQS[$t]}" "${H2M_CPU[$t]}" "$(ratio "${H2M_CPU[$t]}" "${H2M_CPU[haproxy]}")" \
            "${H2M_UPC[$t]}" "${H2M_NEWC[$t]}" "${H2M_FWD[$t]}"
    done
    echo
    echo "One connection per sandbox (:authority $P_ORIGIN-rr0..rr$((H2M_SANDBOXES - 1)).$DOMAIN, all public, the same origin):"
    echo "lizard keeps one upstream pool per sandbox, so 16 pools share the worker's idle connections"
    echo "(upstream.max_idle_per_worker) where section 2 uses one; nginx and HAProxy have one upstream for all."
    echo "req/s: the sum of the $H2M_SANDBOXES h2load runs. CPU and origin conns include the ${WARMUP} s warm-up"
    echo "(CPU scaled to the measured period)."
}

# --- dltls: the large download over TLS and over the trusted plain listener ----------
# curl -o /dev/null of the sparse file (HUGE_SIZE), DL_ROUNDS interleaved
# rounds: direct (plain, the origin's sendfile), lizard on the trusted plain
# listener, lizard over TLS 1.3 (HTTP/1.1 and HTTP/2), nginx and HAProxy over
# TLS 1.3 (HTTP/1.1, nginx proxy_buffering off: the streaming configuration).
# With --perf, one more TLS download through lizard under perf record.
DLT_TARGETS="direct lizard-plain lizard-tls lizard-tls-h2 nginx-tls haproxy-tls"
declare -A DLT_SPEEDS DLT_BAD DLT_TICKS DLT_N DLT_MBUSY DLT_MALL DLT_MED DLT_CPU DLT_BUSY
DLT_PERF=""
# dlt_curl TARGET: the curl of one download; prints "code size speed"
dlt_curl() {
    local tls=(--cacert "$WORK/cert.pem" --http1.1)
    case $1 in
    direct) curl -s --max-time 900 -o /dev/null -w '%{http_code} %{size_download} %{speed_download}' -H "Host: $HOST_PUBLIC" \
        "http://127.0.0.1:$P_ORIGIN/huge" ;;
    lizard-plain) curl -s --max-time 900 -o /dev/null -w '%{http_code} %{size_download} %{speed_download}' -H "Host: $HOST_PUBLIC" \
        "http://127.0.0.1:$P_LZ/huge" ;;
    lizard-tls | lizard-tls-h2 | nginx-tls | haproxy-tls)
        local port path=/huge
        case $1 in
        lizard-tls) port=$P_LZ_TLS ;;
        lizard-tls-h2) port=$P_LZ_TLS tls=(--cacert "$WORK/cert.pem" --http2) ;;
        nginx-tls) port=$P_NGX_TLS path=/huge-nobuf ;;
        haproxy-tls) port=$P_HA_TLS ;;
        esac
        curl -s --max-time 900 -o /dev/null -w '%{http_code} %{size_download} %{speed_download}' "${tls[@]}" \
            --resolve "$HOST_PUBLIC:$port:127.0.0.1" "https://$HOST_PUBLIC:$port$path"
        ;;
    esac
}
bench_dltls() {
    local r t pids t0 t1 m0 m1 s0 s1 out code got speed bytes
    bytes=$(stat -c %s "$WORK/www/huge")
    timeout 900 curl -s -o /dev/null "http://127.0.0.1:$P_ORIGIN/huge" || true # page cache
    for r in $(seq "$DL_ROUNDS"); do
        for t in $DLT_TARGETS; do
            case $t in
            direct) pids=$ORIGIN_PIDS ;;
            lizard*) pids=$LZ_PID ;;
            nginx*) pids=$NGX_PIDS ;;
            haproxy*) pids=$HA_PID ;;
            esac
            note "download over TLS/plain $(mb "$bytes") MiB: $t, round $r of $DL_ROUNDS"
            # shellcheck disable=SC2086
            t0=$(cpu_ticks $pids)
            read -r m0 s0 < <(machine_jiffies)
            out=$(dlt_curl "$t") || true
            read -r m1 s1 < <(machine_jiffies)
            # shellcheck disable=SC2086
            t1=$(cpu_ticks $pids)
            read -r code got speed <<<"$out"
            printf '%s: %s, %s bytes, %s MiB/s\n' "$t" "${code:-?}" "${got:-0}" "$(mb "${speed:-0}")" >&2
            if [ "${code:-}" = 200 ] && [ "${got:-0}" = "$bytes" ]; then
                DLT_SPEEDS[$t]="${DLT_SPEEDS[$t]:-} ${speed%.*}"
                DLT_TICKS[$t]=$((${DLT_TICKS[$t]:-0} + t1 - t0))
                DLT_MBUSY[$t]=$((${DLT_MBUSY[$t]:-0} + m1 - m0)) DLT_MALL[$t]=$((${DLT_MALL[$t]:-0} + s1 - s0))
                DLT_N[$t]=$((${DLT_N[$t]:-0} + 1))
            else
                DLT_BAD[$t]=$((${DLT_BAD[$t]:-0} + 1))
                echo "bench: $t: expected 200 and $bytes bytes, got '$out'" >&2
            fi
        done
    done
    for t in $DLT_TARGETS; do
        # shellcheck disable=SC2086
        DLT_MED[$t]=$(median ${DLT_SPEEDS[$t]:-})
        DLT_CPU[$t]=$(awk -v t="${DLT_TICKS[$t]:-0}" -v n="${DLT_N[$t]:-0}" -v b="$bytes" -v hz="$CLK_TCK" \
            'BEGIN { if (n > 0) printf "%.2f", t / hz / (n * b / 1073741824); else printf "-" }')
        DLT_BUSY[$t]=$(awk -v b="${DLT_MBUSY[$t]:-0}" -v a="${DLT_MALL[$t]:-0}" -v n="$(nproc)" \
            'BEGIN { if (a > 0) printf "%.2f", b / a * n; else printf "-" }')
    done
    DLT_BYTES=$bytes
    if [ "$PERF" = 1 ] && command -v perf >/dev/null 2>&1; then
        note "perf record lizard-gateway during a TLS download"
        (dlt_curl lizard-tls >/dev/null || true) &
        local cp=$!
        timeout 900 perf record -q -F 999 -g -p "$LZ_PID" -o "$WORK/perf-dltls.data" -- sleep 100000 >/dev/null 2>&1 &
        local pp=$!
        wait "$cp" || true
        kill -INT "$pp" 2>/dev/null || true
        wait "$pp" 2>/dev/null || true
        DLT_PERF=$(
            echo '```'
            echo "perf report --no-children --sort dso"
            perf report -i "$WORK/perf-dltls.data" --stdio --no-children -g none --sort dso 2>/dev/null | grep -v '^#' | grep '%' | head -8
            echo
            echo "perf report --no-children --sort dso,sym (top 25)"
            perf report -i "$WORK/perf-dltls.data" --stdio --no-children -g none --sort dso,sym 2>/dev/null | grep -v '^#' | grep '%' | head -25
            echo
            # glibc's memcpy and memmove are one function here (__memmove_*_unaligned_erms): who calls it
            msym=$(perf report -i "$WORK/perf-dltls.data" --stdio --no-children -g none --sort sym 2>/dev/null |
                awk '/memmove|memcpy/ {print $NF; exit}')
            echo "perf report --no-children -g caller --symbols=$msym (who copies)"
            [ -n "$msym" ] && perf report -i "$WORK/perf-dltls.data" --stdio --no-children --sort sym \
                -g caller,0.5,callee,function,percent --symbols="$msym" 2>/dev/null | grep -v '^#' | sed '/^ *$/d' | head -30
            echo '```'
        )
    fi
}
report_dltls() {
    local t label
    echo
    echo "## 6b. download over TLS and over the trusted plain listener: $(mb "$DLT_BYTES") MiB, curl -o /dev/null, median of $DL_ROUNDS rounds"
    echo
    echo "| target | MiB/s | vs direct | vs nginx TLS | proxy CPU s / GiB | machine CPUs busy (of $(nproc)) | complete downloads |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for t in $DLT_TARGETS; do
        case $t in
        direct) label="origin direct (plain, sendfile; CPU: origin)" ;;
        lizard-plain) label="lizard, trusted plain listener" ;;
        lizard-tls) label="lizard, TLS 1.3, HTTP/1.1" ;;
        lizard-tls-h2) label="lizard, TLS 1.3, HTTP/2" ;;
        nginx-tls) label="nginx, TLS 1.3, HTTP/1.1 (proxy_buffering off)" ;;
        haproxy-tls) label="HAProxy, TLS 1.3, HTTP/1.1" ;;
        esac
        printf '| %s | %s | %s | %s | %s | %s | %s / %s |\n' "$label" "$(mb "${DLT_MED[$t]}")" \
            "$(ratio "${DLT_MED[$t]}" "${DLT_MED[direct]}")" "$(ratio "${DLT_MED[$t]}" "${DLT_MED[nginx-tls]}")" \
            "${DLT_CPU[$t]}" "${DLT_BUSY[$t]}" "${DLT_N[$t]:-0}" "$DL_ROUNDS"
    done
    echo
    echo "Targets: lizard over TLS >= 0.65x direct ($(ratio "${DLT_MED[lizard-tls]}" "${DLT_MED[direct]}")x), on the trusted plain"
    echo "listener >= 0.9x direct ($(ratio "${DLT_MED[lizard-plain]}" "${DLT_MED[direct]}")x). Direct is plain HTTP with the"
    echo "origin's sendfile (no TLS): the TLS rows carry the encryption (AES-GCM) on the same CPUs as curl's"
    echo "decryption. A download counts only when it answered 200 with exactly $DLT_BYTES bytes."
    if [ -n "$DLT_PERF" ]; then
        echo
        echo "perf of lizard-gateway during one more TLS 1.3 HTTP/1.1 download (frame-pointer build):"
        echo
        echo "$DLT_PERF"
    fi
}

# --- wss: idle wss:// tunnels (measured by section 5's code, reported here) -------------
report_wss() {
    local t
    echo
    echo "## 5c. idle wss:// tunnels: $WS_TUNNELS per proxy, TLS 1.3 at the proxy, held open"
    echo
    echo "| proxy | tunnels open | failed | dropped while held | at origin | RSS before MiB | RSS open MiB | KiB / tunnel | vs HAProxy | kernel TCP buffers KiB / tunnel | kernel slab KiB / tunnel | RSS after close MiB | RSS open again MiB | open s |"
    echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for t in lizard-tls nginx-tls haproxy-tls; do
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s |\n' "${t%-tls}" "${WS_OK[$t]}" \
            "${WS_FAIL[$t]}" "${WS_DROP[$t]}" "${WS_AT_ORIGIN[$t]}" "$(mb $((WS_RSS0[$t] * 1024)))" \
            "$(mb $((WS_RSS1[$t] * 1024)))" "${WS_KIB[$t]}" "$(ratio "${WS_KIB[$t]}" "${WS_KIB[haproxy-tls]}")" \
            "${WS_SOCK[$t]}" "${WS_SLAB[$t]}" "$(mb $((WS_RSS2[$t] * 1024)))" "$(mb $((WS_RSS3[$t] * 1024)))" "${WS_OK2[$t]}" "${WS_SECS[$t]}"
    done
    echo
    echo "The instances, origin and client of section 5, each proxy's TLS listener (lizard: its TLS listener;"
    echo "nginx: listen ssl, TLSv1.2 TLSv1.3; HAProxy: bind ssl, alpn http/1.1) with the bench's P-256"
    echo "certificate; the client (python3 asyncio ssl, TLS 1.3, SNI, the certificate checked) opens the tunnels"
    echo "64 handshakes at a time and holds them idle. KiB / tunnel is the proxy's own RSS growth; the kernel's"
    echo "share (socket buffers, slab: the whole machine's) is in its own columns and not in it."
    echo "Target: lizard <= HAProxy per tunnel ($(ratio "${WS_KIB[lizard-tls]}" "${WS_KIB[haproxy-tls]}")x)."
}
