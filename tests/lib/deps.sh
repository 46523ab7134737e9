# Sourced by tests/run and deploy/demo.sh: installs the Debian packages the
# project needs to build, test and run, and nothing when all are present.
# apt-get update runs only when something is missing.

# What building the gateway needs. libh2o is not among them: meson builds
# the vendored h2o master (third_party/h2o-master) with the gateway, and with
# it h2o's own hiredis, so Debian's libhiredis-dev is not needed either. Keep
# Debian's libh2o-evloop-dev off the machine: its headers must never be the
# ones a build finds.
GW_DEB_BUILD_PACKAGES=(
    build-essential pkg-config meson ninja-build
    zlib1g-dev libjansson-dev libssl-dev
)

GW_DEB_PACKAGES=(
    "${GW_DEB_BUILD_PACKAGES[@]}" check
    cmake patch # re-pinning the vendored h2o (third_party/h2o-master/repin.sh: h2o's CMake lists its sources)
    redis-server redis-sentinel redis-tools curl nghttp2-client openssl
    python3-pytest python3-h2 python3-websockets python3-yaml python3-cryptography
    python3-grpcio # a real gRPC client: gRPC answers to gRPC requests (test_long_calls.py)
    clang libclang-rt-14-dev clang-format
    pebble certbot  # custom domains: a real ACME server and client (test_acme_pebble.py, deploy/lizard-issuer.py)
    openssh-server openssh-client # sshd and ssh through tcp-forward (test_tcp_forward.py)
    haproxy # a real L4 balancer sending the PROXY protocol (test_proxy_protocol_haproxy.py)
    python3-openssl # pyOpenSSL: a client that renegotiates TLS 1.2 (test_tls_renegotiation.py)
    # desktops (test_desktop.py, test_desktop_browser.py): Debian's noVNC (the viewer the gateway serves), TigerVNC's
    # Xvnc as the sandbox's desktop, an xterm on it, the X server's state read with xdotool, xdpyinfo and xsetroot,
    # screenshots read with PIL
    novnc tigervnc-standalone-server xterm xdotool x11-utils x11-xserver-utils python3-pil
)

# tests/container/run: the image built and run with podman on a Debian 12
# base made by mmdebstrap; runc for hosts whose cgroups crun refuses (hybrid).
GW_DEB_CONTAINER_PACKAGES=(podman mmdebstrap runc)

# The browser end-to-end tests (tests/integration/test_browser_e2e.py) drive
# Debian's Chromium with playwright-core from npm (node and npm are on the
# machine; never a browser download); certutil (libnss3-tools) makes the NSS
# database through which Chromium trusts the demo's CA.
GW_DEB_BROWSER_PACKAGES=(chromium libnss3-tools)

# The real applications the gateway is tested in front of
# (tests/integration/test_real_apps.py): Debian's Jupyter Notebook and Flask;
# Vite comes from npm into tests/integration/apps/vite (gw_deps_apps).
GW_DEB_APP_PACKAGES=(jupyter-notebook python3-flask)

# gw_deps_install [package...]: installs the given packages (default: all of
# GW_DEB_PACKAGES) that dpkg does not report as installed.
gw_deps_install() {
    local want=("$@") missing=() p
    if [ "${#want[@]}" -eq 0 ]; then
        want=("${GW_DEB_PACKAGES[@]}")
    fi
    for p in "${want[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        return 0
    fi
    echo "deps: installing ${missing[*]}" >&2
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "deps: missing packages (${missing[*]}) and not root; install them first" >&2
            return 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq >&2
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    # The Debian package starts a redis-server on 6379 via systemd where there
    # is one; the tests and the demo start their own on other ports.
}

# gw_deps_browser: Chromium from Debian, and playwright-core from the npm
# registry into tests/integration/browser/node_modules (npm ci, only when it
# is missing or older than package-lock.json).
gw_deps_browser() {
    local dir=tests/integration/browser
    [ -f "$dir/package.json" ] || return 0
    gw_deps_install "${GW_DEB_BROWSER_PACKAGES[@]}"
    if ! command -v npm >/dev/null 2>&1; then
        gw_deps_install nodejs npm
    fi
    if [ ! -d "$dir/node_modules/playwright-core" ] ||
        { [ -f "$dir/package-lock.json" ] && [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; }; then
        echo "deps: npm ci in $dir" >&2
        if [ -f "$dir/package-lock.json" ]; then
            npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
        else
            npm install --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
        fi
    fi
}

# gw_deps_apps: the real applications of test_real_apps.py, test_long_calls.py
# and test_mcp.py: Debian's Jupyter Notebook and Flask; from the npm registry
# Vite into tests/integration/apps/vite, the MCP SDK (server and clients) into
# tests/integration/apps/mcp and tests/integration/apps/mcp-long (a long tool
# call), and the example authorization server's into deploy/oauth-as (npm ci
# in each, only when its node_modules is missing or older than its
# package-lock.json).
gw_deps_apps() {
    local dir
    gw_deps_install "${GW_DEB_APP_PACKAGES[@]}"
    for dir in tests/integration/apps/vite tests/integration/apps/mcp tests/integration/apps/mcp-long deploy/oauth-as; do
        [ -f "$dir/package.json" ] || continue
        if ! command -v npm >/dev/null 2>&1; then
            gw_deps_install nodejs npm
        fi
        if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
            echo "deps: npm ci in $dir" >&2
            npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >&2
        fi
    done
}
