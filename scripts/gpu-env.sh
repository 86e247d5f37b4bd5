# Source on a GPU machine that has a driver but no Vulkan loader (e.g. the
# NVIDIA H200 machine): unpacks the packages of scripts/fetch-gpu-runtime.sh
# and points the Vulkan loader at NVIDIA's driver when it is there.
#   . scripts/gpu-env.sh
_wgpt_rt="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/third_party/gpu-runtime"
if ! ldconfig -p | grep -q 'libvulkan.so.1 '; then
  for f in "$_wgpt_rt"/lib{vulkan1,egl1,glvnd0,opengl0,gl1,glx0,gles2}_*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
# The libraries wgpt links that the machine lacks, into a private folder
# (unpacking them into / could replace the machine's own copies): SONAME:package.
for _p in libcmocka.so.0:libcmocka0 libcjson.so.1:libcjson1 libpcre2-8.so.0:libpcre2-8-0 libcrypto.so.3:libssl3 \
          libmicrohttpd.so.12:libmicrohttpd12 libgnutls.so.30:libgnutls30 libgmp.so.10:libgmp10 \
          libhogweed.so.6:libhogweed6 libnettle.so.8:libnettle8 libidn2.so.0:libidn2-0 \
          libunistring.so.2:libunistring2 libp11-kit.so.0:libp11-kit0 libtasn1.so.6:libtasn1-6 libffi.so.8:libffi8; do
  if ! ldconfig -p | grep -q "${_p%%:*} "; then
    mkdir -p /tmp/wgpt-libs
    for f in "$_wgpt_rt/${_p#*:}"_*.deb; do dpkg -x "$f" /tmp/wgpt-libs; done
    _wgpt_need=1
  fi
done
if [ "${_wgpt_need:-0}" = 1 ]; then
  case ":${LD_LIBRARY_PATH:-}:" in
    *:/tmp/wgpt-libs/usr/lib/x86_64-linux-gnu:*) ;;
    *) export LD_LIBRARY_PATH="/tmp/wgpt-libs/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
  esac
fi
unset _wgpt_need _p
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
unset _wgpt_rt
