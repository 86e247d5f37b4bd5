#!/usr/bin/env bash
# Fetches what `make web` needs beyond the native build, safe to run again:
#   - Debian packages: chromium (the tests' browser), wasi-libc and clang's wasm32
#     runtime ($WGPT_WEB_PACKAGES, scripts/pins.sh)
#   - the cJSON, PCRE2 and zlib sources (pinned Debian orig tarballs, sha256-checked)
#     unpacked into DIR (default build-web/deps), compiled by web/web.mk
#   - npm playwright-core for tests/browser (its package-lock.json), with no browser download
# Usage: scripts/web-deps.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pins.sh
dir=${1:-build-web/deps}
die() { printf 'web-deps: error: %s\n' "$*" >&2; exit 1; }
scripts/apt-install.sh $WGPT_WEB_PACKAGES || die "Debian packages missing (above)"
fetch() {  # URL SHA256 NAME
  local url=$1 sum=$2 name=$3
  [ -f "$dir/$name/.ok" ] && return 0
  mkdir -p "$dir"
  local tgz="$dir/$(basename "$url")"
  if ! echo "$sum  $tgz" | sha256sum -c --status 2>/dev/null; then
    printf 'web-deps: fetching %s\n' "$url"
    curl -fsSL --retry 3 -o "$tgz.part" "$url" || die "download of $url failed"
    mv "$tgz.part" "$tgz"
  fi
  echo "$sum  $tgz" | sha256sum -c --status || die "sha256 of $tgz does not match the pin in scripts/pins.sh"
  rm -rf "$dir/$name" && mkdir -p "$dir/$name"
  tar -xf "$tgz" -C "$dir/$name" --strip-components=1
  touch "$dir/$name/.ok"
}
fetch "$WGPT_WEB_CJSON_URL" "$WGPT_WEB_CJSON_SHA256" cjson
fetch "$WGPT_WEB_PCRE2_URL" "$WGPT_WEB_PCRE2_SHA256" pcre2
fetch "$WGPT_WEB_ZLIB_URL" "$WGPT_WEB_ZLIB_SHA256" zlib
# PCRE2's generic configuration, as its own build would write it (no JIT in WebAssembly)
[ -f "$dir/pcre2/src/config.h" ] || cp "$dir/pcre2/src/config.h.generic" "$dir/pcre2/src/config.h"
[ -f "$dir/pcre2/src/pcre2.h" ] || cp "$dir/pcre2/src/pcre2.h.generic" "$dir/pcre2/src/pcre2.h"
[ -f "$dir/pcre2/src/pcre2_chartables.c" ] || cp "$dir/pcre2/src/pcre2_chartables.c.dist" "$dir/pcre2/src/pcre2_chartables.c"
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  command -v npm >/dev/null || die "npm is needed for tests/browser (apt-get install npm)"
  (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --silent --no-audit --no-fund) || die "npm ci in tests/browser failed"
fi
