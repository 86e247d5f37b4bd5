# Source on a GPU machine that has a driver but no Vulkan loader (e.g. the
# NVIDIA H200 machine): unpacks the packages of scripts/fetch-gpu-runtime.sh
# and points the Vulkan loader at NVIDIA's driver when it is there.
#   . scripts/gpu-env.sh
_wgpt_rt="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/third_party/gpu-runtime"
if ! ldconfig -p | grep -q 'libvulkan.so.1 '; then
  for f in "$_wgpt_rt"/lib{vulkan1,egl1,glvnd0,opengl0,gl1,glx0,gles2}_*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
# The libraries wgpt links, into a private folder (unpacking them into / could
# replace the machine's own copies).
_wgpt_need=0
for _l in libcmocka.so.0 libcjson.so.1 libpcre2-8.so.0 libcrypto.so.3; do
  ldconfig -p | grep -q "$_l " || _wgpt_need=1
done
if [ $_wgpt_need = 1 ]; then
  mkdir -p /tmp/wgpt-libs
  for f in "$_wgpt_rt"/lib{cmocka0,cjson1,pcre2-8-0,ssl3}_*.deb; do dpkg -x "$f" /tmp/wgpt-libs; done
  export LD_LIBRARY_PATH="/tmp/wgpt-libs/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
unset _wgpt_need _l
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
unset _wgpt_rt
