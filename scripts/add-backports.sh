#!/usr/bin/env bash
# Adds bookworm-backports ($WGPT_MESA_SUITE) to apt's sources if no source
# names it yet. Needs root; used by ensure-driver.sh (Mesa's lavapipe) and
# apt-install.sh --backports (meson and libdrm-dev for building it).
# --src: its source packages too (deb-src, scripts/add-deb-src.sh), for build-lavapipe.sh's apt-get source.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pins.sh
add() {  # add FILE TYPE
  printf 'apt: adding %s (%s) to apt'"'"'s sources\n' "$WGPT_MESA_SUITE" "$2"
  cat > "$1" <<SRC
Types: $2
URIs: http://deb.debian.org/debian
Suites: $WGPT_MESA_SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
}
[ "${1:-}" = --src ] && exec scripts/add-deb-src.sh "$WGPT_MESA_SUITE"
grep -rqs "$WGPT_MESA_SUITE" /etc/apt/sources.list /etc/apt/sources.list.d/ && exit 0
add /etc/apt/sources.list.d/wgpt-backports.sources deb
