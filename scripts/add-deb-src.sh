#!/usr/bin/env bash
# Adds Debian's source packages (deb-src, main) of each SUITE to apt's sources
# where no source names them yet, so that `apt-get source --print-uris` reads
# an orig tarball's address and sha256 from the suite's signed Sources index
# (build-lavapipe.sh: bookworm-backports' Mesa; web-deps.sh: bookworm's cJSON,
# PCRE2, zlib). Needs root; run `apt-get update` after it.
# Usage: scripts/add-deb-src.sh SUITE...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/add-deb-src.sh SUITE..." >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "add-deb-src: adding apt sources needs root (run as root: $0 $*)" >&2; exit 3; }
d=/etc/apt/sources.list.d
has_src() {  # SUITE: a one-line deb-src entry, or a deb822 stanza of Types deb-src naming it
  local s=$1 f
  grep -qsE "^deb-src[[:space:]].*[[:space:]]$s([[:space:]]|$)" /etc/apt/sources.list $d/*.list && return 0
  for f in $d/*.sources; do
    [ -f "$f" ] || continue
    awk -v s="$s" 'BEGIN { RS = ""; hit = 1 }
      $0 ~ /(^|\n)Types:[^\n]*deb-src/ && $0 ~ ("(^|\n)Suites:[^\n]*[ \t]" s "([ \t]|\n|$)") { hit = 0 }
      END { exit hit }' "$f" && return 0
  done
  return 1
}
for suite in "$@"; do
  has_src "$suite" && continue
  # (backports keeps the name it had when add-backports.sh --src wrote it)
  case $suite in *-backports) f=$d/wgpt-backports-src.sources ;; *) f=$d/wgpt-$suite-src.sources ;; esac
  printf 'apt: adding %s (deb-src) to apt'"'"'s sources\n' "$suite"
  cat > "$f" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
done
