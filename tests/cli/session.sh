#!/usr/bin/env bash
# The interactive session through a pseudo-terminal (tests/tools/pty_session.py): two prompts, a
# seed change, !status, Ctrl-C in the middle of a clip, another clip, Ctrl-D.  The clips are in the
# session folder, the second one's load and encode phases are ~0 s (resident models, cached prompt),
# the cancelled one left nothing, then !first: a missing file refused, two clips from a keyframe (the
# second one's keyframe and prompt cached), !first clear; the history file has the lines.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy" HOME="$tmp/home" XDG_STATE_HOME= TERM=dumb
mkdir -p "$tmp/home" "$tmp/work"
"$H3" generate -q -p warmup -o '' >/dev/null 2>&1   # writes the toy model once
python3 - "$H3" "$tmp/work" "$H3_SOURCE_DIR/tests/tools" <<'PY'
import os, re, sys
sys.path.insert(0, sys.argv[3])
from pty_session import Pty
h3, work = sys.argv[1], sys.argv[2]
fails = []
def ok(c, what):
    print(("ok   " if c else "FAIL ") + what)
    if not c:
        fails.append(what)

p = Pty([h3, "--device", "cpu", "--size", "128"], env=dict(os.environ), cwd=work)
banner = p.expect("h3> ")
m = re.search(r"clips go to (\S+)/", banner)
ok(m is not None, "the session folder is printed at start")
folder = os.path.join(work, m.group(1)) if m else ""
p.send("a red fox\n");   out1 = p.expect("h3> ", 120)
ok("clip 1:" in out1, "a prompt line makes clip 1")
p.send("!seed 5\n");     out = p.expect("h3> ")
ok("seed = 5" in out, "!seed 5")
p.send("a red fox\n");   out2 = p.expect("h3> ", 120)
ok("clip 2:" in out2 and "(seed 5)" in out2, "clip 2 with seed 5")
def phase(text, name):
    m = re.search(r"^\s*%s\s+([0-9.]+)\s" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None
load1, load2, enc2 = phase(out1, "load"), phase(out2, "load"), phase(out2, "encode")
print("clip 1 load %s s; clip 2 load %s s, encode %s s" % (load1, load2, enc2))
ok(load2 is not None and load2 < 0.02, "clip 2: load ~0 s (models resident)")
ok(enc2 is not None and enc2 < 0.02 and "prompt cached" in out2, "clip 2: encode ~0 s (the prompt cached)")
p.send("!status\n");     out = p.expect("h3> ")
ok("2 clip(s)" in out and "seed           5" in out, "!status")
p.send("!steps 400\n");  p.expect("h3> ")
p.send("a long one\n")
p.expect("step 2/399", 120)
p.ctrl_c()
out = p.expect("h3> ", 60)
ok("cancelled" in out, "Ctrl-C cancels the clip in progress")
p.send("!steps 3\n");    p.expect("h3> ")
p.send("another clip\n"); out = p.expect("h3> ", 120)
ok("clip 3:" in out, "the session goes on after a cancel: clip 3")
# keyframes: !first is checked when set, kept for the following clips, and its preparation cached
import struct, zlib
def png(path, w, h):
    raw = b"".join(b"\0" + bytes((x * 3 + y * 5 + c * 85) % 256 for x in range(w) for c in range(3)) for y in range(h))
    ch = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + ch(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                           + ch(b"IDAT", zlib.compress(raw)) + ch(b"IEND", b""))
kfa = os.path.join(work, "kfa.png")
png(kfa, 96, 64)
p.send("!first %s\n" % os.path.join(work, "none.png")); out = p.expect("h3> ")
ok("h3: error: !first" in out and "No such file" in out, "!first with a missing file: one error line")
p.send("!first\n"); out = p.expect("h3> ")
ok("first keyframe: none" in out, "the missing file was not taken")
p.send("!first %s\n" % kfa); out = p.expect("h3> ")
ok("first keyframe = %s (96x64)" % kfa in out, "!first PATH")
p.send("from a keyframe\n"); out4 = p.expect("h3> ", 120)
p.send("from a keyframe\n"); out5 = p.expect("h3> ", 120)
enc5 = phase(out5, "encode")
print("clip 4 encode %s s; clip 5 encode %s s" % (phase(out4, "encode"), enc5))
ok("clip 4:" in out4 and "clip 5:" in out5, "clips 4 and 5 from the keyframe")
ok(enc5 is not None and enc5 < 0.05 and "(prompt and keyframes cached)" in out5, "clip 5: the keyframe and prompt cached (encode ~0 s)")
p.send("!first clear\n"); out = p.expect("h3> ")
ok("first keyframe cleared" in out, "!first clear")
p.ctrl_d()
rc = p.wait()
ok(rc == 0, "Ctrl-D leaves with status 0 (%s)" % rc)
ok(b"session ended: 5 clip(s)" in p.log, "5 clips reported at the end")
files = sorted(os.listdir(folder)) if folder and os.path.isdir(folder) else []
print("session folder:", files)
ok(files == ["001-a-red-fox.mp4", "002-a-red-fox.mp4", "003-another-clip.mp4", "004-from-a-keyframe.mp4",
             "005-from-a-keyframe.mp4"], "the five clips, nothing else")
hist = os.path.join(os.environ["HOME"], ".local/state/h3/history")
text = open(hist).read().replace("\\040", " ") if os.path.exists(hist) else ""  # libedit escapes blanks
ok("a red fox" in text and "!seed 5" in text and "another clip" in text, "the history file")
sys.exit(1 if fails else 0)
PY
