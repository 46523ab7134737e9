# shellcheck shell=bash
# The frame the standalone benchmarks share (tls_engines.sh, zerocopy.sh):
# sourced after `set -euo pipefail` with the run's name, it makes $WORK (kept
# with KEEP=1), stops every process in PIDS at exit, and gives free loopback
# ports, a test certificate for *.DOMAIN and medians.
#
#   source "$(dirname "$0")/standalone.sh" NAME
WORK=$(mktemp -d "/tmp/$1.XXXXXX")
PIDS=()
standalone_cleanup() {
    local p
    for p in ${PIDS[@]+"${PIDS[@]}"}; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.5
    for p in ${PIDS[@]+"${PIDS[@]}"}; do kill -KILL "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap standalone_cleanup EXIT
trap 'exit 130' INT TERM

# free_ports N: N loopback TCP ports free now, on one line
free_ports() {
    /usr/bin/python3 -c '
import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]))]
for x in s:
    x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])' "$1"
}

# test_certificate DOMAIN: $WORK/cert.pem and $WORK/key.pem, ECDSA P-256 for *.DOMAIN (as tests/bench/run)
test_certificate() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$WORK/key.pem" \
        -out "$WORK/cert.pem" -days 2 -subj "/CN=*.$1" -addext "subjectAltName=DNS:*.$1" >/dev/null 2>&1
}

# median of the numbers on stdin (space or newline separated); "-" for none
median() {
    tr ' ' '\n' | sed '/^$/d' | sort -g |
        awk '{ v[NR] = $1 } END { print NR ? ((NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) : "-" }'
}

# nginx_config DIR: DIR/nginx.conf for one nginx worker whose files (pid, log,
# temp paths) are all in DIR, no access log; the http block's own directives
# are read from stdin. Start it with start_nginx DIR.
nginx_config() {
    mkdir -p "$1"
    {
        printf '%s\n' 'user root root;' 'worker_processes 1;' 'daemon off;' "pid $1/nginx.pid;" \
            "error_log $1/error.log warn;" 'events { worker_connections 1024; }' 'http {' '    access_log off;' \
            "    client_body_temp_path $1/t1; proxy_temp_path $1/t2; fastcgi_temp_path $1/t3;" \
            "    uwsgi_temp_path $1/t4; scgi_temp_path $1/t5;"
        cat
        echo '}'
    } >"$1/nginx.conf"
}

# start_nginx DIR: the nginx of DIR/nginx.conf, in PIDS
start_nginx() {
    nginx -p "$1" -e "$1/error.log" -c "$1/nginx.conf" &
    PIDS+=($!)
}
