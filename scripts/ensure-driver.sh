#!/usr/bin/env bash
# Makes sure Dawn finds a real GPU adapter (not only its Null backend).
# Usage: scripts/ensure-driver.sh PATH/TO/wgpt
# If none is found on Debian 12 and we are root, installs Mesa >= 25 lavapipe
# (a Vulkan driver that runs on the CPU) from bookworm-backports, adding that
# suite to apt's sources if needed. Elsewhere it says what to install.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pins.sh
wgpt=${1:-build/wgpt}

say() { printf 'driver: %s\n' "$*"; }
die() { printf 'driver: error: %s\n' "$*" >&2; exit 1; }

probe() { "$wgpt" info --check >/dev/null 2>&1; }

if probe; then exit 0; fi
say "Dawn finds no real GPU adapter:"
"$wgpt" info --check 2>&1 | sed 's/^/  /' || true

codename=$( . /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}" )
if [ "$(id -u)" != 0 ] || [ "$codename" != bookworm ] || ! command -v apt-get >/dev/null; then
  die "install a Vulkan driver for your GPU (and the Vulkan loader libvulkan1), or, to run on the CPU, Mesa >= ${WGPT_MESA_MIN_MAJOR} lavapipe:
  Debian 12: add 'bookworm-backports' to apt's sources, then
             sudo apt-get install -t bookworm-backports mesa-vulkan-drivers
  Ubuntu 24.04+ / Debian 13: sudo apt-get install mesa-vulkan-drivers libvulkan1
(Debian 12's own Mesa 22.3 lavapipe is rejected by Dawn.)"
fi

scripts/add-backports.sh
say "installing Mesa lavapipe from $WGPT_MESA_SUITE (a few minutes)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t "$WGPT_MESA_SUITE" mesa-vulkan-drivers libvulkan1 >/dev/null
ver=$(dpkg-query -W -f '${Version}' mesa-vulkan-drivers)
[ "${ver%%.*}" -ge "$WGPT_MESA_MIN_MAJOR" ] || die "mesa-vulkan-drivers $ver installed, need >= $WGPT_MESA_MIN_MAJOR"
say "mesa-vulkan-drivers $ver installed"
probe || { "$wgpt" info --check || true; die "still no real adapter after installing Mesa $ver"; }
