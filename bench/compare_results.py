#!/usr/bin/env python3
"""Side-by-side table of bench/dit_bench (ours) and bench/reference_bench.py (diffusers) results.

    python3 bench/compare_results.py --ours ours.json --reference reference.json [--out table.md]

Either JSON may be missing or partial (a run that failed or was cut short): its columns then read "-" and the
status says why. The floor is FLOPs at the GEMM rate our backend's linear measured (8192^3 bf16), or at torch's
matmul rate when ours has none. Standard library only.
"""

import argparse
import json
import sys


def load(path):
    if not path:
        return None, "not given"
    try:
        with open(path) as fh:
            return json.load(fh), None
    except FileNotFoundError:
        return None, "no result file"
    except Exception as e:  # noqa: BLE001 - a truncated file, say
        return None, f"unreadable: {type(e).__name__}: {e}"


def num(x):
    return x if isinstance(x, (int, float)) and x == x else None  # None for null and NaN


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours")
    ap.add_argument("--reference")
    ap.add_argument("--out")
    args = ap.parse_args()
    ours, ours_err = load(args.ours)
    ref, ref_err = load(args.reference)

    lines = []
    gpu = (ours or {}).get("gpu") or (ref or {}).get("gpu") or "?"
    our_gemm = num(((ours or {}).get("gemm") or {}).get("tflops"))
    ref_gemm = num(((ref or {}).get("gemm") or {}).get("tflops"))
    rate, rate_src = (our_gemm, "h3 linear") if our_gemm else (ref_gemm, "torch matmul") if ref_gemm else (None, None)
    lines.append(f"DiT forward, bf16 (fp32 islands), one {gpu}; K = 2 timesteps, 256 text rows; median of timed forwards")
    lines.append(
        f"GEMM 8192^3 bf16: h3 linear {fmt(our_gemm, '.1f')} TFLOP/s, torch matmul {fmt(ref_gemm, '.1f')} TFLOP/s; "
        f"floor = FLOPs at {fmt(rate, '.1f')} TFLOP/s ({rate_src or 'no GEMM rate'})"
    )
    if ours_err or (ours and ours.get("status", "ok") != "ok"):
        lines.append(f"ours: {ours_err or ours.get('status')}")
    if ref_err or (ref and ref.get("status") != "ok"):
        lines.append(f"reference: {ref_err or ref.get('status')}")
    lines.append("")
    lines.append(
        "| shape | S | PFLOP | ours s | reference s | ours/reference | floor s | ours TFLOP/s | reference TFLOP/s | notes |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|")

    names = []
    for src in (ours, ref):
        for e in (src or {}).get("shapes", []):
            if e.get("shape") not in names:
                names.append(e.get("shape"))
    by = lambda src: {e.get("shape"): e for e in (src or {}).get("shapes", [])}  # noqa: E731
    o_by, r_by = by(ours), by(ref)
    for name in names:
        o, r = o_by.get(name, {}), r_by.get(name, {})
        notes = []
        o_ok, r_ok = o.get("status") == "ok", r.get("status") == "ok"
        if o and not o_ok:
            notes.append(f"ours: {o.get('status')}")
        if r and not r_ok:
            notes.append(f"reference: {r.get('status')}")
        if o_ok and r_ok and o.get("S") != r.get("S"):
            notes.append(f"S differs: ours {o.get('S')}, reference {r.get('S')}")
        if o_ok and o.get("median_from_warmup"):
            notes.append("ours: warm-up only")
        if r_ok and r.get("median_from_warmup"):
            notes.append("reference: warm-up only")
        if o_ok and o.get("nonfinite_outputs"):
            notes.append(f"ours: {o.get('nonfinite_outputs')} non-finite outputs")
        if r_ok and r.get("outputs_finite") is False:
            notes.append("reference: non-finite outputs")
        if o_ok and r_ok:
            notes.append(f"n = {len(o.get('times_s') or [])} / {len(r.get('times_s') or [])}")
        S = o.get("S") or r.get("S")
        flops = num(o.get("flops")) or num(r.get("flops"))
        ot = num(o.get("median_s")) if o_ok else None
        rt = num(r.get("median_s")) if r_ok else None
        ratio = ot / rt if ot and rt else None
        floor = flops / (rate * 1e12) if flops and rate else None
        otf = num(o.get("tflops")) if o_ok else None
        rtf = num(r.get("tflops")) if r_ok else None
        lines.append(
            f"| {name} | {S if S else '-'} | {fmt(flops / 1e15 if flops else None, '.3f')} | {fmt(ot, '.3f')} | "
            f"{fmt(rt, '.3f')} | {fmt(ratio, '.2f')} | {fmt(floor, '.3f')} | {fmt(otf, '.0f')} | {fmt(rtf, '.0f')} | "
            f"{'; '.join(notes)} |"
        )
    if not names:
        lines.append("| (no results) | | | | | | | | | |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
