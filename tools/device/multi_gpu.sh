#!/usr/bin/env bash
# On a multi-GPU machine (device tool, kind nvidia-h200-x2 or larger), over the
# bundle of tools/device/make_bundle.sh: the sequence-parallel DiT through NCCL.
#   1. test_dit_sp with H3_TEST_DEVICE=cuda: the golden layouts on 2..min(GPUs,4)
#      ranks vs one GPU (f32 debug mode and bf16) and vs diffusers;
#   2. the toy `h3 generate --gpus N` vs one GPU (final latents);
#   3. dit_bench --gpus N at the released size: N-GPU forward, one-GPU forward,
#      speedup and agreement (SHAPES, default 1344x768x124).
# Exits 1 when any step fails: a non-zero exit of a step, fewer than 2 GPUs, or the toy's
# N-GPU latents further than TOY_TOL (default 1e-3 rel-L2; measured 2.5e-4 video, 1.6e-4
# audio on 2 GPUs) from the one-GPU run.  The last line says which steps failed.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0): it can take a shared host's GPUs out of service.
#   here:    bash tools/device/make_bundle.sh
#   device:  run(command="bash tools/device/multi_gpu.sh", carry=[".devbundle"], kind="nvidia-h200-x2")
set -uo pipefail
final=${OUT:-/tmp/h3out}; mkdir -p "$final"
out=/tmp/h3mg; rm -rf "$out"; mkdir -p "$out"
root=/tmp/h3dev; rm -rf "$root"; mkdir -p "$root"
tar -xJf .devbundle/bundle.tar.xz -C "$root"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="$root/lib:${nccl_dir:+$nccl_dir:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export H3_SOURCE_DIR=$PWD OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SkylakeX}
bin=$root/bin
failed=()
step() { # NAME RC: record a failed step
  [ "$2" -eq 0 ] || { failed+=("$1"); echo "FAIL $1 (rc=$2)"; }
}
ngpu=$(nvidia-smi -L | grep -c GPU)
N=${GPUS:-$ngpu}
TOY_TOL=${TOY_TOL:-1e-3}
[ "$N" -ge 2 ] 2>/dev/null || { echo "FAIL: $N GPU(s): this check needs 2 or more"; failed+=("gpus"); }
SHAPES=${SHAPES:-1344x768x124}
echo "GPUs: $ngpu, using $N; NCCL from ${nccl_dir:-the system}"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
nvidia-smi topo -m 2>&1 | head -8 | tee "$out/topo.txt"

echo "== 1. test_dit_sp on CUDA (group of 2..$N ranks)"
H3_TEST_DEVICE=cuda timeout 300 "$bin/test_dit_sp" >"$out/test_dit_sp.log" 2>&1
rc=$?; echo "rc=$rc"; grep -E "cuda .*group|checks|FAIL|failed" "$out/test_dit_sp.log" | tail -40
step test_dit_sp $rc

echo "== 2. toy h3 generate --gpus $N vs 1"
export H3_TOY_DIR=/tmp/h3toy
g=(generate -q --device cuda -p "a red fox trotting through fresh snow" --frames 22 --size 256x256 --steps 4 --seed 7 -o /tmp/toy.safetensors)
"$bin/h3" "${g[@]}" --latents-out "$out/toy_1.safetensors" >"$out/toy1.log" 2>&1; rc=$?; echo "1 GPU rc=$rc"
step toy_1gpu $rc
"$bin/h3" "${g[@]}" --gpus "$N" --latents-out "$out/toy_n.safetensors" >"$out/toyn.log" 2>&1; rc=$?; echo "$N GPUs rc=$rc"
step toy_ngpu $rc
tail -3 "$out/toyn.log"
# stdlib only (tests/tools/st_tool.py): rel-L2 of every latent tensor, NaN fails
python3 - "$PWD/tests/tools" "$out/toy_1.safetensors" "$out/toy_n.safetensors" "$TOY_TOL" <<'EOF' 2>&1 | tee "$out/toy_compare.txt"
import sys
sys.path.insert(0, sys.argv[1])
from st_tool import read, tensor_f32, rel_l2
ha, ba, _ = read(sys.argv[2])
hb, bb, _ = read(sys.argv[3])
tol, ok = float(sys.argv[4]), True
keys = sorted(k for k in ha if k != "__metadata__")
if not keys or sorted(k for k in hb if k != "__metadata__") != keys:
    sys.exit(f"toy latents: tensors {keys} vs {sorted(hb)}")
for k in keys:
    r = rel_l2(tensor_f32(hb, bb, k), tensor_f32(ha, ba, k))
    ok = ok and r <= tol
    print(f"toy latents {k} {ha[k]['shape']}: rel-L2 N-GPU vs 1-GPU = {r:.3e} (bound {tol:g})")
sys.exit(0 if ok else 1)
EOF
step toy_compare "${PIPESTATUS[0]}"

echo "== 3. dit_bench --gpus $N ($SHAPES)"
timeout 420 "$bin/dit_bench" --gpus "$N" --shapes "$SHAPES" --iters "${ITERS:-2}" --gemm 0 "$out/sp_bench.json" 2>&1 |
  tee "$out/sp_bench.log" | grep -vE "^\s*$" | tail -12
step dit_bench "${PIPESTATUS[0]}"
echo "== 4. where the N-GPU forward spends its time (H3_SP_TIMING=1: every part synced, so slower overall)"
H3_SP_TIMING=1 timeout 200 "$bin/dit_bench" --gpus "$N" --shapes "$SHAPES" --iters 0 --gemm 0 "$out/sp_timing.json" 2>&1 |
  tee "$out/sp_timing.log" | grep -E "SP timing" | tail -14
step dit_bench_timing "${PIPESTATUS[0]}"
cp "$out"/*.json "$out"/*.txt "$final/" 2>/dev/null
tar -C "$out" -czf "$final/mg_logs.tar.gz" .
if [ ${#failed[@]} -eq 0 ]; then echo "multi_gpu: all steps passed"; else
  echo "multi_gpu: ${#failed[@]} step(s) FAILED: ${failed[*]}"; exit 1; fi
