#!/usr/bin/env python3
"""Side-by-side markdown table of bench/vae_bench.c runs (ours, one JSON per precision) and
bench/reference_vae_bench.py (the diffusers reference), for bench/run_vae_bench.sh.

    python3 bench/compare_vae_results.py --ours ours_bf16.json [--ours ours_f32.json ...]
        --reference reference.json --out vae_table.md

Missing or failed runs show as a row with their status, so a partial run still gives a table.
"""

import argparse
import json
import os

TARGET = 0.25  # issue 5: ours / reference <= 0.25


def load(path):
    if not path or not os.path.exists(path):
        return None, f"no result ({path or 'not given'})"
    try:
        with open(path) as fh:
            return json.load(fh), None
    except (OSError, ValueError) as e:
        return None, f"unreadable {path}: {e}"


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def gb(v):
    return "—" if v is None else f"{v / 1e9:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours", action="append", default=[], help="a vae_bench JSON (repeatable)")
    ap.add_argument("--reference", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    ref, ref_err = load(args.reference)
    ref_s = ref.get("median_s") if ref and str(ref.get("status", "")).startswith("ok") else None
    lines = []
    shape = (ref or {}).get("shape")
    gpu = (ref or {}).get("gpu")
    for p in args.ours:
        o, _ = load(p)
        if o:
            shape = shape or o.get("shape")
            gpu = gpu or o.get("gpu")
    lines.append(f"### Video VAE decode, h3 vs the diffusers reference — {shape or '?'} on {gpu or '?'}")
    lines.append("")
    if ref:
        lines.append(
            f"Decode of latents {ref.get('latent_shape')}: {ref.get('windows')} windows x "
            f"{'x'.join(str(t) for t in ref.get('tiles') or [])} tiles = {ref.get('decoder_calls')} decoder calls of "
            f"{ref.get('tokens_per_call')} tokens, {fmt((ref.get('flops') or 0) / 1e15, '.3f')} PFLOP. "
            f"Reference: {ref.get('precision')}, tiling {ref.get('tiling')}."
        )
        lines.append("")
    lines.append(
        "| engine | precision | warm-up | timed runs | median s | ours / reference | TFLOP/s | peak GPU GB (device-wide) "
        "| GPU GB before decode | status |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|")

    def row(name, d, err, ratio):
        if d is None:
            lines.append(f"| {name} | — | — | — | — | — | — | — | — | {err} |")
            return
        times = d.get("times_s") or []
        warm = d.get("warmup") or "?"
        if d.get("warmup_s") is not None:
            warm += f" {d['warmup_s']:.2f} s"
        med = d.get("median_s")
        note = " (warm-up)" if d.get("median_from_warmup") else ""
        extra = ""
        if d.get("nonfinite_outputs"):
            extra = f"; {d['nonfinite_outputs']} NON-FINITE outputs"
        lines.append(
            f"| {name} | {d.get('dtype') or d.get('precision', '?')} | {warm} | {len(times)} | {fmt(med, '.3f')}{note} "
            f"| {ratio} | {fmt(d.get('tflops'), '.1f')} | {gb(d.get('peak_device_used_bytes'))} "
            f"| {gb(d.get('device_used_before_bytes'))} | {d.get('status', '?')}{extra} |"
        )

    for p in args.ours:
        o, err = load(p)
        ratio = "—"
        if o and ref_s and o.get("median_s") and str(o.get("status", "")).startswith("ok"):
            r = o["median_s"] / ref_s
            ratio = f"**{r:.3f}**" + (" ✓" if r <= TARGET else "")
        row(f"h3 ({os.path.basename(p)})", o, err, ratio)
    row("diffusers", ref, ref_err, "1")
    lines.append("")
    if ref:
        lines.append(
            f"Reference allocator peaks: max_memory_allocated {gb(ref.get('torch_max_allocated_bytes'))} GB, "
            f"max_memory_reserved {gb(ref.get('torch_max_reserved_bytes'))} GB; frames to host (not timed) "
            f"{fmt(ref.get('to_host_s'), '.3f')} s. Ours times host latents -> clamped f32 frames in host memory."
        )
    lines.append(f"Target (issue 5): ours / reference <= {TARGET}.")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
