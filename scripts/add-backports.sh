#!/usr/bin/env bash
# Adds bookworm-backports ($WGPT_MESA_SUITE) to apt's sources if no source
# names it yet. Needs root; used by ensure-driver.sh (Mesa's lavapipe) and
# apt-install.sh --backports (meson and libdrm-dev for building it).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pins.sh
grep -rqs "$WGPT_MESA_SUITE" /etc/apt/sources.list /etc/apt/sources.list.d/ && exit 0
printf 'apt: adding %s to apt'"'"'s sources\n' "$WGPT_MESA_SUITE"
cat > /etc/apt/sources.list.d/wgpt-backports.sources <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: $WGPT_MESA_SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
