#!/usr/bin/env bash
# Builds wgpt's tuned lavapipe (opt-in; 3 to 8 minutes on 2 cores) into
# third_party/lavapipe/: Mesa 25.0.7, the same release as the lavapipe that
# scripts/ensure-driver.sh installs, with scripts/patches/mesa-25.0.7-lavapipe.patch:
#   - uniformity from NIR's divergence analysis, not only constants: a load
#     whose offset is the same in all 8 lanes reads one scalar;
#   - lane-distinct offsets into one buffer: one vector load or store when the
#     lanes' offsets run contiguously (lane l at base + nc l), one branch-free
#     access a lane when all lanes are active and in bounds, else a masked
#     gather / scatter: instead of a branch and a bounds test per lane;
#   - fma() stays one FMA instruction (25.0.7 splits it into a multiply and an add);
#   - a workgroup size fixed in the shader is a constant in the generated code,
#     so each lane's local invocation id costs no integer division;
#   - a compute dispatch runs on LP_NUM_THREADS threads counting the caller,
#     which used to wait idle, and threads out of work spin a while
#     (LP_CS_SPIN_US, default 200) before they sleep: no wake-ups between the
#     hundred dispatches of a training step.
# Use it: VK_ICD_FILENAMES=$PWD/third_party/lavapipe/lvp_icd.json build/wgpt ...
# (`wgpt info` then says "Mesa 25.0.7 (git-wgpt-lvp2)"). Figures: docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pins.sh

say() { printf 'lavapipe: %s\n' "$*"; }
die() { printf 'lavapipe: error: %s\n' "$*" >&2; exit 1; }

dest=third_party/lavapipe
patch_file=scripts/patches/mesa-25.0.7-lavapipe.patch
stamp="$(sha256sum "$patch_file" | cut -c1-16)"
if [ -f "$dest/libvulkan_lvp.so" ] && [ "$(cat "$dest/stamp" 2>/dev/null)" = "$stamp" ]; then
  say "already built: $dest/lvp_icd.json"; exit 0
fi

# --- build tools (Debian 12) ----------------------------------------------
# exit 3 where they cannot be installed: scripts/test-tuned-lavapipe.sh skips then
# (the backports first: off Debian 12 they stop it before anything is installed)
scripts/apt-install.sh --backports $WGPT_MESA_BUILD_PACKAGES_BPO || exit $?
scripts/apt-install.sh $WGPT_MESA_BUILD_PACKAGES || exit $?

# --- source: Debian's, located through apt, patched -----------------------
# apt-get source --print-uris reads the orig tarball's address and sha256 from
# bookworm-backports' Sources index, which apt has checked against Debian's
# signature; the version is pinned ($WGPT_MESA_SRC_VERSION). Only the orig
# tarball is fetched: Debian's own patches are not applied.
work=$dest/work
mkdir -p "$work"
version=${WGPT_MESA_SRC_VERSION%%-*}
tarball=$work/mesa_$version.orig.tar.xz
if ! uris=$(apt-get source --print-uris -qq "mesa=$WGPT_MESA_SRC_VERSION" 2>/dev/null); then
  if [ "$(id -u)" != 0 ]; then
    printf 'lavapipe: apt knows no source of mesa=%s: as root, scripts/add-backports.sh --src && apt-get update\n' \
      "$WGPT_MESA_SRC_VERSION" >&2
    exit 3
  fi
  scripts/add-backports.sh --src
  apt-get update -qq
  uris=$(apt-get source --print-uris -qq "mesa=$WGPT_MESA_SRC_VERSION") ||
    die "apt has no source package mesa=$WGPT_MESA_SRC_VERSION (is it still in $WGPT_MESA_SUITE?)"
fi
# a line: 'URL' FILE SIZE SHA256:HEX
url=$(printf '%s\n' "$uris" | awk -v f="${tarball##*/}" '$2 == f { gsub("\047", "", $1); print $1 }')
sha=$(printf '%s\n' "$uris" | awk -v f="${tarball##*/}" '$2 == f && $4 ~ /^SHA256:/ { print substr($4, 8) }')
[ -n "$url" ] && [ -n "$sha" ] || die "apt's Sources index lists no ${tarball##*/} with a sha256"
if ! echo "$sha  $tarball" | sha256sum -c --status 2>/dev/null; then
  say "fetching $url"
  curl -fsSL --retry 3 -o "$tarball.part" "$url" || die "download failed: $url"
  echo "$sha  $tarball.part" | sha256sum -c --status || die "$url: sha256 is not $sha (Debian's Sources index)"
  mv "$tarball.part" "$tarball"
fi
src=$work/mesa-$version
rm -rf "$src" "$work/build"
tar -xf "$tarball" -C "$work"
patch -d "$src" -p1 --quiet < "$patch_file" || die "$patch_file does not apply to $src"

# --- build: lavapipe only ----------------------------------------------------
# Debian's python3 (with mako), not one a version manager put first in PATH.
export PATH=/usr/bin:$PATH MESA_GIT_SHA1_OVERRIDE=wgpt-lvp2
say "configuring (log: $work/meson.log)"
meson setup "$work/build" "$src" -Dbuildtype=release -Dgallium-drivers=llvmpipe \
  -Dvulkan-drivers=swrast -Dplatforms= -Dglx=disabled -Degl=disabled -Dgbm=disabled \
  -Dgles1=disabled -Dgles2=disabled -Dopengl=false -Dllvm=enabled -Dshared-llvm=enabled \
  -Dvideo-codecs= -Dzstd=enabled -Dvalgrind=disabled -Dlibunwind=disabled \
  -Dlmsensors=disabled -Dbuild-tests=false -Dxmlconfig=disabled >"$work/meson.log" 2>&1 ||
  die "meson setup failed: $work/meson.log"
say "building (log: $work/ninja.log)"
ninja -C "$work/build" src/gallium/targets/lavapipe/libvulkan_lvp.so >"$work/ninja.log" 2>&1 ||
  die "build failed: $work/ninja.log"
cp "$work/build/src/gallium/targets/lavapipe/libvulkan_lvp.so" "$dest/libvulkan_lvp.so"
cat > "$dest/lvp_icd.json" <<JSON
{
    "ICD": {
        "api_version": "1.4.305",
        "library_path": "./libvulkan_lvp.so"
    },
    "file_format_version": "1.0.0"
}
JSON
echo "$stamp" > "$dest/stamp"
rm -rf "$src" "$work/build"
say "built $dest/libvulkan_lvp.so; use it: VK_ICD_FILENAMES=$PWD/$dest/lvp_icd.json build/wgpt ..."
