#!/usr/bin/env bash
# On the GPU machine (device tool): the DiT forward with a rank-R LoRA on every block Linear, at run time and
# baked, next to the forward without it, in one process (bench/dit_bench --lora-rank; issue 20 asks run time
# <= 1.05x none and baked identical to none at 1344x768x124f).
#
#   here:    bash tools/device/make_bundle.sh
#   device:  command "bash bench/run_lora_bench.sh", carry [".devbundle"]
#            (or the part `lorabench` of tools/device/session_run.sh)
#
# RANK (default 128), SHAPES (default 1344x768x124), ITERS (timed forwards per mode after one warm-up, default 2),
# BAKE_BLOCKS (main blocks baked; default dit_bench's: half), BUDGET (soft seconds, default 200).
# Results to $OUT: lora.json, lora.log, lora_table.md.  Expected wall time at the defaults: ~2-3 minutes
# (66 GB of synthetic weights filled on the device, four modes x three forwards of ~5.5 s).
set -uo pipefail
final=${OUT:-/tmp/h3out}
mkdir -p "$final"
root=/tmp/h3dev_lora
rm -rf "$root"
mkdir -p "$root"
if ! tar -xJf .devbundle/bundle.tar.xz -C "$root" || [ ! -x "$root/bin/dit_bench" ]; then
  echo "no bench binary: .devbundle/bundle.tar.xz missing or without bin/dit_bench (run tools/device/make_bundle.sh)"
  exit 1
fi
args=(--lora-rank "${RANK:-128}" --shapes "${SHAPES:-1344x768x124}" --iters "${ITERS:-2}" --gemm 0
      --budget-s "${BUDGET:-200}")
[ -n "${BAKE_BLOCKS:-}" ] && args+=(--lora-bake-blocks "$BAKE_BLOCKS")
echo "== dit_bench ${args[*]}"
LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" \
  timeout -k 10 "${TIMEOUT:-260}" "$root/bin/dit_bench" "${args[@]}" "$final/lora.json" 2>&1 | tee "$final/lora.log"
rc=${PIPESTATUS[0]}
python3 - "$final/lora.json" >"$final/lora_table.md" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("| shape | none s | LoRA run time s | run time / none | baked s (blocks) | baked / none | none again s |")
print("|---|---|---|---|---|---|---|")
for r in d.get("shapes", []):
    l = r.get("lora")
    if not l:
        print("| %s | %s | (no LoRA result: %s) |||||" % (r["shape"], r.get("median_s"), r.get("status")))
        continue
    f = lambda v: "%.3f" % v if isinstance(v, (int, float)) else str(v)
    print("| %s | %s | %s | %s | %s (%s Linears) | %s | %s |" % (r["shape"], f(r.get("median_s")), f(l["runtime_median_s"]),
          f(l["runtime_over_none"]), f(l["bake_median_s"]), l["bake_linears"], f(l["bake_over_none"]),
          f(l["none_again_median_s"])))
print()
print("GPU: %s; status: %s" % (d.get("gpu"), d.get("status")))
PY
cat "$final/lora_table.md"
exit "$rc"
