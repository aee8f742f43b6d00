#!/usr/bin/env python3
"""Golden fixtures for src/pipeline/rng.c: torch.randn on a CPU generator.

Run where PyTorch is installed (the GPU machine):

    python3 tools/golden/make_rng_fixtures.py OUTDIR

writes OUTDIR/rng_cases.json and one .bin per transform set:

    rng_avx2.bin     the PyTorch process as it starts (official x86-64 wheel:
                     AVX2 kernel, also on AVX-512 hosts)
    rng_default.bin  a child process with ATEN_CPU_CAPABILITY=default (scalar
                     normal_fill_16 with libm logf/cosf/sinf)

Each .bin is the little-endian uint32 bit patterns of every draw of every case,
concatenated in the order of rng_cases.json (draw k of a case starts at its
"offset", counted in elements).  Seeds are decimal strings (they may exceed
int64).  Each case is a fresh torch.Generator("cpu").manual_seed(seed) followed
by its draws in order on that one generator.
"""
import array
import json
import os
import platform
import subprocess
import sys


def case_list():
    cases = []
    seeds = [0, 1, 42, 2**32 + 5, 2**63 - 1]
    shapes = [[1], [2], [15], [16], [17], [31], [32], [33], [100], [1000], [4099],
              [1, 24, 2, 4, 6]]
    for s in seeds:
        for sh in shapes:
            cases.append({"name": "seed%d_%s" % (s, "x".join(map(str, sh))),
                          "seed": s, "draws": [sh]})
    # extra single draws
    cases.append({"name": "check42_5", "seed": 42, "draws": [[5]]})
    cases.append({"name": "check42_20", "seed": 42, "draws": [[20]]})
    cases.append({"name": "shape_3x5", "seed": 3, "draws": [[3, 5]]})
    cases.append({"name": "shape_2x8", "seed": 3, "draws": [[2, 8]]})
    cases.append({"name": "scalar_shape", "seed": 9, "draws": [[]]})
    cases.append({"name": "large_1x24x3x8x10", "seed": 42, "draws": [[1, 24, 3, 8, 10]]})
    cases.append({"name": "seed_2pow64m1_33", "seed": 2**64 - 1, "draws": [[33]]})
    cases.append({"name": "seed_minus1_33", "seed": -1, "draws": [[33]]})
    cases.append({"name": "seed_2pow32_33", "seed": 2**32, "draws": [[33]]})
    # multi-draw sequences on one generator
    cases.append({"name": "seq_7_50_16", "seed": 0, "draws": [[7], [50], [16]]})
    cases.append({"name": "seq_cache_across_vec", "seed": 42,
                  "draws": [[5], [20], [3], [1], [0], [33]]})
    cases.append({"name": "seq_pipeline", "seed": 123,
                  "draws": [[1, 24, 1, 4, 6], [1, 24, 1, 4, 6], [1, 24, 5, 4, 6], [414, 32]]})
    cases.append({"name": "seq_ones_then_17", "seed": 2**63 - 1, "draws": [[1]] * 17 + [[17]]})
    cases.append({"name": "seq_15_15", "seed": 7, "draws": [[15], [15], [2, 3]]})
    cases.append({"name": "seq_tails", "seed": 2024,
                  "draws": [[17], [31], [100], [4099], [1]]})
    cases.append({"name": "seq_reseed_same", "seed": 5, "draws": [[40], [40]]})
    return cases


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def generate(cases):
    """Draw every case; returns (case metadata list, uint32 array)."""
    import torch
    bits = array.array("I")
    meta = []
    for c in cases:
        g = torch.Generator("cpu")
        try:
            g.manual_seed(c["seed"])
        except Exception as e:  # seed torch refuses: record and skip
            meta.append({"name": c["name"], "seed": str(c["seed"]), "skipped": repr(e)})
            continue
        draws = []
        for sh in c["draws"]:
            t = torch.randn(tuple(sh), generator=g, dtype=torch.float32)
            assert t.is_contiguous() and t.dtype == torch.float32
            flat = t.reshape(-1).view(torch.int32).tolist()
            draws.append({"shape": list(sh), "numel": numel(sh), "offset": len(bits)})
            bits.extend(v & 0xFFFFFFFF for v in flat)
        meta.append({"name": c["name"], "seed": str(c["seed"] % 2**64),
                     "python_seed": str(c["seed"]),
                     "initial_seed": str(g.initial_seed()), "draws": draws})
    return meta, bits


def env_info():
    import torch
    info = {"torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "libc": " ".join(platform.libc_ver()),
            "machine": platform.machine(),
            "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def child_main(outdir, tag):
    """Generate one set in this process and write <tag>.bin + <tag>.json."""
    meta, bits = generate(case_list())
    assert sys.byteorder == "little"
    with open(os.path.join(outdir, "rng_%s.bin" % tag), "wb") as f:
        bits.tofile(f)
    with open(os.path.join(outdir, "rng_%s.meta.json" % tag), "w") as f:
        json.dump({"env": env_info(), "cases": meta, "total": len(bits)}, f)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--child":
        child_main(sys.argv[2], sys.argv[3])
        return
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/golden/rng"
    os.makedirs(outdir, exist_ok=True)
    sets = [("avx2", {}), ("default", {"ATEN_CPU_CAPABILITY": "default"})]
    result = {"generator": "tools/golden/make_rng_fixtures.py",
              "format": "per set: <bin> holds little-endian uint32 float32 bit patterns; "
                        "draw offsets and numel in elements",
              "sets": []}
    cases_ref = None
    for tag, extra in sets:
        env = dict(os.environ)
        env.pop("ATEN_CPU_CAPABILITY", None)
        env.update(extra)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", outdir, tag],
                       env=env, check=True)
        mpath = os.path.join(outdir, "rng_%s.meta.json" % tag)
        with open(mpath) as f:
            m = json.load(f)
        os.remove(mpath)
        if cases_ref is None:
            cases_ref = m["cases"]
        else:
            assert m["cases"] == cases_ref, "case layout differs between sets"
        result["sets"].append({"name": tag, "bin": "rng_%s.bin" % tag,
                               "transform": "libm" if tag == "default" else "avx2",
                               "env": m["env"], "total": m["total"]})
        print(tag, m["env"], m["total"], "elements")
    result["cases"] = cases_ref
    with open(os.path.join(outdir, "rng_cases.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("cases:", len(cases_ref), "skipped:", [c["name"] for c in cases_ref if "skipped" in c])


if __name__ == "__main__":
    main()
