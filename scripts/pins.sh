# Pinned versions and checksums, sourced by the setup scripts.
WGPT_DAWN_NPM="bun-webgpu-linux-x64@0.1.7"
WGPT_DAWN_NPM_INTEGRITY="sha512-UEP7UZdEhx9otvkZczjsszL8ZVlrODANQvgl+C88/bNVmxDoFi7w1fWzGi1sZyakiETjmtFDq2/xCLhbSZxjqw=="
WGPT_DAWN_SO_SHA256="3190c3777f2c07fcf6a0640833cbf5d0cde859dc53aed6d9083946d093198788"
# Build and test tools from Debian.
WGPT_DEBIAN_PACKAGES="gcc make libcmocka-dev openssl ca-certificates"
# Mesa lavapipe that Dawn accepts (Debian 12's own 22.3 is rejected).
WGPT_MESA_SUITE="bookworm-backports"
WGPT_MESA_MIN_MAJOR=25
