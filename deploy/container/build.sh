#!/bin/bash
# The image's build stage (deploy/Containerfile runs it as an exec-form RUN,
# so no SHELL instruction is needed: podman's default OCI image format
# ignores SHELL, docker's format honours it).
#   build.sh packages   installs the project's own build packages
#                       (tests/lib/deps.sh, GW_DEB_BUILD_PACKAGES)
#   build.sh            builds the release binary into /build without the
#                       Check unit tests, and checks that the binary runs
set -euxo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/lib/deps.sh
. tests/lib/deps.sh
if [ "${1:-}" = packages ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends ca-certificates "${GW_DEB_BUILD_PACKAGES[@]}"
    # the desktop viewer's files (desktop.viewer_dir): Debian's novnc package unpacked, not installed (its
    # dependencies, nodejs and websockify among them, are for running it, which the gateway does not)
    (cd /tmp && apt-get download -qq novnc && dpkg-deb -x novnc_*.deb /novnc && rm novnc_*.deb)
    test -f /novnc/usr/share/novnc/vnc.html
    exit 0
fi
meson setup /build --buildtype=release -Db_ndebug=if-release -Dtests=false
ninja -C /build gateway/lizard-gateway
/build/gateway/lizard-gateway --version
