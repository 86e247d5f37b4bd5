#!/usr/bin/env bash
# Installs those of the Debian packages given that are missing (dpkg -s), as
# root through apt. --backports: from bookworm-backports ($WGPT_MESA_SUITE),
# added to apt's sources first (scripts/add-backports.sh; Debian 12 only).
# Exit 0: all there now; 3: some are missing and cannot be installed here (not
# root, no apt, or backports off Debian 12), after naming them.
# Usage: scripts/apt-install.sh [--backports] PKG...
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pins.sh
bpo=0
[ "${1:-}" = --backports ] && { bpo=1; shift; }
need=()
for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
[ ${#need[@]} -eq 0 ] && exit 0
from=""; [ $bpo = 1 ] && from=" -t $WGPT_MESA_SUITE"
codename=$( . /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}" )
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || { [ $bpo = 1 ] && [ "$codename" != bookworm ]; }; then
  printf 'apt: missing packages: %s. Install them: sudo apt-get install%s %s\n' "${need[*]}" "$from" "${need[*]}" >&2
  exit 3
fi
[ $bpo = 1 ] && scripts/add-backports.sh
printf 'apt: installing%s %s\n' "$from" "${need[*]}"
apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $from "${need[@]}" >/dev/null
