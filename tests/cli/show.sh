#!/usr/bin/env bash
# --show: on a graphical terminal (kitty's protocol, iTerm2's inline images; told from the
# environment) one preview after every denoising step and the final frames, decoded back here into
# PNGs of the right size; on a terminal that shows no images, no escape sequences at all.  Through a
# pseudo-terminal (tests/tools/pty_session.py), as a user runs it.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export H3_TOY_DIR="$tmp/toy"
"$H3" generate -q -p warmup -o '' >/dev/null 2>&1
python3 - "$H3" "$tmp" "$H3_SOURCE_DIR/tests/tools" <<'PY'
import base64, os, re, struct, sys, zlib
sys.path.insert(0, sys.argv[3])
from pty_session import Pty
h3, tmp = sys.argv[1], sys.argv[2]
fails = []
def ok(c, what):
    print(("ok   " if c else "FAIL ") + what)
    if not c:
        fails.append(what)

def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    w, h = struct.unpack(">II", data[16:24])
    # every chunk's CRC: the image is whole
    i = 8
    while i < len(data):
        n = struct.unpack(">I", data[i:i + 4])[0]
        typ, body, crc = data[i + 4:i + 8], data[i + 8:i + 8 + n], struct.unpack(">I", data[i + 8 + n:i + 12 + n])[0]
        assert zlib.crc32(typ + body) == crc, "bad chunk CRC"
        i += 12 + n
    return w, h

def run(env_extra, args, out="show.mp4"):
    env = {k: v for k, v in os.environ.items() if k not in ("KITTY_WINDOW_ID", "TERM_PROGRAM", "LC_TERMINAL",
                                                          "GHOSTTY_RESOURCES_DIR", "WEZTERM_EXECUTABLE")}
    env.update(env_extra)
    p = Pty([h3, "generate", "--device", "cpu", "-p", "a red fox", "--size", "128", "--steps", "4",
             "--seed", "1", "-o", os.path.join(tmp, out)] + args, env=env, cwd=tmp)
    rc = p.wait(120)
    return rc, p.log

# kitty: ESC _ G <keys> ; <base64> ESC \   (chunks: m=1 while more follow)
rc, log = run({"TERM": "xterm-kitty"}, ["--show"], "with.mp4")
ok(rc == 0, "kitty: generate --show exits 0 (%s)" % rc)
images, cur = [], b""
for keys, payload in re.findall(rb"\x1b_G([^;]*);([A-Za-z0-9+/=]*)\x1b\\", log):
    cur += payload
    if b"m=1" not in keys.split(b","):
        images.append(base64.b64decode(cur)); cur = b""
sizes = [png_size(d) for d in images]
print("kitty images:", sizes)
ok(len(images) == 4, "kitty: 3 steps + the final frames = 4 images (%d)" % len(images))
ok(all(s == (128, 128) for s in sizes), "kitty: each 128x128 (the canvas, under the 256 preview width)")
ok(b"a=T,f=100" in log, "kitty: transmit-and-display PNG")

# iTerm2: ESC ] 1337 ; File=...:<base64> BEL, with --zoom 2
rc, log = run({"TERM": "xterm-256color", "TERM_PROGRAM": "iTerm.app"}, ["--show", "--zoom", "2"])
ok(rc == 0, "iTerm2: generate --show exits 0 (%s)" % rc)
found = re.findall(rb"\x1b\]1337;File=([^:]*):([A-Za-z0-9+/=]*)\x07", log)
sizes = [png_size(base64.b64decode(b)) for _, b in found]
print("iTerm2 images:", sizes)
ok(len(found) == 4, "iTerm2: 4 images (%d)" % len(found))
ok(all(s == (256, 256) for s in sizes), "iTerm2: --zoom 2 doubles them to 256x256")
ok(all(b"inline=1" in a and b"width=256px" in a for a, _ in found), "iTerm2: inline, width given")

# not graphical: no escape sequences, a note instead
rc, log = run({"TERM": "xterm-256color"}, ["--show"])
ok(rc == 0, "plain terminal: exits 0")
ok(b"\x1b_G" not in log and b"\x1b]1337" not in log, "plain terminal: no image sequences")
ok(b"shows no images" in log, "plain terminal: says why")
# and without --show on a kitty: nothing
rc, log = run({"TERM": "xterm-kitty"}, [], "without.mp4")
ok(rc == 0 and b"\x1b_G" not in log, "no --show: no images even on kitty")
same = open(os.path.join(tmp, "with.mp4"), "rb").read() == open(os.path.join(tmp, "without.mp4"), "rb").read()
ok(same, "the MP4 is the same byte for byte with and without --show")
sys.exit(1 if fails else 0)
PY
