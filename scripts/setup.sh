#!/usr/bin/env bash
# Installs what wgpt needs to build and test, and is safe to run again.
#   - Debian build/test packages (compiler, cmocka) if missing
#   - the pinned Dawn build (npm bun-webgpu-linux-x64@0.1.7), integrity-checked,
#     into third_party/dawn/
# The Vulkan driver check needs a built binary: scripts/ensure-driver.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pins.sh

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# --- Debian packages ------------------------------------------------------
need_pkgs=()
for p in $WGPT_DEBIAN_PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing ${need_pkgs[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
  else
    die "missing packages: ${need_pkgs[*]}. Install them: sudo apt-get install ${need_pkgs[*]}"
  fi
fi

# --- Dawn -----------------------------------------------------------------
dawn_dir=third_party/dawn
so="$dawn_dir/libwebgpu_wrapper.so"
if [ -f "$so" ] && echo "$WGPT_DAWN_SO_SHA256  $so" | sha256sum -c --status; then
  : # already fetched and verified
else
  command -v npm >/dev/null || die "npm is needed to fetch Dawn (apt-get install npm)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  say "fetching $WGPT_DAWN_NPM"
  (cd "$tmp" && npm pack --silent "$WGPT_DAWN_NPM" >/dev/null) || die "npm pack $WGPT_DAWN_NPM failed"
  tgz=$(ls "$tmp"/*.tgz)
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  [ "$got" = "$WGPT_DAWN_NPM_INTEGRITY" ] || die "integrity mismatch for $WGPT_DAWN_NPM: got $got, pinned $WGPT_DAWN_NPM_INTEGRITY"
  tar -xzf "$tgz" -C "$tmp" package/libwebgpu_wrapper.so package/LICENSE
  echo "$WGPT_DAWN_SO_SHA256  $tmp/package/libwebgpu_wrapper.so" | sha256sum -c --status \
    || die "sha256 of libwebgpu_wrapper.so does not match the pin"
  mkdir -p "$dawn_dir"
  mv "$tmp/package/LICENSE" "$dawn_dir/LICENSE"
  mv "$tmp/package/libwebgpu_wrapper.so" "$so"
  say "Dawn verified and installed in $dawn_dir"
fi
