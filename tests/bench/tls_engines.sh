#!/usr/bin/env bash
# TLS 1.3 by picotls (h2o master's own TLS stack, the gateway's default:
# tls/ptls.c) against OpenSSL (LIZARD_TLS13_ENGINE=openssl), side by side in
# one run (issue 41; docs/tls.md, "TLS 1.3: picotls"). One gateway binary, two instances (1 worker each, the same
# certificate: ECDSA P-256, as tests/bench/run), one nginx origin (1 KiB from
# memory at /, a sparse file sent with sendfile at /huge), measured in
# alternated rounds, openssl then picotls, each round:
#   hs   full TLS 1.3 handshakes: two `openssl s_time -new -tls1_3` (no
#        session resumed, no request) for DURATION s; handshakes/s and the
#        gateway's CPU µs per handshake (utime+stime, all threads)
#   h2   TLS 1.3 + HTTP/2 keep-alive: h2load -c16 -m16 -D DURATION on 1 KiB;
#        req/s and CPU µs per request
#   h1   TLS 1.3 + HTTP/1.1 keep-alive: h2load --h1 -c16 -m1 -D DURATION; same
#        (limits.max_requests_per_connection 0: no reconnection, no handshake in it)
#   dl   one download of SIZE over TLS 1.3 HTTP/1.1 (curl); MiB/s and CPU s per GiB
# then the medians. kTLS: this script reports what the gateways' /readyz say;
# an on/off pair needs a kernel with CONFIG_TLS and a path that writes with
# h2o_socket_sendvec (docs/tls.md).
#
#   tests/bench/tls_engines.sh BIN [ROUNDS [DURATION [SIZE]]]   (defaults: 3, 5, 1G)
#
# Not a test and not part of tests/run; stops everything it started.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN [ROUNDS [DURATION [SIZE]]]" >&2; exit 2; }
BIN=$(realpath "$1") ROUNDS=${2:-3} DURATION=${3:-5} SIZE=${4:-1G}
# shellcheck source=tests/bench/standalone.sh
source "$(dirname "$0")/standalone.sh" tls-engines
DOMAIN=engines.test
read -r P_ORIGIN P_REDIS PO PO_ADM PP PP_ADM < <(free_ports 6)
test_certificate "$DOMAIN"
mkdir -p "$WORK/www"
truncate -s "$SIZE" "$WORK/www/huge"
nginx_config "$WORK/origin" <<EOF
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$P_ORIGIN;
        location = /huge { root $WORK/www; sendfile on; }
        location / { return 200 "$(head -c 1024 /dev/zero | tr '\0' x)"; }
    }
EOF
start_nginx "$WORK/origin"
redis-server --port "$P_REDIS" --bind 127.0.0.1 --save "" --appendonly no --protected-mode no --dir "$WORK" \
    --logfile "$WORK/redis.log" &
PIDS+=($!)
gw_config() { # NAME TLS_PORT ADMIN_PORT
    cat >"$WORK/$1.json" <<EOF
{"listen": [{"address": "127.0.0.1:$2", "tls": true}], "domains": ["$DOMAIN"],
 "tls": {"certificates": [{"cert": "$WORK/cert.pem", "key": "$WORK/key.pem"}]},
 "redis": {"address": "127.0.0.1:$P_REDIS", "prefix": "lizard:"},
 "auth": {"cookie_secrets_env": "LIZARD_COOKIE_SECRETS"}, "upstream": {"allowed_networks": ["127.0.0.0/8"]},
 "metering": {"spill_file": "$WORK/$1.spill"}, "admin": {"address": "127.0.0.1:$3"},
 "limits": {"max_requests_per_connection": 0},
 "log": {"access": null}, "instance_id": "$1", "workers": 1}
EOF
}
gw_config openssl "$PO" "$PO_ADM"
gw_config picotls "$PP" "$PP_ADM"
sleep 0.5
redis-cli -h 127.0.0.1 -p "$P_REDIS" HSET 'lizard:sbx:{en1}' state running addr 127.0.0.1 lifecycle lc-en1 \
    project en token_sha256 "$(printf en | sha256sum | cut -d' ' -f1)" "port:$P_ORIGIN" public >/dev/null
export LIZARD_COOKIE_SECRETS=en-cookie-secret-0123456789abcdef0123456789abcdef
LIZARD_TLS13_ENGINE=openssl "$BIN" -c "$WORK/openssl.json" >"$WORK/openssl.log" 2>&1 &
PID_O=$!
PIDS+=("$PID_O")
env -u LIZARD_TLS13_ENGINE "$BIN" -c "$WORK/picotls.json" >"$WORK/picotls.log" 2>&1 &
PID_P=$!
PIDS+=("$PID_P")
HOST=$P_ORIGIN-en1.$DOMAIN
for adm in "$PO_ADM" "$PP_ADM"; do
    for _ in $(seq 100); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$adm/readyz")" = 200 ] && break
        sleep 0.1
    done
    echo "readyz :$adm $(curl -s "http://127.0.0.1:$adm/readyz" | tr -d '\n')"
done
HZ=$(getconf CLK_TCK)
BYTES=$(stat -c %s "$WORK/www/huge")
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# which engine answers: picotls sends one session ticket after a handshake, OpenSSL two
for port in "$PO" "$PP"; do
    echo "port $port: $(sleep 0.5 | openssl s_client -connect "127.0.0.1:$port" -tls1_3 -msg 2>&1 | grep -c 'NewSessionTicket') session tickets"
    curl -s -o /dev/null -w "check :$port %{http_code} %{http_version}\n" --cacert "$WORK/cert.pem" --tlsv1.3 --http2 \
        --resolve "$HOST:$port:127.0.0.1" "https://$HOST:$port/"
done
declare -A R
add() { R[$1]="${R[$1]:-} $2"; }
hs() { # NAME PORT PID
    local n=0 c i t0 t1 w0 w1 spids=()
    t0=$(ticks "$3") w0=$(date +%s.%N)
    for i in 1 2; do
        timeout $((DURATION + 30)) openssl s_time -connect "127.0.0.1:$2" -new -tls1_3 -time "$DURATION" \
            >"$WORK/stime-$1-$i.txt" 2>&1 &
        spids+=($!)
    done
    wait "${spids[@]}" || true
    w1=$(date +%s.%N) t1=$(ticks "$3")
    for i in 1 2; do
        c=$(awk '/connections in .* real seconds/ {print $1; exit}' "$WORK/stime-$1-$i.txt")
        n=$((n + ${c:-0}))
    done
    add "hs_rate_$1" "$(awk -v n="$n" -v a="$w0" -v b="$w1" 'BEGIN { printf "%.0f", n / (b - a) }')"
    add "hs_cpu_$1" "$(awk -v t=$((t1 - t0)) -v n="$n" -v hz="$HZ" 'BEGIN { printf "%.1f", n ? t * 1e6 / hz / n : 0 }')"
}
keepalive() { # KIND(h1|h2) NAME PORT PID
    local t0 t1 out n rps extra=(-m16)
    [ "$1" = h1 ] && extra=(--h1 -m1) # no pipelining, as browsers
    t0=$(ticks "$4")
    out=$(timeout $((DURATION + 30)) h2load "${extra[@]}" -c16 -D "$DURATION" --tls13-ciphers=TLS_AES_128_GCM_SHA256 \
        -H ":authority: $HOST" "https://127.0.0.1:$3/" 2>&1) || true
    t1=$(ticks "$4")
    grep -q 'TLSv1.3' <<<"$out" || { echo "$2 $1: not TLS 1.3: $out" >&2; exit 1; }
    n=$(awk '/^requests:/ { print $8 }' <<<"$out")
    rps=$(awk '/^finished in/ { gsub(",", "", $4); print $4 }' <<<"$out")
    add "$1_rate_$2" "${rps%.*}"
    add "$1_cpu_$2" "$(awk -v t=$((t1 - t0)) -v n="$n" -v hz="$HZ" 'BEGIN { printf "%.1f", n ? t * 1e6 / hz / n : 0 }')"
}
dl() { # NAME PORT PID
    local t0 t1 code got speed
    t0=$(ticks "$3")
    read -r code got speed < <(curl -s -o /dev/null -w '%{http_code} %{size_download} %{speed_download}\n' \
        --cacert "$WORK/cert.pem" --tlsv1.3 --http1.1 --resolve "$HOST:$2:127.0.0.1" "https://$HOST:$2/huge")
    t1=$(ticks "$3")
    [ "$code" = 200 ] && [ "$got" = "$BYTES" ] || { echo "$1: download got '$code $got'" >&2; exit 1; }
    add "dl_rate_$1" "$(awk -v s="$speed" 'BEGIN { printf "%.0f", s / 1048576 }')"
    add "dl_cpu_$1" "$(awk -v t=$((t1 - t0)) -v b="$BYTES" -v hz="$HZ" 'BEGIN { printf "%.3f", t / hz / (b / 1073741824) }')"
}
curl -s -o /dev/null "http://127.0.0.1:$P_ORIGIN/huge" # page cache
for r in $(seq "$ROUNDS"); do
    for side in openssl picotls; do
        pid=$PID_O port=$PO
        [ $side = picotls ] && pid=$PID_P port=$PP
        hs $side "$port" "$pid"
        keepalive h2 $side "$port" "$pid"
        keepalive h1 $side "$port" "$pid"
        dl $side "$port" "$pid"
        echo "round $r $side: load $(cut -d' ' -f1 /proc/loadavg)" >&2
    done
done
printf '%-34s %12s %12s %8s\n' measure openssl picotls ratio
row() { # LABEL KEY
    local a b
    a=$(median <<<"${R[$2_openssl]}") b=$(median <<<"${R[$2_picotls]}")
    printf '%-34s %12s %12s %8s\n' "$1" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a ? b / a : 0 }')"
}
row "full handshakes/s" hs_rate
row "CPU µs per handshake" hs_cpu
row "h2 keep-alive req/s" h2_rate
row "h2 CPU µs per request" h2_cpu
row "h1 keep-alive req/s" h1_rate
row "h1 CPU µs per request" h1_cpu
row "download MiB/s" dl_rate
row "download CPU s per GiB" dl_cpu
for k in hs_rate hs_cpu h2_rate h2_cpu h1_rate h1_cpu dl_rate dl_cpu; do
    echo "rounds $k: openssl${R[${k}_openssl]} | picotls${R[${k}_picotls]}"
done
echo "rounds: $ROUNDS, $DURATION s each; load average: $(cut -d' ' -f1-3 /proc/loadavg); kernel $(uname -r)"
