#!/usr/bin/env python3
"""Sum Nsight Compute kernel durations (CSV of `ncu --metrics gpu__time_duration.sum --csv`)
over the DiT forward (every kernel after the last weight-fill kernel), by kernel name, and
print the kernels of one middle block in launch order (blocks delimited by the attention
kernel)."""
import csv, sys, collections

rows = []
with open(sys.argv[1], newline="") as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    ns = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "ns")
    ns *= {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1)
    rows.append((int(r["ID"]), r["Kernel Name"], r.get("Grid Size", ""), ns))
rows.sort()
last_fill = max((i for i, (_, n, _, _) in enumerate(rows) if "fill" in n.lower()), default=-1)
fwd = rows[last_fill + 1:]
short = lambda n: n.split("(")[0].split("<")[0][:90]
total = sum(r[3] for r in fwd)
print(f"forward kernels: {len(fwd)}, GPU time {total / 1e6:.1f} ms")
agg = collections.defaultdict(lambda: [0, 0.0])
for _, n, _, ns in fwd:
    agg[short(n)][0] += 1
    agg[short(n)][1] += ns
for n, (c, ns) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"{ns / 1e6:10.2f} ms {100 * ns / total:5.1f}% {c:5d}x  {n}")
att = [i for i, (_, n, _, _) in enumerate(fwd) if "attn" in n.lower() or "attention" in n.lower()]
if len(att) > 4:
    mid = len(att) // 2
    print(f"\nblock around attention call {mid} (launch order):")
    for _, n, g, ns in fwd[att[mid - 1] + 1: att[mid] + 1]:
        print(f"{ns / 1e3:10.1f} us  grid {g:>16}  {n[:140]}")
