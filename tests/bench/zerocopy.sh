#!/usr/bin/env bash
# Zero-copy response bodies, measured side by side in one run (issue 41;
# docs/performance.md, "Zero-copy bodies: splice.c against pipe_sender"):
# the gateway's upstream/splice.c (sandbox socket -> pipe -> client socket,
# both halves splice(2), the second to a duplicate of the client descriptor)
# against the buffered path (upstream.splice false: read into the exchange's
# buffer, h2o writes it) and nginx as a peer (1 worker, proxy_buffering on as
# shipped, and off). PIPE=1 adds a third gateway started with
# LIZARD_SPLICE_CLIENT=pipe_sender, whose pipe -> client half is h2o master's
# pipe_sender (a pull sendvec that h2o splices to a plain socket and reads
# into a buffer for TLS): that switch exists only in the prototype commit
# of branch i42-pipe (docs/performance.md names it); on any other binary
# the script says the third gateway measured splice.c again.
#
# One nginx origin sends a sparse file of SIZE with sendfile; each round
# downloads it once through every target, in turn, with curl -o /dev/null:
#   h1     plain HTTP/1.1 (the gateways' trusted plain listener)
#   h1tls  HTTP/1.1 over TLS 1.3
#   h2tls  HTTP/2 over TLS 1.3
# (KINDS="h1 h1tls" picks some) and records MiB/s and the proxy's CPU
# (utime + stime, all threads; nginx: master and worker) per GiB. Every
# download must be 200 with exactly SIZE bytes. Then the medians, and the
# ratios of CPU per GiB to the buffered gateway (the figure that holds on a
# machine others load; MiB/s does not). Last, with SYSCALLS=1 (default), one
# download of 256 MiB through each gateway under strace -c -f: the system
# calls per MiB (strace slows that download: not timed).
#
#   [PIPE=1] tests/bench/zerocopy.sh BIN [ROUNDS [SIZE]]   (defaults: 5, 1G)
#
# Not a test and not part of tests/run; stops everything it started.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN [ROUNDS [SIZE]]" >&2; exit 2; }
BIN=$(realpath "$1") ROUNDS=${2:-5} SIZE=${3:-1G}
# shellcheck source=tests/bench/standalone.sh
source "$(dirname "$0")/standalone.sh" zerocopy
DOMAIN=zerocopy.test
read -r P_ORIGIN P_REDIS P_NGX P_NGX_TLS <<<"$(free_ports 4)"
test_certificate "$DOMAIN"
mkdir -p "$WORK/www"
truncate -s "$SIZE" "$WORK/www/huge"
BYTES=$(stat -c %s "$WORK/www/huge")
nginx_config "$WORK/origin" <<EOF
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$P_ORIGIN;
        location / { root $WORK/www; sendfile on; }
    }
EOF
start_nginx "$WORK/origin"
# the peer: one worker, as each gateway; /huge buffered as shipped (a 1 GiB
# body fills proxy_max_temp_file_size's 1 GiB temp file), /huge-nobuf streamed
nginx_config "$WORK/ngx" <<EOF
    upstream origin { server 127.0.0.1:$P_ORIGIN; keepalive 16; }
    server {
        listen 127.0.0.1:$P_NGX;
        listen 127.0.0.1:$P_NGX_TLS ssl http2;
        ssl_protocols TLSv1.3;
        ssl_certificate $WORK/cert.pem;
        ssl_certificate_key $WORK/key.pem;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        location = /huge { proxy_pass http://origin; }
        location = /huge-nobuf { proxy_pass http://origin/huge; proxy_buffering off; }
    }
EOF
start_nginx "$WORK/ngx"
NGX_PID=${PIDS[-1]}
redis-server --port "$P_REDIS" --bind 127.0.0.1 --save "" --appendonly no --protected-mode no --dir "$WORK" \
    --logfile "$WORK/redis.log" &
PIDS+=($!)
declare -A PLAIN TLS ADMIN GPID
GWS="splice buffered"
[ "${PIPE:-0}" = 1 ] && GWS="splice pipe buffered"
PIPE_T=
[ "${PIPE:-0}" = 1 ] && PIPE_T=pipe
for g in $GWS; do
    read -r "PLAIN[$g]" "TLS[$g]" "ADMIN[$g]" <<<"$(free_ports 3)"
    splice=true
    [ "$g" = buffered ] && splice=false
    cat >"$WORK/$g.json" <<EOF
{"listen": [{"address": "127.0.0.1:${TLS[$g]}", "tls": true},
            {"address": "127.0.0.1:${PLAIN[$g]}", "tls": false, "trusted": true}],
 "domains": ["$DOMAIN"],
 "tls": {"certificates": [{"cert": "$WORK/cert.pem", "key": "$WORK/key.pem"}]},
 "redis": {"address": "127.0.0.1:$P_REDIS", "prefix": "lizard:"},
 "auth": {"cookie_secrets_env": "LIZARD_COOKIE_SECRETS"},
 "upstream": {"allowed_networks": ["127.0.0.0/8"], "splice": $splice},
 "metering": {"spill_file": "$WORK/$g.spill"}, "admin": {"address": "127.0.0.1:${ADMIN[$g]}"},
 "log": {"access": null}, "instance_id": "$g", "workers": 1}
EOF
done
sleep 0.5
redis-cli -h 127.0.0.1 -p "$P_REDIS" HSET 'lizard:sbx:{zc1}' state running addr 127.0.0.1 lifecycle lc-zc1 \
    project zc token_sha256 "$(printf zc | sha256sum | cut -d' ' -f1)" "port:$P_ORIGIN" public >/dev/null
export LIZARD_COOKIE_SECRETS=zc-cookie-secret-0123456789abcdef0123456789abcdef
for g in $GWS; do
    if [ "$g" = pipe ]; then
        LIZARD_SPLICE_CLIENT=pipe_sender "$BIN" -c "$WORK/$g.json" >"$WORK/$g.log" 2>&1 &
    else
        env -u LIZARD_SPLICE_CLIENT "$BIN" -c "$WORK/$g.json" >"$WORK/$g.log" 2>&1 &
    fi
    GPID[$g]=$!
    PIDS+=("${GPID[$g]}")
done
for g in $GWS; do
    for _ in $(seq 100); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${ADMIN[$g]}/readyz")" = 200 ] && break
        sleep 0.1
    done
done
# nginx's worker is the child of its master: both counted
ngx_pids() { echo "$NGX_PID $(pgrep -P "$NGX_PID" | tr '\n' ' ')"; }
HOST=$P_ORIGIN-zc1.$DOMAIN
HZ=$(getconf CLK_TCK)
ticks() { local p s=0; for p in "$@"; do s=$((s + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo "$s"; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n { print $2 }'; }
declare -A R
add() { R[$1]="${R[$1]:-} $2"; }
# dl KIND TARGET: one download, its MiB/s and CPU s per GiB recorded
dl() {
    local kind=$1 t=$2 url pids t0 t1 out code got speed opts=()
    case $t in
    nginx | nginx-nobuf)
        pids=$(ngx_pids)
        path=/huge
        [ "$t" = nginx-nobuf ] && path=/huge-nobuf
        port=$P_NGX
        [ "$kind" = h1 ] || port=$P_NGX_TLS
        ;;
    *)
        pids=${GPID[$t]} path=/huge port=${PLAIN[$t]}
        [ "$kind" = h1 ] || port=${TLS[$t]}
        ;;
    esac
    case $kind in
    h1) url=http://$HOST:$port$path opts=(--http1.1) ;;
    h1tls) url=https://$HOST:$port$path opts=(--http1.1 --tlsv1.3 --cacert "$WORK/cert.pem") ;;
    h2tls) url=https://$HOST:$port$path opts=(--http2 --tlsv1.3 --cacert "$WORK/cert.pem") ;;
    esac
    # shellcheck disable=SC2086
    t0=$(ticks $pids)
    out=$(timeout 900 curl -s -o /dev/null "${opts[@]}" --resolve "$HOST:$port:127.0.0.1" \
        -w '%{http_code} %{size_download} %{speed_download} %{http_version}' "$url") || true
    # shellcheck disable=SC2086
    t1=$(ticks $pids)
    read -r code got speed ver <<<"$out"
    if [ "${code:-}" != 200 ] || [ "${got:-0}" != "$BYTES" ]; then
        echo "zerocopy: $kind $t: expected 200 and $BYTES bytes, got '$out'" >&2
        exit 1
    fi
    [ "$kind" != h2tls ] || [ "$ver" = 2 ] || { echo "zerocopy: $kind $t: HTTP/$ver" >&2; exit 1; }
    add "rate_${kind}_$t" "$(awk -v s="$speed" 'BEGIN { printf "%.0f", s / 1048576 }')"
    add "cpu_${kind}_$t" "$(awk -v t=$((t1 - t0)) -v b="$BYTES" -v hz="$HZ" 'BEGIN { printf "%.3f", t / hz / (b / 1073741824) }')"
}
KINDS=${KINDS:-"h1 h1tls h2tls"}
targets() { # KIND
    case $1 in
    h1) echo "splice $PIPE_T buffered nginx nginx-nobuf" ;;
    # splice.c takes no TLS client: the splice gateway is the buffered one there
    h1tls) echo "$PIPE_T buffered nginx nginx-nobuf" ;;
    *) echo "buffered nginx nginx-nobuf" ;;
    esac
}
curl -s -o /dev/null "http://127.0.0.1:$P_ORIGIN/huge" # page cache
for r in $(seq "$ROUNDS"); do
    for kind in $KINDS; do
        for t in $(targets "$kind"); do
            dl "$kind" "$t"
        done
    done
    echo "round $r of $ROUNDS: load $(cut -d' ' -f1 /proc/loadavg)" >&2
done
if [ -n "$PIPE_T" ]; then
    # which pipe -> client half the pipe gateway measured: with the prototype its TLS downloads are spliced too
    PIPE_N=$(metric "${ADMIN[pipe]}" lizard_spliced_responses_total)
    PLAIN_N=0
    [[ " $KINDS " == *" h1 "* ]] && PLAIN_N=$ROUNDS
    if [ "${PIPE_N:-0}" -gt "$PLAIN_N" ]; then
        echo "pipe gateway: h2o's pipe_sender (the prototype: ${PIPE_N} spliced responses, TLS included)"
    else
        echo "pipe gateway: this binary has no pipe_sender prototype (${PIPE_N:-0} spliced responses): it measured splice.c again"
    fi
fi
printf '\n%-7s %-12s %10s %14s %16s\n' kind target 'MiB/s' 'CPU s / GiB' 'CPU vs buffered'
for kind in $KINDS; do
    base=$(median <<<"${R[cpu_${kind}_buffered]:-}")
    for t in $(targets "$kind"); do
        c=$(median <<<"${R[cpu_${kind}_$t]:-}")
        printf '%-7s %-12s %10s %14s %16s\n' "$kind" "$t" "$(median <<<"${R[rate_${kind}_$t]:-}")" "$c" \
            "$(awk -v a="$c" -v b="$base" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')"
    done
done
echo
for kind in $KINDS; do
    for t in $(targets "$kind"); do
        echo "rounds $kind $t: MiB/s${R[rate_${kind}_$t]:-} | CPU s/GiB${R[cpu_${kind}_$t]:-}"
    done
done
if [ "${SYSCALLS:-1}" = 1 ] && command -v strace >/dev/null; then
    echo
    echo "system calls per MiB (strace -c -f, one 256 MiB download each; the calls of the body's path):"
    truncate -s 256M "$WORK/www/small"
    for kind in h1 h1tls; do
        for t in $GWS; do
            [ "$kind" = h1tls ] && [ "$t" = splice ] && continue
            port=${PLAIN[$t]} scheme=http
            [ "$kind" = h1 ] || port=${TLS[$t]} scheme=https
            strace -c -f -q -o "$WORK/strace-$kind-$t.txt" -p "${GPID[$t]}" & # -f: every thread

            spid=$!
            sleep 1
            out=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' --http1.1 --cacert "$WORK/cert.pem" \
                --resolve "$HOST:$port:127.0.0.1" "$scheme://$HOST:$port/small") || true
            kill -INT "$spid"
            wait "$spid" 2>/dev/null || true
            [ "$out" = "200 268435456" ] || { echo "zerocopy: strace $kind $t: got '$out'" >&2; exit 1; }
            awk -v k="$kind" -v t="$t" '$NF ~ /^(splice|read|recvfrom|write|writev|sendmsg|epoll_wait|epoll_ctl|fcntl|getsockopt|setsockopt|pipe2|close|dup|ioctl)$/ {
                    s = s sprintf(" %s %.1f", $NF, $4 / 256); n += $4 # strace -c: calls in column 4
                } END { printf "  %-6s %-9s total %.1f:%s\n", k, t, n / 256, s }' "$WORK/strace-$kind-$t.txt"
        done
    done
fi
echo "rounds: $ROUNDS of $(awk -v b="$BYTES" 'BEGIN { printf "%.0f", b / 1048576 }') MiB; load average: $(cut -d' ' -f1-3 /proc/loadavg); kernel $(uname -r); $(nproc) CPUs"
