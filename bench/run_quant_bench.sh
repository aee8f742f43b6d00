#!/usr/bin/env bash
# On the GPU machine (device tool): the DiT forward with every block Linear kept quantized (fp8 scaled or int8
# tensorwise, dequantized per tile on the device) next to the plain bf16 forward, in one process
# (bench/dit_bench --quant; issue 20 asks the fp8-scaled forward <= 1.10x the bf16 forward, and its device memory).
#
#   here:    bash tools/device/make_bundle.sh
#   device:  command "bash bench/run_quant_bench.sh", carry [".devbundle"]
#            (or the part `quantbench` of tools/device/session_run.sh)
#
# FORMAT (fp8 or int8, default fp8), SHAPES (default 1344x768x124), ITERS (timed forwards per mode after one
# warm-up, default 2), BUDGET (soft seconds, default 200).
# Results to $OUT: quant.json, quant.log, quant_table.md.  Expected wall time at the defaults: ~2-3 minutes
# (66 GB of synthetic weights filled on the device, ~36 GB of dequantized block weights uploaded from the host,
# three modes x three forwards of ~5.5 s, the quantized warm-up also uploading ~18 GB of codes).
# The bf16 weights stay resident beside the codes: this times the quantized linear path, not the loader's memory.
set -uo pipefail
final=${OUT:-/tmp/h3out}
mkdir -p "$final"
root=/tmp/h3dev_quant
rm -rf "$root"
mkdir -p "$root"
if ! tar -xJf .devbundle/bundle.tar.xz -C "$root" || [ ! -x "$root/bin/dit_bench" ]; then
  echo "no bench binary: .devbundle/bundle.tar.xz missing or without bin/dit_bench (run tools/device/make_bundle.sh)"
  exit 1
fi
args=(--quant "${FORMAT:-fp8}" --shapes "${SHAPES:-1344x768x124}" --iters "${ITERS:-2}" --gemm 0
      --budget-s "${BUDGET:-200}")
echo "== dit_bench ${args[*]}"
LD_LIBRARY_PATH="$root/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" \
  timeout -k 10 "${TIMEOUT:-260}" "$root/bin/dit_bench" "${args[@]}" "$final/quant.json" 2>&1 | tee "$final/quant.log"
rc=${PIPESTATUS[0]}
python3 - "$final/quant.json" >"$final/quant_table.md" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = d.get("quant") or {}
f = lambda v: "%.3f" % v if isinstance(v, (int, float)) else str(v)
e = lambda v: "%.2e" % v if isinstance(v, (int, float)) else str(v)
gb = lambda v: "%.2f" % (v / 1e9) if isinstance(v, (int, float)) else str(v)
print("| shape | plain s | %s s | %s / plain | warm-up s (codes upload) | plain again s | rel-L2 video | rel-L2 audio |"
      % (g.get("format", "quant"), g.get("format", "quant")))
print("|---|---|---|---|---|---|---|---|")
for r in d.get("shapes", []):
    q = r.get("quant")
    if not q:
        print("| %s | %s | (no quantized result: %s) ||||||" % (r["shape"], r.get("median_s"), r.get("status")))
        continue
    print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (r["shape"], f(r.get("median_s")), f(q["median_s"]),
          f(q["over_plain"]), f(q["warmup_s"]), f(q["plain_again_median_s"]), e(q["output_rel_l2_vs_plain_video"]),
          e(q["output_rel_l2_vs_plain_audio"])))
print()
if g:
    print("%s (%s, %s scale): %s block Linears, %s elements; on the device %s GB codes + scales, staging %.1f MB, vs "
          "%s GB bf16 of the same weights (the bf16 weights also stay resident in this bench)"
          % (g.get("format"), g.get("format_name"), g.get("scale"), g.get("linears"), g.get("elements"),
             gb(g.get("uploaded_bytes")), (g.get("staging_bytes") or 0) / 1e6, gb(g.get("bf16_bytes_same_weights"))))
    print("quantized path probe: %s under the DiT's bf16 numerics, %s under the backend's own%s"
          % (g.get("path_probe_dit_numerics"), g.get("path_probe_backend_numerics"),
             " (the quantized timings are the plain path's)" if g.get("path_probe_dit_numerics") == "not taken" else ""))
    for r in d.get("shapes", []):
        q = r.get("quant")
        if q:
            print("%s: device used %s -> %s GB, backend allocations %s -> %s GB (before registering -> after the "
                  "quantized forwards)" % (r["shape"], gb(q.get("device_used_before_bytes")),
                  gb(q.get("device_used_after_bytes")), gb(q.get("backend_alloc_before_bytes")),
                  gb(q.get("backend_alloc_after_bytes"))))
print()
print("GPU: %s; status: %s" % (d.get("gpu"), d.get("status")))
PY
cat "$final/quant_table.md"
exit "$rc"
