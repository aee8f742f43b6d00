#!/usr/bin/env bash
# Sourced by the GPU-machine scripts (gpu_check.sh, bench/run_vae_enc_bench.sh): finds a cuDNN 9 for h3's
# CUDA convolutions (src/backend/cuda/cuda_cudnn.c loads libcudnn.so.9 with dlopen at the first conv3d) and
# exports H3_CUDNN_LIBRARY plus its folder on LD_LIBRARY_PATH (cuDNN 9's libcudnn.so.9 loads its sub-libraries
# from there).  Looks, in order: $H3_CUDNN_LIBRARY as given, the loader's cache, /usr/local/cuda/lib64 and the
# usual system folders, the Python packages' copies (nvidia-cudnn-cu* of PyTorch: nvidia/cudnn/lib, or torch/lib).
# Prints one line saying which; finding none is not an error (h3 then runs its own im2col + cuBLAS convs).
h3_find_cudnn() {
  local c
  if [ -n "${H3_CUDNN_LIBRARY:-}" ] && [ -f "$H3_CUDNN_LIBRARY" ]; then echo "$H3_CUDNN_LIBRARY"; return 0; fi
  c=$(ldconfig -p 2>/dev/null | awk '/libcudnn\.so\.9 /{print $NF; exit}')
  [ -n "$c" ] && [ -f "$c" ] && { echo "$c"; return 0; }
  for c in /usr/local/cuda/lib64/libcudnn.so.9 /usr/local/cuda/lib/libcudnn.so.9 /usr/lib/x86_64-linux-gnu/libcudnn.so.9 \
           /usr/lib64/libcudnn.so.9; do
    [ -f "$c" ] && { echo "$c"; return 0; }
  done
  c=$(python3 - 2>/dev/null <<'PY'
import glob, os
cands = []
try:
    import nvidia.cudnn as m
    for d in list(getattr(m, "__path__", [])):
        cands += glob.glob(os.path.join(d, "lib", "libcudnn.so.9"))
except Exception:
    pass
try:
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec and spec.submodule_search_locations:
        for d in spec.submodule_search_locations:
            cands += glob.glob(os.path.join(d, "lib", "libcudnn.so.9"))
except Exception:
    pass
print(cands[0] if cands else "")
PY
)
  [ -n "$c" ] && [ -f "$c" ] && { echo "$c"; return 0; }
  return 1
}
if h3_cudnn_path=$(h3_find_cudnn); then
  export H3_CUDNN_LIBRARY="$h3_cudnn_path"
  case $h3_cudnn_path in
    */torch/lib/*) # torch's own folder also holds its NCCL, cudart, ...: not put ahead of the system's
      echo "cudnn_env: H3_CUDNN_LIBRARY=$H3_CUDNN_LIBRARY (folder not added to LD_LIBRARY_PATH)" ;;
    *) export LD_LIBRARY_PATH="$(dirname "$h3_cudnn_path")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
       echo "cudnn_env: H3_CUDNN_LIBRARY=$H3_CUDNN_LIBRARY" ;;
  esac
else
  echo "cudnn_env: no libcudnn.so.9 found (h3's convs run im2col + cuBLAS)"
fi
