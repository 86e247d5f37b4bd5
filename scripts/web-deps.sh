#!/usr/bin/env bash
# Fetches what `make web` needs beyond the native build, safe to run again:
#   - Debian packages: chromium (the tests' browser), wasi-libc and clang's wasm32
#     runtime ($WGPT_WEB_PACKAGES, scripts/pins.sh)
#   - the cJSON, PCRE2 and zlib sources: the orig tarballs of pinned Debian source
#     packages, located with apt-get source --print-uris (bookworm's signed Sources
#     index; deb-src added as root by scripts/add-deb-src.sh), sha256-checked against
#     that index and scripts/pins.sh, unpacked into DIR (default build-web/deps)
#     and compiled by web/web.mk
#   - npm playwright-core for tests/browser (its package-lock.json), with no browser download
# Usage: scripts/web-deps.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pins.sh
dir=${1:-build-web/deps}
die() { printf 'web-deps: error: %s\n' "$*" >&2; exit 1; }
scripts/apt-install.sh $WGPT_WEB_PACKAGES || die "Debian packages missing (above)"
# apt-get source --print-uris PKG/SUITE (the suite's current revision), adding bookworm's deb-src (root only) where apt has none.
uris() {
  local out
  out=$(apt-get source --print-uris -qq "$1" 2>/dev/null) && { printf '%s\n' "$out"; return 0; }
  if [ "$(id -u)" != 0 ]; then
    die "apt knows no source package $1: as root, scripts/add-deb-src.sh $WGPT_WEB_SRC_SUITE && apt-get update"
  fi
  scripts/add-deb-src.sh "$WGPT_WEB_SRC_SUITE" >&2
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get source --print-uris -qq "$1" ||
    die "apt has no source package $1 (is it still in $WGPT_WEB_SRC_SUITE? see scripts/pins.sh)"
}
# The pin is the upstream tarball (its name and sha256), which every Debian
# revision of that upstream version shares: a security update (+deb12uN) changes
# nothing here; a new upstream version is an error naming what the index has.
fetch() {  # PKG ORIG_FILE SHA256 NAME
  local src=$1 file=$2 pin=$3 name=$4 lines url sha
  [ -f "$dir/$name/.ok" ] && return 0
  mkdir -p "$dir"
  lines=$(uris "$src/$WGPT_WEB_SRC_SUITE")
  # a line: 'URL' FILE SIZE SHA256:HEX
  url=$(printf '%s\n' "$lines" | awk -v f="$file" '$2 == f { gsub("\047", "", $1); print $1 }')
  sha=$(printf '%s\n' "$lines" | awk -v f="$file" '$2 == f && $4 ~ /^SHA256:/ { print substr($4, 8) }')
  [ -n "$url" ] && [ -n "$sha" ] || die "apt's Sources index lists no $file for $src (it lists: $(printf '%s\n' "$lines" | awk '{ printf "%s ", $2 }')): see scripts/pins.sh"
  [ "$sha" = "$pin" ] || die "$src: Debian's Sources index gives $file sha256 $sha, scripts/pins.sh pins $pin"
  local tgz="$dir/$file"
  if ! echo "$sha  $tgz" | sha256sum -c --status 2>/dev/null; then
    printf 'web-deps: fetching %s\n' "$url"
    curl -fsSL --retry 3 -o "$tgz.part" "$url" || die "download of $url failed"
    echo "$sha  $tgz.part" | sha256sum -c --status || die "$url: sha256 is not $sha (Debian's Sources index, scripts/pins.sh)"
    mv "$tgz.part" "$tgz"
  fi
  rm -rf "$dir/$name" && mkdir -p "$dir/$name"
  tar -xf "$tgz" -C "$dir/$name" --strip-components=1
  touch "$dir/$name/.ok"
}
fetch "$WGPT_WEB_CJSON_SRC" "$WGPT_WEB_CJSON_ORIG" "$WGPT_WEB_CJSON_SHA256" cjson
fetch "$WGPT_WEB_PCRE2_SRC" "$WGPT_WEB_PCRE2_ORIG" "$WGPT_WEB_PCRE2_SHA256" pcre2
fetch "$WGPT_WEB_ZLIB_SRC" "$WGPT_WEB_ZLIB_ORIG" "$WGPT_WEB_ZLIB_SHA256" zlib
# PCRE2's generic configuration, as its own build would write it (no JIT in WebAssembly)
[ -f "$dir/pcre2/src/config.h" ] || cp "$dir/pcre2/src/config.h.generic" "$dir/pcre2/src/config.h"
[ -f "$dir/pcre2/src/pcre2.h" ] || cp "$dir/pcre2/src/pcre2.h.generic" "$dir/pcre2/src/pcre2.h"
[ -f "$dir/pcre2/src/pcre2_chartables.c" ] || cp "$dir/pcre2/src/pcre2_chartables.c.dist" "$dir/pcre2/src/pcre2_chartables.c"
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  command -v npm >/dev/null || die "npm is needed for tests/browser (apt-get install npm)"
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --silent --no-audit --no-fund) || die "npm ci in tests/browser failed"
fi
