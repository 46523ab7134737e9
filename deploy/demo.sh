#!/usr/bin/env bash
# Runs lizard-gateway locally in front of a demo sandbox app, everything on
# 127.0.0.1, state and logs in .run/ at the repository root.
#
#   deploy/demo.sh          install missing packages, build build/, (re)start
#                           redis-server, the demo app and the gateway, print
#                           the preview URL and a curl command
#   deploy/demo.sh stop     stop everything the demo started
#   deploy/demo.sh pause    pause the demo sandbox: the next request wakes it
#                           (through deploy/resume-consumer.py, 2 s)
#   deploy/demo.sh status   show what is running
#   deploy/demo.sh share-link [TTL_S]
#                           print a share link to the demo app (lzs1, signed
#                           with the demo's link key; default 3600 s)
#   deploy/demo.sh public   expose the demo app as a public port of sandbox
#                           "pub" and print its URL: a browser sees the
#                           public-port warning page first
#   deploy/demo.sh hosts    print the /etc/hosts line for programs that use
#                           the system resolver (Node, Python)
#
# Two apps run in the demo sandbox: deploy/demo-app.py on port 3000 (Host as
# the browser sent it, `host:3000` absent) and a second one on port 5173 with
# `host:5173 localhost`, as a Vite dev server needs (it sees itself at
# http://localhost:5173; /api/whoami shows what it received).
#
# Your own settings survive restarts: .run/gateway.local.json (DEMO_LOCAL_CONFIG)
# is merged over the generated .run/gateway.json at every start (objects key by
# key, anything else replaced), e.g. {"upstream": {"idle_timeout_ms": 5000}}.
# The cookie secret (.run/cookie-secrets) and the share-link key
# (.run/link-keys) are made once and kept, and so is the sandbox's token
# (.run/token), so the preview URL, browser sessions and links survive a
# restart (delete .run/token for a new one).
#
# Ports: gateway TLS 127.0.0.1:8443, plain 127.0.0.1:8080 (redirects to
# https), admin 127.0.0.1:9901, demo app 127.0.0.1:3000, Redis 127.0.0.1:6390
# (or a free port when 6390 is taken). The preview domain is lizard.localhost:
# hostnames are <port>-<id>.lizard.localhost, which curl and browsers resolve
# to loopback by themselves, and the demo's certificate is a wildcard for
# *.lizard.localhost (browsers refuse a wildcard right under "localhost",
# which would cover only the one name listed beside it).
#
# For tests, the environment may move things: DEMO_RUN (state directory,
# default .run), DEMO_TLS_PORT, DEMO_PLAIN_PORT, DEMO_ADMIN_PORT,
# DEMO_APP_PORT, DEMO_APP2_PORT, DEMO_REDIS_PORT, DEMO_GATEWAY (an already built binary: no
# build), DEMO_NO_INSTALL=1 (install nothing).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
RUN=${DEMO_RUN:-$ROOT/.run}
BUILD_DIR=${BUILD_DIR:-build}
GATEWAY=${DEMO_GATEWAY:-$ROOT/$BUILD_DIR/gateway/lizard-gateway}
PYTHON=/usr/bin/python3

TLS_PORT=${DEMO_TLS_PORT:-8443}
PLAIN_PORT=${DEMO_PLAIN_PORT:-8080}
ADMIN_PORT=${DEMO_ADMIN_PORT:-9901}
APP_PORT=${DEMO_APP_PORT:-3000}
APP2_PORT=${DEMO_APP2_PORT:-5173}
LOCAL_CONFIG=${DEMO_LOCAL_CONFIG:-$RUN/gateway.local.json}
SANDBOX=demo
DOMAIN=lizard.localhost

log() { printf 'demo: %s\n' "$*" >&2; }
die() {
    printf 'demo: error: %s\n' "$*" >&2
    exit 1
}

# pid_alive NAME: the pid in .run/NAME.pid is running and is the program we
# started (its command line contains the pattern saved next to it).
pid_alive() {
    local f=$RUN/$1.pid pid
    [ -f "$f" ] || return 1
    pid=$(cat "$f" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    grep -qa -- "$2" "/proc/$pid/cmdline" 2>/dev/null
}

# running PID: the process exists and has not exited. A zombie has (only its parent's wait is missing), and the
# demo's processes are orphans: where PID 1 reaps late or never (a container without an init), kill -0 still finds
# them, and each stop waited 2 s (10 s for the demo) or all of its 10 s.
running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

# stop_one NAME PATTERN: SIGTERM, wait up to 10 s, then SIGKILL.
stop_one() {
    local name=$1 pattern=$2 pid i
    if pid_alive "$name" "$pattern"; then
        pid=$(cat "$RUN/$name.pid")
        log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 1 100); do
            running "$pid" || break
            sleep 0.1
        done
        if running "$pid"; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$RUN/$name.pid"
}

stop_all() {
    stop_one consumer resume-consumer.py
    stop_one gateway lizard-gateway
    stop_one app demo-app.py
    stop_one app2 demo-app.py
    stop_one redis redis-server
}

port_in_use() {
    "$PYTHON" - "$1" <<'EOF'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not "in use"
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
sys.exit(1)
EOF
}

free_port() {
    "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_until() { # wait_until SECONDS COMMAND...
    local t=$1 i
    shift
    for i in $(seq 1 $((t * 10))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    return 1
}

status() {
    local n
    for n in redis:redis-server app:demo-app.py app2:demo-app.py gateway:lizard-gateway consumer:resume-consumer.py; do
        if pid_alive "${n%%:*}" "${n#*:}"; then
            echo "${n%%:*}: running (pid $(cat "$RUN/${n%%:*}.pid"))"
        else
            echo "${n%%:*}: not running"
        fi
    done
}

case "${1:-start}" in
stop)
    stop_all
    exit 0
    ;;
pause)
    # what the control plane does to an idle sandbox: the next request wakes it (resume: auto)
    [ -s "$RUN/redis.port" ] || die "the demo is not running (deploy/demo.sh start)"
    REDIS_PORT=$(cat "$RUN/redis.port")
    redis-cli -p "$REDIS_PORT" HSET "lizard:sbx:{$SANDBOX}" state paused >/dev/null
    redis-cli -p "$REDIS_PORT" PUBLISH lizard:routes "$SANDBOX" >/dev/null
    log "sandbox $SANDBOX is paused; open the preview URL (or curl it) to wake it"
    exit 0
    ;;
status)
    status
    exit 0
    ;;
share-link)
    # sign-link reads the sandbox's current link_epoch from the demo's Redis
    pid_alive gateway lizard-gateway || die "the demo is not running (deploy/demo.sh start)"
    P=$(cat "$RUN/app.port")
    LINK=$("$GATEWAY" sign-link -c "$RUN/gateway.json" --sandbox "$SANDBOX" --port "$P" --ttl "${2:-3600}") ||
        die "sign-link failed"
    printf '%s\n' "$LINK" | head -n 1
    log "anyone with this link opens port $P of sandbox $SANDBOX until it expires; to revoke every link:"
    log "  redis-cli -p $(cat "$RUN/redis.port") HINCRBY 'lizard:sbx:{$SANDBOX}' link_epoch 1; redis-cli -p $(cat "$RUN/redis.port") PUBLISH lizard:routes $SANDBOX"
    exit 0
    ;;
public | warning-page)
    pid_alive gateway lizard-gateway || die "the demo is not running (deploy/demo.sh start)"
    REDIS_PORT=$(cat "$RUN/redis.port")
    P=$(cat "$RUN/app.port")
    redis-cli -p "$REDIS_PORT" HSET "lizard:sbx:{pub}" state running addr 127.0.0.1 lifecycle pub-1 project demo \
        token_sha256 "$(openssl rand -hex 32)" "port:$P" public >/dev/null
    redis-cli -p "$REDIS_PORT" PUBLISH lizard:routes pub >/dev/null
    echo "https://$P-pub.$DOMAIN:$(cat "$RUN/tls.port")/"
    log "a public port (no token): a browser sees the gateway's warning page first (auth.public_warning); programs do not"
    exit 0
    ;;
hosts)
    [ -s "$RUN/hosts" ] || die "the demo is not running (deploy/demo.sh start)"
    cat "$RUN/hosts"
    exit 0
    ;;
start | restart) ;;
*) die "usage: deploy/demo.sh [start|stop|status|pause|share-link [TTL_S]|public|hosts]" ;;
esac

# --- packages and build --------------------------------------------------------
# shellcheck source=tests/lib/deps.sh
source "$ROOT/tests/lib/deps.sh"
if [ "${DEMO_NO_INSTALL:-}" != 1 ]; then
    gw_deps_install "${GW_DEB_BUILD_PACKAGES[@]}" check redis-server redis-tools curl openssl python3
fi

if [ -z "${DEMO_GATEWAY:-}" ]; then
    if [ ! -f "$BUILD_DIR/build.ninja" ]; then
        log "configuring $BUILD_DIR"
        meson setup "$BUILD_DIR" -Dbuildtype=debugoptimized >/dev/null
    fi
    log "building $BUILD_DIR"
    ninja -C "$BUILD_DIR" gateway/lizard-gateway >/dev/null || die "the build failed: run ninja -C $BUILD_DIR"
fi
[ -x "$GATEWAY" ] || die "$GATEWAY was not built"

# --- clean restart -------------------------------------------------------------
mkdir -p "$RUN"
chmod 700 "$RUN"
stop_all

for p in $TLS_PORT $PLAIN_PORT $ADMIN_PORT $APP_PORT $APP2_PORT; do
    if port_in_use "$p"; then
        die "127.0.0.1:$p is in use by another program (ss -ltnp 'sport = :$p' shows which)"
    fi
done

REDIS_PORT=${DEMO_REDIS_PORT:-6390}
if port_in_use "$REDIS_PORT"; then
    REDIS_PORT=$(free_port)
fi

# --- certificates: a local CA and a leaf for *.lizard.localhost ---------------------
# (made again when missing, expiring, or from an older demo that used *.localhost)
if [ ! -s "$RUN/ca.pem" ] || [ ! -s "$RUN/cert.pem" ] || [ ! -s "$RUN/key.pem" ] ||
    ! openssl x509 -checkend 86400 -noout -in "$RUN/cert.pem" >/dev/null 2>&1 ||
    ! openssl x509 -noout -checkhost "any-name.$DOMAIN" -in "$RUN/cert.pem" 2>/dev/null | grep -q 'does match'; then
    log "making a local CA and a certificate for *.$DOMAIN in $RUN/"
    (
        cd "$RUN"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
            -days 825 -subj "/CN=lizard-gateway demo CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout key.pem -out leaf.csr \
            -subj "/CN=*.$DOMAIN" 2>/dev/null
        # two labels under localhost: every <port>-<id>.lizard.localhost matches
        printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
            "extendedKeyUsage=serverAuth" "subjectAltName=DNS:*.$DOMAIN,DNS:$DOMAIN" >leaf.ext
        openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out leaf.pem -days 365 \
            -extfile leaf.ext 2>/dev/null
        cat leaf.pem ca.pem >cert.pem
        rm -f leaf.csr leaf.ext
        chmod 600 ca.key key.pem
    )
fi

# --- redis ---------------------------------------------------------------------------
log "starting redis-server on 127.0.0.1:$REDIS_PORT"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$RUN" \
    --daemonize yes --pidfile "$RUN/redis.pid" --logfile "$RUN/redis.log"
wait_until 10 redis-cli -p "$REDIS_PORT" ping || die "redis-server did not start (see .run/redis.log)"
wait_until 5 test -s "$RUN/redis.pid" || true
echo "$REDIS_PORT" >"$RUN/redis.port"

# --- the demo sandbox app ---------------------------------------------------------------
log "starting the demo app on 127.0.0.1:$APP_PORT"
nohup "$PYTHON" "$ROOT/deploy/demo-app.py" --host 127.0.0.1 --port "$APP_PORT" >"$RUN/app.log" 2>&1 </dev/null &
echo $! >"$RUN/app.pid"
wait_until 10 curl -sf --noproxy '*' "http://127.0.0.1:$APP_PORT/api/time" || die "the demo app did not start (see .run/app.log)"
log "starting the second app (host:$APP2_PORT localhost) on 127.0.0.1:$APP2_PORT"
nohup "$PYTHON" "$ROOT/deploy/demo-app.py" --host 127.0.0.1 --port "$APP2_PORT" >"$RUN/app2.log" 2>&1 </dev/null &
echo $! >"$RUN/app2.pid"
wait_until 10 curl -sf --noproxy '*' "http://127.0.0.1:$APP2_PORT/api/time" || die "the second app did not start (see .run/app2.log)"

# --- the gateway ---------------------------------------------------------------------------
# secrets made once and kept: browser sessions (the cookie) and share links survive restarts
if [ ! -s "$RUN/cookie-secrets" ]; then
    (umask 077 && openssl rand -hex 32 >"$RUN/cookie-secrets")
fi
if [ ! -s "$RUN/link-keys" ]; then
    (umask 077 && printf 'demo1:%s\n' "$(openssl rand -hex 32)" >"$RUN/link-keys")
fi
chmod 600 "$RUN/cookie-secrets" "$RUN/link-keys"

cat >"$RUN/gateway.generated.json" <<EOF
{
  "listen": [
    {"address": "127.0.0.1:$TLS_PORT", "tls": true},
    {"address": "127.0.0.1:$PLAIN_PORT", "tls": false}
  ],
  "domains": ["$DOMAIN"],
  "tls": {"certificates": [{"cert": "$RUN/cert.pem", "key": "$RUN/key.pem"}]},
  "redis": {"address": "127.0.0.1:$REDIS_PORT", "prefix": "lizard:"},
  "auth": {"cookie_secrets_file": "$RUN/cookie-secrets", "cookie_ttl_s": 86400, "cookie_same_site": "lax",
           "link_keys_file": "$RUN/link-keys", "public_warning": true},
  "upstream": {"allowed_networks": ["127.0.0.0/8"]},
  "metering": {"flush_interval_ms": 5000, "spill_file": "$RUN/egress.spill"},
  "admin": {"address": "127.0.0.1:$ADMIN_PORT"},
  "log": {"access": "$RUN/access.log"},
  "workers": 2
}
EOF
# the newcomer's own settings, merged over the generated ones (never overwritten)
if [ -f "$LOCAL_CONFIG" ]; then
    log "merging $LOCAL_CONFIG over the generated config"
fi
"$PYTHON" - "$RUN/gateway.generated.json" "$LOCAL_CONFIG" "$RUN/gateway.json" <<'PY' || die "$LOCAL_CONFIG is not valid JSON"
import json, os, sys
def merge(base, over):
    for k, v in over.items():
        base[k] = merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return base
cfg = json.load(open(sys.argv[1]))
if os.path.exists(sys.argv[2]):
    cfg = merge(cfg, json.load(open(sys.argv[2])))
with open(sys.argv[3], "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
PY

"$GATEWAY" -c "$RUN/gateway.json" --check >/dev/null || die "the gateway rejected $RUN/gateway.json (is $LOCAL_CONFIG right?)"

# --- register the sandbox as the control plane would ------------------------------------------
# the same token as last time (the preview URL and browser sessions survive a restart)
if [ -s "$RUN/token" ]; then
    TOKEN=$(cat "$RUN/token")
else
    TOKEN=$(openssl rand -hex 16)
fi
TOKEN_SHA=$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)
KEY="lizard:sbx:{$SANDBOX}"
rcli() { redis-cli -p "$REDIS_PORT" "$@" >/dev/null; }
rcli DEL "$KEY"
rcli HSET "$KEY" state running addr 127.0.0.1 lifecycle "demo-$(openssl rand -hex 4)" project demo \
    token_sha256 "$TOKEN_SHA" "port:$APP_PORT" private "port:$APP2_PORT" private "host:$APP2_PORT" localhost resume auto
rcli PUBLISH lizard:routes "$SANDBOX"
printf '%s\n' "$TOKEN" >"$RUN/token"
chmod 600 "$RUN/token"

log "starting lizard-gateway (log: .run/gateway.log)"
nohup "$GATEWAY" -c "$RUN/gateway.json" >"$RUN/gateway.log" 2>&1 </dev/null &
echo $! >"$RUN/gateway.pid"
if ! wait_until 15 curl -sf --noproxy '*' "http://127.0.0.1:$ADMIN_PORT/healthz"; then
    tail -n 20 "$RUN/gateway.log" >&2 || true
    die "the gateway did not become healthy (see .run/gateway.log)"
fi

# --- the control plane's side of waking paused sandboxes (docs/wake.md, "Waking paused sandboxes") ----
log "starting the example resume consumer (log: .run/consumer.log)"
nohup "$PYTHON" "$ROOT/deploy/resume-consumer.py" --redis "127.0.0.1:$REDIS_PORT" --delay 2 \
    >"$RUN/consumer.out" 2>"$RUN/consumer.log" </dev/null &
echo $! >"$RUN/consumer.pid"
wait_until 10 grep -q ready "$RUN/consumer.out" || die "the resume consumer did not start (see .run/consumer.log)"

HOST="$APP_PORT-$SANDBOX.$DOMAIN"
HOST2="$APP2_PORT-$SANDBOX.$DOMAIN"
echo "$APP_PORT" >"$RUN/app.port"
echo "$TLS_PORT" >"$RUN/tls.port"
echo "127.0.0.1 $HOST $HOST2 $APP_PORT-pub.$DOMAIN" >"$RUN/hosts"
CHECK=$(curl -s --noproxy '*' --cacert "$RUN/ca.pem" -H "X-Lizard-Access-Token: $TOKEN" -o /dev/null \
    -w '%{http_code}' "https://$HOST:$TLS_PORT/" || true)
if [ "$CHECK" != "200" ]; then
    log "warning: a request through the gateway answered $CHECK, not 200 (see .run/gateway.log)"
fi

cat <<EOF

lizard-gateway demo is running (state and logs in $RUN/).

  Preview URL (browser; trust $RUN/ca.pem or accept the warning):
    https://$HOST:$TLS_PORT/?lizard_token=$TOKEN

  With curl:
    curl --cacert $RUN/ca.pem -H 'X-Lizard-Access-Token: $TOKEN' https://$HOST:$TLS_PORT/

  A second app, on port $APP2_PORT with host:$APP2_PORT localhost (what Vite needs):
    https://$HOST2:$TLS_PORT/?lizard_token=$TOKEN
    curl --cacert $RUN/ca.pem -H 'X-Lizard-Access-Token: $TOKEN' https://$HOST2:$TLS_PORT/api/whoami

  A share link (no access token handed out):   deploy/demo.sh share-link [TTL_S]
  A public port and its warning page:          deploy/demo.sh public

  Node, Python and other programs that use the system resolver do not know
  *.localhost names; add this line to /etc/hosts (deploy/demo.sh hosts):
    $(cat "$RUN/hosts")
  or resolve per call: curl --resolve $HOST:$TLS_PORT:127.0.0.1 ...

  Without the token (401 missing_token):
    curl --cacert $RUN/ca.pem https://$HOST:$TLS_PORT/

  Wake on request: pause the sandbox, then open the preview URL again; the
  page loads after the example control plane's 2 s "restore"
  (deploy/resume-consumer.py, log in $RUN/consumer.log):
    deploy/demo.sh pause

  Your settings: $LOCAL_CONFIG (merged over the generated config at every start)
  Health:  curl http://127.0.0.1:$ADMIN_PORT/healthz
  Redis:   redis-cli -p $REDIS_PORT HGETALL 'lizard:sbx:{$SANDBOX}'
  Stop:    deploy/demo.sh stop
EOF
