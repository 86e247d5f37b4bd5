#!/usr/bin/env bash
# Fetches, from Debian, the libraries a bare GPU machine lacks to run wgpt:
# the Vulkan loader (and the GL/EGL dispatch libraries NVIDIA's driver loads)
# and the libraries wgpt and its tests link (cmocka, cJSON, PCRE2, OpenSSL's libcrypto, libmicrohttpd). They go to third_party/gpu-runtime/ (ignored);
# scripts/gpu-env.sh unpacks them on that machine. apt verifies each package
# against Debian's signed index.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=third_party/gpu-runtime
mkdir -p "$dir"
pkgs="libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 libcmocka0 libcjson1 libpcre2-8-0 libssl3"
# libmicrohttpd (wgpt serve) and GnuTLS, which it links, with GnuTLS's own libraries
pkgs="$pkgs libmicrohttpd12 libgnutls30 libgmp10 libhogweed6 libnettle8 libidn2-0 libunistring2 libp11-kit0 libtasn1-6 libffi8"
missing=()
for p in $pkgs; do ls "$dir/${p}_"*.deb >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  (cd "$dir" && apt-get download "${missing[@]}")
fi
ls "$dir"
