#!/usr/bin/env bash
# LoRAs in the interactive session (through a pseudo-terminal): `h3 --lora` at start, `!lora PATH:SCALE`
# adding a second (they stack), `!loras`, `!cache` (what is applied, run time / baked, the files cached),
# `!lora-bake on`, `!lora-dir DIR` + a bare name, a bad LoRA failing only its clip, `!lora clear`.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy" HOME="$tmp/home" XDG_STATE_HOME= TERM=dumb
mkdir -p "$tmp/home" "$tmp/work" "$tmp/loras"
"$H3" generate -q -p warmup -o '' >/dev/null 2>&1   # writes the toy model once
lt="$H3_SOURCE_DIR/tests/tools/lora_tool.py"
dit="$H3_TOY_DIR/transformer/diffusion_pytorch_model.safetensors"
python3 "$lt" make good "$tmp/a.safetensors" "$dit" && python3 "$lt" make turbo "$tmp/loras/b.safetensors" "$dit" &&
  python3 "$lt" make shape "$tmp/bad.safetensors" "$dit" || { echo "FAIL lora_tool"; exit 1; }
python3 - "$H3" "$tmp" "$H3_SOURCE_DIR/tests/tools" <<'PY'
import os, re, sys
sys.path.insert(0, sys.argv[3])
from pty_session import Pty
h3, tmp = sys.argv[1], sys.argv[2]
fails = []
def ok(c, what, detail=""):
    print(("ok   " if c else "FAIL ") + what)
    if not c:
        fails.append(what)
        print(detail)

p = Pty([h3, "--device", "cpu", "--size", "64", "--steps", "2", "--lora", tmp + "/a.safetensors:0.5"],
        env=dict(os.environ), cwd=tmp + "/work")
p.expect("h3> ")
p.send("!loras\n"); out = p.expect("h3> ")
ok("a.safetensors at 0.5" in out and "at run time" in out, "!loras lists the LoRA of the command line", out)
p.send("a red fox\n"); out = p.expect("h3> ", 120)
ok("clip 1:" in out, "clip 1 with the LoRA", out)
p.send("!cache\n"); out = p.expect("h3> ")
ok(re.search(r"LoRAs\s+1 file\(s\) read.*1 on the transformer \(run time", out) is not None, "!cache: 1 LoRA, run time", out)
p.send("!lora-dir " + tmp + "/loras\n"); p.expect("h3> ")
p.send("!lora b.safetensors:-0.25\n"); p.expect("h3> ")
p.send("!lora-bake on\n"); p.expect("h3> ")
p.send("!loras\n"); out = p.expect("h3> ")
ok("b.safetensors at -0.25" in out and "baked" in out, "!lora NAME:SCALE of !lora-dir adds a second, baked", out)
p.send("a red fox\n"); out = p.expect("h3> ", 120)
ok("clip 2:" in out, "clip 2 with two LoRAs stacked, baked", out)
p.send("!cache\n"); out = p.expect("h3> ")
ok(re.search(r"2 file\(s\) read.*2 on the transformer \(baked", out) is not None, "!cache: 2 files, 2 LoRAs baked", out)
p.send("!lora " + tmp + "/bad.safetensors\n"); p.expect("h3> ")
p.send("a red fox\n"); out = p.expect("h3> ", 120)
ok("bad.safetensors" in out and "changes a [" in out and "clip 3:" not in out, "a bad LoRA fails its clip, naming the file", out)
p.send("!lora clear\n"); out = p.expect("h3> ")
ok("LoRAs cleared" in out, "!lora clear", out)
p.send("!loras\n"); out = p.expect("h3> ")
ok("no LoRA" in out, "!loras: none", out)
p.send("a red fox\n"); out = p.expect("h3> ", 120)
ok("clip 3:" in out, "the session goes on: clip 3 without LoRAs", out)
p.send("!cache\n"); out = p.expect("h3> ")
ok(re.search(r"0 on the transformer", out) is not None, "!cache: none applied", out)
p.ctrl_d()
ok(p.wait() == 0, "Ctrl-D: status 0")
sys.exit(1 if fails else 0)
PY
