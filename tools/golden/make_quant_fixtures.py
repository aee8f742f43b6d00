#!/usr/bin/env python3
"""Reference dequantization of the tiny Comfy-Org quantized DiTs (issue 20), for tests/unit/test_quant_load.c.

Run on the GPU machine (PyTorch + safetensors; CPU only, a few seconds), FROM THE REPOSITORY ROOT:

    python3 tools/golden/make_quant_fixtures.py --work /tmp/h3quant --tar OUT.tar

then unpack here: `tar -xf OUT.tar -C tests/golden/` (the tar holds `quant/...`, about 2 MB) and run
`ctest --test-dir build -R test_quant_load --output-on-failure`.

What it does:

1. makes the quantized files exactly as the C test does: `python3 tests/tools/st_quant.py all
   tests/golden/dit/tiny/comfy.safetensors WORK` (standard library, deterministic) plus the two pruned-curve
   files (`make int8_convrot|scaled_fp8 tests/golden/dit/tiny/comfy_curve.safetensors WORK/curve_F.safetensors`);
2. loads each file with `safetensors.torch.load_file` (real torch float8 dtypes) and normalizes its
   declarations as ComfyUI's `comfy/utils.py convert_old_quants` does (re-stated here in a few lines: the
   `_quantization_metadata` JSON, else the legacy `scaled_fp8` marker with `.scale_weight` / `.scale_input`
   renamed; then the per-layer `.comfy_quant` JSON);
3. dequantizes every quantized layer to bfloat16 with comfy-kitchen's eager functions
   (`comfy_kitchen.backends.eager.quantization`: dequantize_per_tensor_fp8, dequantize_int8_simple,
   dequantize_int8_convrot_weight, dequantize_nvfp4, dequantize_mxfp8) WHEN that package imports from
   `.ref/comfy-kitchen` (or an installed copy); otherwise with torch re-statements of the same one-line formulas
   (listed in RESTATED below), and says so on stdout and in `summary.json` ("reference": "comfy_kitchen" or
   "restated");
4. writes `quant/<name>.ref.safetensors` (per layer `L.weight`, BF16, the dequantized weight) and
   `quant/summary.json` (per file: the sha256 of the quantized input, the layers, the reference used, and the
   self-checks).

Self-checks (exit 1 if any fails; the tar is still written): the restated formulas agree bit for bit with
comfy-kitchen's when both are available; every layer's dequantized weight is within 0.2 rel-L2 of the unquantized
bf16 weight of comfy.safetensors (a wrong decode is far off); the expectation file st_quant.py wrote
(WORK/<name>.expect.safetensors) agrees with the reference bit for bit, except ConvRot (float32 matmul vs double:
within one bf16 ulp or 2^-18 of the weight's max).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile

FORMATS = ["fp8_e4m3", "fp8_e5m2", "scaled_fp8", "int8", "int8_convrot", "nvfp4", "mxfp8"]
CURVE = ["int8_convrot", "scaled_fp8"]
RESTATED = """fp8:    x.to(bf16) * scale.to(bf16)                                 (dequantize_per_tensor_fp8)
int8:   (q.float() * scale).to(bf16)                                 (dequantize_int8_simple)
convrot:(W.reshape(N, K/g, g) @ H.T).reshape(N, K).to(bf16), W = q.float() * scale, H = kron(h4, ...)/sqrt(g)
nvfp4:  LUT_bf16[codes hi, lo] * (s2.to(bf16) * from_blocked(scales).to(bf16)) per 16 (dequantize_nvfp4)
mxfp8:  (q.float() * 2^(e - 127), e = 0 -> 0).to(bf16)               (dequantize_mxfp8)"""


def log(*a):
    print(*a, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--tar", required=True)
    args = ap.parse_args()
    import torch
    from safetensors.torch import load_file, save_file, safe_open

    torch.set_num_threads(1)
    root = os.getcwd()
    tiny = os.path.join(root, "tests/golden/dit/tiny")
    st_quant = os.path.join(root, "tests/tools/st_quant.py")
    for p in (tiny + "/comfy.safetensors", tiny + "/comfy_curve.safetensors", st_quant):
        if not os.path.exists(p):
            sys.exit(f"missing {p}: run from the repository root")
    os.makedirs(args.work, exist_ok=True)
    outdir = os.path.join(args.work, "quant")
    os.makedirs(outdir, exist_ok=True)
    subprocess.run([sys.executable, st_quant, "all", tiny + "/comfy.safetensors", args.work], check=True)
    for f in CURVE:
        subprocess.run([sys.executable, st_quant, "make", f, tiny + "/comfy_curve.safetensors",
                        f"{args.work}/curve_{f}.safetensors"], check=True)

    ck = None
    for cand in (os.path.join(root, ".ref/comfy-kitchen"), None):
        try:
            if cand:
                sys.path.insert(0, cand)
            from comfy_kitchen.backends.eager import quantization as ck  # noqa: F811
            break
        except Exception as e:  # noqa: BLE001
            log(f"comfy_kitchen not importable from {cand or 'site-packages'}: {type(e).__name__}: {e}")
            if cand:
                sys.path.remove(cand)
            ck = None
    log("reference:", "comfy_kitchen eager (" + ck.__file__ + ")" if ck else "RESTATED formulas:\n" + RESTATED)

    bf = torch.bfloat16
    lut = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])

    def hadamard(g):
        h4 = torch.tensor([[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]], dtype=torch.float32)
        h, n = h4, 4
        while n < g:
            h, n = torch.kron(h, h4), n * 4
        return h / (g ** 0.5)

    def from_blocked(b, rows, cols):  # inverse of the cuBLAS 128x4 tiled layout
        R, C = (rows + 127) // 128, (cols + 3) // 4
        t = b.reshape(-1).reshape(R * C, 32, 4, 4).transpose(1, 2).reshape(R, C, 128, 4).permute(0, 2, 1, 3)
        return t.reshape(R * 128, C * 4)[:rows, :cols]

    def restated(fmt, conf, w, sd, L):
        if fmt in ("float8_e4m3fn", "float8_e5m2"):
            return w.to(bf) * sd[L + ".weight_scale"].to(bf)
        if fmt == "int8_tensorwise":
            s = sd[L + ".weight_scale"].float()
            W = w.float() * (s if s.numel() == 1 else s.reshape(-1, 1))
            p = conf.get("params", {}) if isinstance(conf.get("params"), dict) else {}
            if conf.get("convrot", p.get("convrot", False)):
                g = int(conf.get("convrot_groupsize", p.get("convrot_groupsize", 256)))
                N, K = W.shape
                W = torch.matmul(W.reshape(N, K // g, g), hadamard(g).T).reshape(N, K)
            return W.to(bf)
        if fmt == "nvfp4":
            q = w
            codes = torch.stack([q >> 4, q & 15], dim=-1).reshape(q.shape[0], -1).long()
            vals = lut.to(bf)[codes]
            N, K = vals.shape
            bs = from_blocked(sd[L + ".weight_scale"].view(torch.uint8), N, K // 16).view(torch.float8_e4m3fn)
            total = sd[L + ".weight_scale_2"].to(bf) * bs.to(bf)
            return (vals.reshape(N, K // 16, 16) * total.unsqueeze(-1)).reshape(N, K).to(bf)
        if fmt == "mxfp8":
            N, K = w.shape
            e = from_blocked(sd[L + ".weight_scale"].view(torch.uint8), N, K // 32).to(torch.int32)
            s = torch.where(e == 0, torch.zeros_like(e), e << 23).view(torch.float32)
            return (w.float().reshape(N, K // 32, 32) * s.unsqueeze(-1)).reshape(N, K).to(bf)
        raise SystemExit("unknown format " + fmt)

    def kitchen(fmt, conf, w, sd, L):
        if fmt in ("float8_e4m3fn", "float8_e5m2"):
            return ck.dequantize_per_tensor_fp8(w, sd[L + ".weight_scale"], bf)
        if fmt == "int8_tensorwise":
            s = sd[L + ".weight_scale"]
            p = conf.get("params", {}) if isinstance(conf.get("params"), dict) else {}
            if conf.get("convrot", p.get("convrot", False)):
                g = int(conf.get("convrot_groupsize", p.get("convrot_groupsize", 256)))
                return ck.dequantize_int8_convrot_weight(w, s, g).to(bf)
            return ck.dequantize_int8_simple(w, s).to(bf)
        if fmt == "nvfp4":
            return ck.dequantize_nvfp4(w, sd[L + ".weight_scale_2"], sd[L + ".weight_scale"].view(torch.float8_e4m3fn), bf)
        if fmt == "mxfp8":
            return ck.dequantize_mxfp8(w, sd[L + ".weight_scale"], bf)  # U8 bytes: it views them as uint8 itself
        raise SystemExit("unknown format " + fmt)

    def declarations(path, sd):  # comfy/utils.py convert_old_quants, re-stated
        with safe_open(path, "pt") as f:
            meta = f.metadata() or {}
        layers = {}
        for k, v in list(sd.items()):
            if k.endswith(".comfy_quant"):
                layers[k[:-len(".comfy_quant")]] = json.loads(bytes(v.tolist()).decode())
        if "_quantization_metadata" in meta:
            for k, v in json.loads(meta["_quantization_metadata"])["layers"].items():
                layers[k] = v
        elif "scaled_fp8" in sd:
            fp = sd["scaled_fp8"].numel() == 2
            for k in list(sd):
                if k.endswith(".scale_weight"):
                    L = k[:-len(".scale_weight")]
                    sd[L + ".weight_scale"] = sd.pop(k)
                    layers[L] = {"format": "float8_e4m3fn", **({"full_precision_matrix_mult": True} if fp else {})}
                if k.endswith(".scale_input"):
                    v = sd.pop(k)
                    if v.item() != 1.0:
                        sd[k[:-len(".scale_input")] + ".input_scale"] = v
        return layers

    base = {k: v for k, v in load_file(tiny + "/comfy.safetensors").items()}
    base_curve = load_file(tiny + "/comfy_curve.safetensors")
    failures, summary = [], {"reference": "comfy_kitchen" if ck else "restated", "restated_formulas": RESTATED,
                             "torch": torch.__version__, "files": {}}
    names = FORMATS + [f"curve_{f}" for f in CURVE]
    for name in names:
        path = f"{args.work}/{name}.safetensors"
        sd = load_file(path)
        layers = declarations(path, sd)
        out, info = {}, {"sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(), "layers": len(layers)}
        ex = load_file(f"{args.work}/{name}.expect.safetensors")
        worst, exp_off = 0.0, 0
        for L, conf in sorted(layers.items()):
            fmt = conf["format"] if isinstance(conf, dict) else conf
            conf = conf if isinstance(conf, dict) else {"format": conf}
            w = sd[L + ".weight"]
            r = restated(fmt, conf, w, sd, L)
            if ck:
                k = kitchen(fmt, conf, w, sd, L)
                if not torch.equal(k.view(torch.int16), r.view(torch.int16)):
                    failures.append(f"{name} {L}: restated formula differs from comfy_kitchen's")
                r = k
            out[L + ".weight"] = r.contiguous()
            ref_w = (base_curve if name.startswith("curve_") else base)[L + ".weight"].float()
            rel = float((r.float() - ref_w).norm() / ref_w.norm())
            worst = max(worst, rel)
            if not rel <= 0.2:
                failures.append(f"{name} {L}: rel-L2 {rel:.3e} against the unquantized weight")
            e = ex[L + ".weight"]
            d = (e.view(torch.int16).int() - r.view(torch.int16).int()).abs()
            if "convrot" in name:
                tol = r.float().abs().max() * 2.0 ** -18
                bad = (d > 1) & ((e.float() - r.float()).abs() > tol)
            else:
                bad = d != 0
            exp_off += int(bad.sum())
        info.update({"worst_rel_l2_vs_unquantized": worst, "st_quant_expectation_off": exp_off})
        if exp_off:
            failures.append(f"{name}: {exp_off} elements of st_quant.py's expectation differ from the reference")
        save_file(out, f"{outdir}/{name}.ref.safetensors")
        summary["files"][name] = info
        log(f"{name:20s} {len(layers)} layers, worst rel-L2 vs unquantized {worst:.3e}, st_quant expectation off {exp_off}")
    summary["failures"] = failures
    json.dump(summary, open(f"{outdir}/summary.json", "w"), indent=1)
    with tarfile.open(args.tar, "w") as t:
        t.add(outdir, arcname="quant")
    log(f"wrote {args.tar}")
    for f in failures:
        log("FAIL", f)
    log("self-checks:", "all passed" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
