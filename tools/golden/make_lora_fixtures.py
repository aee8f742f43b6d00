#!/usr/bin/env python3
"""Golden fixtures for h3's LoRAs: the diffusers MiniMax-H3 transformer with PEFT LoRAs loaded.

Run on the GPU machine (PyTorch; all computation on the CPU, float32, one thread), FROM THE REPOSITORY ROOT (it
reads the tiny DiT that the DiT fixtures ship, tests/golden/dit/tiny), with the diffusers sources on PYTHONPATH:

    PYTHONPATH=.ref/dmin/src python3 tools/golden/make_lora_fixtures.py --work /tmp/h3lora --tar OUT.tar

then unpack here: `tar -xf OUT.tar -C tests/golden/` (the tar holds `lora/...`, well under 1 MB).

What it does:

1. builds `diffusers.MiniMaxH3Transformer3DModel` from tests/golden/dit/tiny/diffusers (config.json + the two
   shards, loaded strictly, float32) and checks that it reproduces the committed f32 DiT outputs of the `t2va` and
   `fl2va` cases (tests/golden/dit/tiny/<case>.out.f32.safetensors) from their committed inputs: a hard check that
   this is the model h3's test loads;
2. writes two LoRA files in the diffusers layout (`transformer.<module>.lora_A.weight` [r, in] /
   `.lora_B.weight` [out, r], float32, seeded random values, B non-zero):
   - `lora_alpha.safetensors`: every nn.Linear of the model (blocks, token refiner, input / time / output
     projections, AdaLN), default rank 4 with lora_alpha 8 and a rank_pattern (to_v: 2, ff.net.2: 6,
     adaln_proj.linear: 3) and an alpha_pattern (ff.net.0.proj: 16, refiner_blocks.1.attn.to_out.0: 3), carried
     as diffusers writes it: `__metadata__["lora_adapter_metadata"]` = JSON of the LoraConfig with `transformer.`
     prefixed keys;
   - `lora_noalpha.safetensors`: a subset (the attention and SwiGLU input Linears of every block and refiner
     block, context_embedder, audio_proj_in, proj_out), ranks 3 and 5 mixed (to_k and ff.net.0.proj: 5), NO
     alpha anywhere: diffusers then runs every module at alpha == rank (scale 1);
3. reference outputs (`sample`, `audio_sample`, float32) per case x input:
   `alpha` (lora_alpha at strength 0.8), `noalpha` (lora_noalpha at 1.0), `stack` (lora_alpha at 0.7 and
   lora_noalpha at -0.6 together), each on the `t2va` and `fl2va` inputs;
   two ways, and the script says which it took:
   - PEFT path (when `import peft` works): `model.load_lora_adapter(folder, weight_name=FILE, prefix="transformer",
     adapter_name=...)` — diffusers' own reading of the file, metadata included — then
     `model.set_adapters(names, weights=strengths)` and the forward;
   - merge path (always): the documented PEFT formula applied to a copy of the state dict,
     W' = W + sum_i strength_i * (alpha_i / r_i) * B_i @ A_i (float64, rounded to float32 once), and the plain
     model's forward;
   with PEFT present the PEFT outputs are written and the two must agree (rel-L2 <= 1e-5, else FAIL); without it
   the merge outputs are written (summary.json `reference_path` says which);
4. self-checks: every LoRA changes the output (rel-L2 against the base > 1e-2), strength 0 of the PEFT path gives
   the base output back, the rank / alpha patterns resolve the same under both regular-expression forms peft has
   used (so the result does not depend on the peft version).

Outputs under <work>/lora/tiny/: lora_alpha.safetensors, lora_noalpha.safetensors, <case>_<input>.out.f32.safetensors,
cases.json (per case: the LoRA files and strengths, the input file under tests/golden/dit/tiny, rel-L2 of the two
paths), summary.json, MANIFEST.md.  Checked by tests/unit/test_lora_golden.c (skipped until present).

This file is our own code; the reference is only imported and called.  Exit status 1 on any failed check (the tar
is still written, so the log and the data come back).
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import argparse
import json
import math
import re
import shutil
import sys
import tarfile
import traceback

FAILURES = []
NOTES = []


def log(msg):
    print(msg, flush=True)


def fail(msg):
    log("FAIL: " + msg)
    FAILURES.append(msg)


def note(msg):
    log("NOTE: " + msg)
    NOTES.append(msg)


try:
    import torch
    import torch.nn as nn
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
except Exception as e:  # noqa: BLE001
    log(f"FAIL: torch / safetensors import: {e!r}")
    sys.exit(1)

try:
    import diffusers
    from diffusers import MiniMaxH3Transformer3DModel
except Exception as e:  # noqa: BLE001
    log(f"FAIL: diffusers import (PYTHONPATH must hold the diffusers src, e.g. .ref/dmin/src): {e!r}")
    sys.exit(1)

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def math_sdpa():
        return sdpa_kernel(SDPBackend.MATH)
except Exception:  # noqa: BLE001
    import contextlib

    def math_sdpa():
        return contextlib.nullcontext()


DIT_DIR = os.path.join("tests", "golden", "dit", "tiny")
INPUTS = ["t2va", "fl2va"]
INPUT_NAMES = [
    "hidden_states",
    "audio_hidden_states",
    "encoder_hidden_states",
    "timestep",
    "timestep_indices",
    "token_tags",
    "position_ids",
    "video_indices",
    "audio_indices",
    "text_indices",
]

# LoRA definitions.  Pattern keys always follow a '.' in the module names they match and never overlap, so peft's
# two regular-expression forms (r"(.*\.)?(KEY)$" and the older r".*\.KEY$") give the same result.
LORA_ALPHA = {
    "file": "lora_alpha.safetensors",
    "seed": 7001,
    "r": 4,
    "lora_alpha": 8.0,
    "rank_pattern": {"attn.to_v": 2, "ff.net.2": 6, "adaln_proj.linear": 3},
    "alpha_pattern": {"ff.net.0.proj": 16.0, "refiner_blocks.1.attn.to_out.0": 3.0},
    "metadata": True,
}
LORA_NOALPHA = {
    "file": "lora_noalpha.safetensors",
    "seed": 7002,
    "r": 3,
    "rank_pattern": {"attn.to_k": 5, "ff.net.0.proj": 5},
    "metadata": False,
}
NOALPHA_TARGETS = re.compile(r"(.*\.attn\.to_(q|k|v|out\.0)|.*\.ff\.net\.0\.proj|context_embedder|audio_proj_in|proj_out)$")

CASES = {
    "alpha": [(LORA_ALPHA, 0.8)],
    "noalpha": [(LORA_NOALPHA, 1.0)],
    "stack": [(LORA_ALPHA, 0.7), (LORA_NOALPHA, -0.6)],
}


def rel_l2(a, b):
    a = a.double()
    b = b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def own(t):
    return t.detach().contiguous().clone()


def pattern_new(keys, name):
    for k in keys:
        if re.match(rf"(.*\.)?({k})$", name):
            return k
    return None


def pattern_old(keys, name):
    for k in keys:
        if re.match(rf".*\.{k}$", name):
            return k
    return None


def module_rank_alpha(lora, name):
    """(rank, alpha) of module `name` under the LoRA's config, as peft resolves rank_pattern / alpha_pattern."""
    rp = lora.get("rank_pattern", {})
    ap = lora.get("alpha_pattern", {})
    kr, kr_old = pattern_new(rp, name), pattern_old(rp, name)
    ka, ka_old = pattern_new(ap, name), pattern_old(ap, name)
    if kr != kr_old or ka != ka_old:
        fail(f"{lora['file']}: the pattern keys resolve differently under peft's two regex forms for {name}")
    r = rp[kr] if kr else lora["r"]
    if lora["metadata"]:
        alpha = ap[ka] if ka else lora["lora_alpha"]
    else:
        alpha = float(r)  # no alpha in the file: diffusers runs every module at alpha == rank
    return r, float(alpha)


def linear_modules(model):
    return [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear)]


def make_lora(model, lora, folder):
    """Writes the LoRA file; returns {module: (A f32 [r, in], B f32 [out, r], scale alpha/r)}."""
    gen = torch.Generator().manual_seed(lora["seed"])
    factors = {}
    tensors = {}
    for name, mod in linear_modules(model):
        if not lora["metadata"] and not NOALPHA_TARGETS.match(name):
            continue
        r, alpha = module_rank_alpha(lora, name)
        a = torch.randn((r, mod.in_features), generator=gen, dtype=torch.float32) / math.sqrt(mod.in_features)
        b = torch.randn((mod.out_features, r), generator=gen, dtype=torch.float32) * (0.2 / math.sqrt(r))
        factors[name] = (a, b, alpha / r)
        tensors[f"transformer.{name}.lora_A.weight"] = own(a)
        tensors[f"transformer.{name}.lora_B.weight"] = own(b)
    meta = {"format": "pt"}
    if lora["metadata"]:
        cfg = {
            "r": lora["r"],
            "lora_alpha": lora["lora_alpha"],
            "rank_pattern": lora["rank_pattern"],
            "alpha_pattern": lora["alpha_pattern"],
            "target_modules": sorted(factors),
            "lora_dropout": 0.0,
        }
        meta["lora_adapter_metadata"] = json.dumps({f"transformer.{k}": v for k, v in cfg.items()}, indent=2,
                                                   sort_keys=True)
    path = os.path.join(folder, lora["file"])
    save_file(tensors, path, metadata=meta)
    ranks = sorted({f[0].shape[0] for f in factors.values()})
    log(f"  {lora['file']}: {len(factors)} modules, ranks {ranks}, {os.path.getsize(path)} bytes, "
        f"metadata {'yes' if lora['metadata'] else 'no'}")
    if len(ranks) < 2:
        fail(f"{lora['file']}: not mixed ranks ({ranks})")
    return factors


def load_base():
    with open(os.path.join(DIT_DIR, "diffusers", "config.json")) as f:
        cfg = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    with open(os.path.join(DIT_DIR, "diffusers", "diffusion_pytorch_model.safetensors.index.json")) as f:
        index = json.load(f)
    sd = {}
    for shard in sorted(set(index["weight_map"].values())):
        sd.update(load_file(os.path.join(DIT_DIR, "diffusers", shard)))
    sd = {k: v.float() for k, v in sd.items()}
    return cfg, sd


def build(cfg, sd):
    m = MiniMaxH3Transformer3DModel(**cfg)
    m.load_state_dict(sd, strict=True)
    return m.float().eval()


def read_inputs(name):
    path = os.path.join(DIT_DIR, f"{name}.in.safetensors")
    t = load_file(path)
    missing = [k for k in INPUT_NAMES if k not in t]
    if missing:
        raise RuntimeError(f"{path}: missing {missing}")
    return {k: t[k] for k in INPUT_NAMES}


def forward(model, inputs):
    with torch.no_grad(), math_sdpa():
        out = model(**inputs, return_dict=True)
    return {"sample": own(out.sample.float()), "audio_sample": own(out.audio_sample.float())}


def out_rel(a, b):
    return max(rel_l2(a["sample"], b["sample"]), rel_l2(a["audio_sample"], b["audio_sample"]))


def merged_state_dict(sd, uses):
    out = {k: v.clone() for k, v in sd.items()}
    for factors, strength in uses:
        for name, (a, b, scale) in factors.items():
            key = f"{name}.weight"
            if key not in out:
                raise RuntimeError(f"merge: {key} not in the state dict")
            out[key] = out[key].double() + strength * scale * (b.double() @ a.double())
    return {k: v.float().contiguous() for k, v in out.items()}


def peft_outputs(cfg, sd, folder, inputs):
    """Outputs of every case through diffusers' load_lora_adapter + set_adapters; None when peft is unusable."""
    try:
        import peft  # noqa: F401
    except Exception as e:  # noqa: BLE001
        note(f"peft is not importable ({e!r}): the reference is the merged state dict (PEFT formula)")
        return None, None
    log(f"peft {getattr(peft, '__version__', '?')} from {os.path.dirname(peft.__file__)}")
    try:
        model = build(cfg, sd)
        for lora in (LORA_ALPHA, LORA_NOALPHA):
            model.load_lora_adapter(folder, weight_name=lora["file"], prefix="transformer",
                                    adapter_name=lora["file"].split(".")[0])
        # what peft made of the files: per module rank and scaling, against our own definitions
        from peft.tuners.lora import LoraLayer

        checked = 0
        for name, mod in model.named_modules():
            if not isinstance(mod, LoraLayer):
                continue
            for lora in (LORA_ALPHA, LORA_NOALPHA):
                ad = lora["file"].split(".")[0]
                if ad not in mod.r:
                    continue
                r, alpha = module_rank_alpha(lora, name)
                if mod.r[ad] != r or abs(mod.lora_alpha[ad] - alpha) > 1e-9:
                    fail(f"peft read {lora['file']} {name} as r {mod.r[ad]} alpha {mod.lora_alpha[ad]}, "
                         f"expected r {r} alpha {alpha}")
                checked += 1
        log(f"  peft layers checked against the definitions: {checked}")
        outs = {}
        for cname, uses in CASES.items():
            names = [l["file"].split(".")[0] for l, _ in uses]
            model.set_adapters(names, weights=[s for _, s in uses])
            for iname, inp in inputs.items():
                outs[(cname, iname)] = forward(model, inp)
        model.set_adapters([LORA_ALPHA["file"].split(".")[0]], weights=[0.0])
        zero = {iname: forward(model, inp) for iname, inp in inputs.items()}
        return outs, zero
    except Exception:  # noqa: BLE001
        note("the PEFT path raised (the merge path is the reference):\n" + traceback.format_exc())
        return None, None


def write_manifest(root, summary):
    lines = [
        "# LoRA golden fixtures (tools/golden/make_lora_fixtures.py)",
        "",
        f"Reference path: **{summary['reference_path']}**; torch {summary['torch']}, diffusers {summary['diffusers']}, "
        f"peft {summary['peft']}.",
        "",
        "Base model and inputs: tests/golden/dit/tiny (diffusers folder, `<input>.in.safetensors`).",
        "",
        "| case | input | LoRAs (file @ strength) | rel-L2 vs base | PEFT vs merge |",
        "|---|---|---|---|---|",
    ]
    for key, c in sorted(summary["cases"].items()):
        loras = ", ".join(f"{l['file']} @ {l['strength']}" for l in c["loras"])
        pm = c.get("peft_vs_merge")
        lines.append(f"| {c['case']} | {c['input']} | {loras} | {c['rel_l2_vs_base']:.3e} | "
                     f"{'-' if pm is None else f'{pm:.2e}'} |")
    lines += ["", f"Failures: {len(summary['failures'])}; notes: {len(summary['notes'])}.", ""]
    with open(os.path.join(root, "MANIFEST.md"), "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/h3_lora_golden", help="where the lora/ tree is written")
    ap.add_argument("--tar", default=None, help="optional tar file to pack the lora/ tree into")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.set_num_threads(1)
    log(f"torch {torch.__version__}, diffusers {diffusers.__version__} from {os.path.dirname(diffusers.__file__)}")
    if not os.path.isdir(DIT_DIR):
        log(f"FAIL: {DIT_DIR} not found: run from the repository root")
        return 1

    root = os.path.join(args.work, "lora")
    folder = os.path.join(root, "tiny")
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(folder)
    summary = {"torch": torch.__version__, "diffusers": diffusers.__version__, "peft": None, "cases": {}}
    try:
        import peft

        summary["peft"] = getattr(peft, "__version__", "?")
    except Exception:  # noqa: BLE001
        pass

    try:
        log("1. base model from " + DIT_DIR)
        cfg, sd = load_base()
        base = build(cfg, sd)
        inputs = {n: read_inputs(n) for n in INPUTS}
        base_out = {}
        for n, inp in inputs.items():
            base_out[n] = forward(base, inp)
            ref = load_file(os.path.join(DIT_DIR, f"{n}.out.f32.safetensors"))
            r = out_rel(base_out[n], ref)
            log(f"  {n}: base vs committed DiT fixture rel-L2 {r:.3e}")
            if not (r <= 1e-5):
                fail(f"{n}: the base model does not reproduce {DIT_DIR}/{n}.out.f32.safetensors ({r:.3e})")

        log("2. LoRA files")
        factors = {LORA_ALPHA["file"]: make_lora(base, LORA_ALPHA, folder),
                   LORA_NOALPHA["file"]: make_lora(base, LORA_NOALPHA, folder)}
        # the files hold what we meant
        for lora in (LORA_ALPHA, LORA_NOALPHA):
            with safe_open(os.path.join(folder, lora["file"]), "pt") as f:
                keys = set(f.keys())
                meta = f.metadata() or {}
            if len(keys) != 2 * len(factors[lora["file"]]):
                fail(f"{lora['file']}: {len(keys)} tensors written")
            if lora["metadata"] != ("lora_adapter_metadata" in meta):
                fail(f"{lora['file']}: lora_adapter_metadata presence wrong")

        log("3a. merge path (PEFT formula on a copy of the state dict)")
        merge = {}
        for cname, uses in CASES.items():
            m = build(cfg, merged_state_dict(sd, [(factors[l["file"]], s) for l, s in uses]))
            for iname, inp in inputs.items():
                merge[(cname, iname)] = forward(m, inp)

        log("3b. PEFT path (diffusers load_lora_adapter + set_adapters)")
        peft_out, zero = peft_outputs(cfg, sd, folder, inputs)
        path = "peft (diffusers load_lora_adapter)" if peft_out is not None else "merged state dict (PEFT formula)"
        summary["reference_path"] = path
        log(f"reference path: {path}")
        if zero is not None:
            for n in INPUTS:
                r = out_rel(zero[n], base_out[n])
                log(f"  strength 0 vs base ({n}): {r:.3e}")
                if not (r <= 1e-6):
                    fail(f"strength 0 through peft differs from the base model by {r:.3e} ({n})")

        cases_json = {}
        for (cname, iname), mo in merge.items():
            out = peft_out[(cname, iname)] if peft_out is not None else mo
            key = f"{cname}_{iname}"
            rb = out_rel(out, base_out[iname])
            pm = out_rel(peft_out[(cname, iname)], mo) if peft_out is not None else None
            log(f"  {key:16s} vs base {rb:.3e}" + ("" if pm is None else f"   peft vs merge {pm:.3e}"))
            if not (rb > 1e-2):
                fail(f"{key}: the LoRA barely changes the output ({rb:.3e})")
            if pm is not None and not (pm <= 1e-5):
                fail(f"{key}: peft and the merge formula disagree ({pm:.3e})")
            save_file(out, os.path.join(folder, f"{key}.out.f32.safetensors"))
            entry = {
                "case": cname,
                "input": iname,
                "input_file": f"tests/golden/dit/tiny/{iname}.in.safetensors",
                "output_file": f"{key}.out.f32.safetensors",
                "loras": [{"file": l["file"], "strength": s} for l, s in CASES[cname]],
                "rel_l2_vs_base": rb,
                "peft_vs_merge": pm,
            }
            cases_json[key] = entry
            summary["cases"][key] = entry
        with open(os.path.join(folder, "cases.json"), "w") as f:
            json.dump({"reference_path": path, "cases": cases_json}, f, indent=2, sort_keys=True)
    except Exception:  # noqa: BLE001
        fail("raised:\n" + traceback.format_exc())
        summary.setdefault("reference_path", "none (failed)")

    summary["notes"] = NOTES
    summary["failures"] = FAILURES
    with open(os.path.join(folder, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    try:
        write_manifest(folder, summary)
    except Exception:  # noqa: BLE001
        fail("manifest:\n" + traceback.format_exc())
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    log(f"wrote {root}: {total} bytes")
    if total > 2_000_000:
        fail(f"outputs are {total} bytes (over 2 MB)")
    if args.tar:
        with tarfile.open(args.tar, "w") as tf:
            tf.add(root, arcname="lora")
        log(f"packed into {args.tar} ({os.path.getsize(args.tar)} bytes)")
    log(f"failures: {len(FAILURES)}; notes: {len(NOTES)}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
