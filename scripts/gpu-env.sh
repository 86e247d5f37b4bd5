# Source on a GPU machine that has a driver but no Vulkan loader (e.g. the
# NVIDIA H200 machine): unpacks the packages of scripts/fetch-gpu-runtime.sh
# and points the Vulkan loader at NVIDIA's driver when it is there.
#   . scripts/gpu-env.sh
_wgpt_rt="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/third_party/gpu-runtime"
if ! ldconfig -p | grep -q 'libvulkan.so.1 '; then
  for f in "$_wgpt_rt"/lib{vulkan1,egl1,glvnd0,opengl0,gl1,glx0,gles2}_*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
if ! ldconfig -p | grep -q 'libcmocka.so.0 '; then
  mkdir -p /tmp/wgpt-cmocka && dpkg -x "$_wgpt_rt"/libcmocka0_*.deb /tmp/wgpt-cmocka
  export LD_LIBRARY_PATH="/tmp/wgpt-cmocka/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
unset _wgpt_rt
