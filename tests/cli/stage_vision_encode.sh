#!/usr/bin/env bash
# h3 stage vision-encode and h3 stage text-encode --image (fl2va) end to end on the committed tiny Qwen3-VL
# (tests/golden/text_encoder: its random vision tower) with the release's preprocessor config: output names,
# shapes, grids, tags and positions; the canvas fit; errors.  With tests/golden/vision (the reference tower and
# fl2va prompts, tools/golden/make_vision_fixtures.py) also compared with transformers / diffusers; without it the
# script ends SKIP (77) after the rest passed.
set -euo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
g="$H3_SOURCE_DIR/tests/golden/text_encoder"
snapdata="$H3_SOURCE_DIR/tests/data/minimax-h3-snapshot"
st="python3 $H3_SOURCE_DIR/tests/tools/st_tool.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
snap="$tmp/snap"
mkdir -p "$snap/text_encoder" "$snap/processor"
cp "$g/model/config.json" "$g/model/model.safetensors.index.json" "$snap/text_encoder/"
for f in "$g"/model/*.safetensors.gz; do gzip -dc "$f" > "$snap/text_encoder/$(basename "$f" .gz)"; done
cp "$snapdata/processor/preprocessor_config.json" "$snap/processor/"
ln -s "$snapdata/tokenizer" "$snap/tokenizer"

# formula images (tools/golden/make_vision_fixtures.py formula_image) as binary PPM
ppm() { # W H SEED FILE
  python3 - "$@" <<'EOF'
import sys
w, h, s, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
px = bytearray()
for y in range(h):
    for x in range(w):
        for c in range(3):
            px.append((x * (3 + s % 5) + y * (5 + s % 7) + c * 85 + ((x * y) % (17 + s)) * 3 + ((x ^ (3 * y)) & 31) + 11 * s) % 256)
open(path, "wb").write(b"P6\n%d %d\n255\n" % (w, h) + bytes(px))
EOF
}
ppm 384 256 1 "$tmp/A.ppm"; ppm 384 256 2 "$tmp/B.ppm"; ppm 512 128 3 "$tmp/C.ppm"; ppm 300 200 4 "$tmp/D.ppm"

# names, dtypes and shapes of a stage output: check FILE 'name:DTYPE:d0,d1' ...
check() {
  python3 - "$H3_SOURCE_DIR/tests/tools" "$@" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from st_tool import read
hdr, body, _ = read(sys.argv[2])
names = sorted(k for k in hdr if k != "__metadata__")
want = {}
for spec in sys.argv[3:]:
    n, dt, shape = spec.split(":")
    want[n] = (dt, [int(v) for v in shape.split(",")])
assert sorted(want) == names, (names, sorted(want))
for n, (dt, shape) in want.items():
    assert hdr[n]["dtype"] == dt and hdr[n]["shape"] == shape, (n, hdr[n], dt, shape)
print("  " + sys.argv[2].split("/")[-1] + ": " + ", ".join(f"{n} {hdr[n]['shape']}" for n in names))
EOF
}
ints() { # FILE NAME -> the i64 values, space separated
  python3 - "$H3_SOURCE_DIR/tests/tools" "$1" "$2" <<'EOF'
import struct, sys
sys.path.insert(0, sys.argv[1])
from st_tool import read
hdr, body, _ = read(sys.argv[2])
e = hdr[sys.argv[3]]
a, b = e["data_offsets"]
print(" ".join(str(v) for v in struct.unpack("<%dq" % ((b - a) // 8), body[a:b])))
EOF
}

# vision-encode: one image, two images of different size, the canvas fit
"$H3" stage vision-encode -q --model "$snap" --image "$tmp/A.ppm" --out "$tmp/a.safetensors"
check "$tmp/a.safetensors" pixel_values:F32:384,1536 image_grid_thw:I64:1,3 image_embeds:F32:96,64 \
  deepstack_image_embeds.0:F32:96,64 deepstack_image_embeds.1:F32:96,64 deepstack_image_embeds.2:F32:96,64
[ "$(ints "$tmp/a.safetensors" image_grid_thw)" = "1 16 24" ]
"$H3" stage vision-encode -q --model "$snap" --image "$tmp/A.ppm" --image "$tmp/C.ppm" --out "$tmp/ac.safetensors"
check "$tmp/ac.safetensors" pixel_values:F32:640,1536 image_grid_thw:I64:2,3 image_embeds:F32:160,64 \
  deepstack_image_embeds.0:F32:160,64 deepstack_image_embeds.1:F32:160,64 deepstack_image_embeds.2:F32:160,64
[ "$(ints "$tmp/ac.safetensors" image_grid_thw)" = "1 16 24 1 8 32" ]
# A's rows alone and in the batch (attention stays within an image)
python3 - "$H3_SOURCE_DIR/tests/tools" "$tmp/a.safetensors" "$tmp/ac.safetensors" <<'EOF'
import math, sys
sys.path.insert(0, sys.argv[1])
from st_tool import read, tensor_f32
ha, ba, _ = read(sys.argv[2]); hb, bb, _ = read(sys.argv[3])
for n in ("image_embeds", "deepstack_image_embeds.2", "pixel_values"):
    a = tensor_f32(ha, ba, n); b = tensor_f32(hb, bb, n)[:len(a)]
    num = sum((x - y) ** 2 for x, y in zip(a, b)); den = sum(y * y for y in a)
    r = math.sqrt(num / den)
    assert r <= 1e-6, (n, r)
print("  A alone = A in the batch with C")
EOF
# a 300x200 image put on a 384x256 canvas (stretched) gives the keyframe grid; unfitted it is resized to 320x224
"$H3" stage vision-encode -q --model "$snap" --image "$tmp/D.ppm" --width 384 --height 256 --out "$tmp/d.safetensors"
[ "$(ints "$tmp/d.safetensors" image_grid_thw)" = "1 16 24" ]
"$H3" stage vision-encode -q --model "$snap" --image "$tmp/D.ppm" --out "$tmp/d2.safetensors"
[ "$(ints "$tmp/d2.safetensors" image_grid_thw)" = "1 14 20" ]
# --processor / --config overrides open the same model
"$H3" stage vision-encode -q --model "$snap/text_encoder" --config "$snap/text_encoder/config.json" \
  --processor "$snap/processor" --image "$tmp/A.ppm" --out "$tmp/a2.safetensors"
$st compare "$tmp/a2.safetensors" "$tmp/a.safetensors" --tol 0 --names image_embeds,deepstack_image_embeds.0
# --precision bf16: the reference pipeline's bf16 numerics (emulated on the CPU): bf16 values, near the f32 run
"$H3" stage vision-encode -q --model "$snap" --precision bf16 --image "$tmp/A.ppm" --out "$tmp/abf.safetensors"
python3 - "$H3_SOURCE_DIR/tests/tools" "$tmp/abf.safetensors" "$tmp/a.safetensors" <<'EOF'
import math, struct, sys
sys.path.insert(0, sys.argv[1])
from st_tool import read, tensor_f32
hb, bb, _ = read(sys.argv[2]); hf, bf, _ = read(sys.argv[3])
for n in ("image_embeds", "deepstack_image_embeds.0", "deepstack_image_embeds.2"):
    a = tensor_f32(hb, bb, n); b = tensor_f32(hf, bf, n)
    assert len(a) == len(b) > 0, n
    num = sum((x - y) ** 2 for x, y in zip(a, b)); den = sum(y * y for y in b)
    r = math.sqrt(num / den)
    assert 1e-4 < r <= 2e-2, (n, r)
    for x in a:  # a bf16 value: the low 16 bits of its float32 are zero
        assert struct.unpack("<I", struct.pack("<f", x))[0] & 0xFFFF == 0, (n, x)
    print("  bf16 %s: rel-L2 %.3g from f32, all bf16 values" % (n, r))
EOF

# text-encode --image: the fl2va presentation (tags 0 on the vision blocks, 3-axis positions)
"$H3" stage text-encode -q --model "$snap" --image "$tmp/A.ppm" --image "$tmp/B.ppm" --prompt "" --tap 4 \
  --out "$tmp/fl.safetensors"
L=$(python3 -c "print(2 * (6 + 96 + 2))")
check "$tmp/fl.safetensors" encoder_hidden_states:F32:1,$L,64 text_token_tags:I64:$L input_ids:I64:$L \
  position_ids:I64:3,$L image_grid_thw:I64:2,3
tags=$(ints "$tmp/fl.safetensors" text_token_tags)
[ "$(echo "$tags" | tr ' ' '\n' | grep -c '^0$')" = 196 ]
python3 - "$(ints "$tmp/fl.safetensors" position_ids)" "$(ints "$tmp/fl.safetensors" input_ids)" <<'EOF'
import sys
p = [int(v) for v in sys.argv[1].split()]; ids = [int(v) for v in sys.argv[2].split()]
L = len(ids); T, H, W = p[:L], p[L:2 * L], p[2 * L:]
assert ids[6] == 151652 and ids[7] == 151655 and ids[103] == 151653, ids[:8]
# keyframe grid (1, 16, 24): 8 x 12 merged tokens from position 7; pad k at (7, 7 + k // 12, 7 + k % 12)
assert (T[7], H[7], W[7]) == (7, 7, 7) and (T[7 + 23], H[7 + 23], W[7 + 23]) == (7, 8, 18), (T[30], H[30], W[30])
assert (T[7 + 95], H[7 + 95], W[7 + 95]) == (7, 14, 18)
assert T[103] == H[103] == W[103] == 7 + 12  # <|vision_end|>: the counter advanced by max(8, 12)
assert T[104:110] == list(range(20, 26)) and T[110] == 26 and W[110 + 11] == 26 + 11  # label 2, then block 2
print("  fl2va positions: keyframe 1's block spans H 7..14, W 7..18; <|vision_end|> at 19; keyframe 2 from 26")
EOF
# without --image the output is the t2va one
"$H3" stage text-encode -q --model "$snap" --prompt "A fox." --tap 4 --out "$tmp/t.safetensors"
python3 - "$H3_SOURCE_DIR/tests/tools" "$tmp/t.safetensors" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from st_tool import read
hdr, _, _ = read(sys.argv[2])
assert sorted(k for k in hdr if k != "__metadata__") == ["encoder_hidden_states", "input_ids", "text_token_tags"]
assert hdr["__metadata__"]["presentation"] == "t2va"
EOF

# errors
expect_fail() {
  local want_rc=$1 pattern=$2
  shift 2
  set +e
  "$@" 2> "$tmp/err"
  local rc=$?
  set -e
  if [ "$rc" != "$want_rc" ] || ! grep -q -- "$pattern" "$tmp/err"; then
    echo "expected exit $want_rc and '$pattern', got $rc:"
    cat "$tmp/err"
    exit 1
  fi
}
o="$tmp/x.safetensors"
expect_fail 2 "needs --model, --image and --out" "$H3" stage vision-encode --model "$snap" --out "$o"
expect_fail 2 "at most 2 --image" "$H3" stage vision-encode --model "$snap" --image "$tmp/A.ppm" --image "$tmp/B.ppm" \
  --image "$tmp/C.ppm" --out "$o"
expect_fail 2 "needs a value" "$H3" stage vision-encode --model "$snap" --out "$o" --image
expect_fail 2 "both --width and --height" "$H3" stage vision-encode --model "$snap" --image "$tmp/A.ppm" --width 384 \
  --out "$o"
expect_fail 2 "multiple of 32" "$H3" stage vision-encode --model "$snap" --image "$tmp/A.ppm" --width 300 --height 256 \
  --out "$o"
expect_fail 1 "nope.png" "$H3" stage vision-encode --model "$snap" --image "$tmp/nope.png" --out "$o"
printf 'not an image' > "$tmp/bad.png"
expect_fail 1 "bad.png" "$H3" stage vision-encode --model "$snap" --image "$tmp/bad.png" --out "$o"
echo '{"patch_size": 14, "temporal_patch_size": 2, "merge_size": 2}' > "$tmp/p14.json"
expect_fail 1 "do not match the vision tower" "$H3" stage vision-encode --model "$snap" --processor "$tmp/p14.json" \
  --image "$tmp/A.ppm" --out "$o"
mkdir -p "$tmp/noproc"
ln -s "$snap/text_encoder" "$tmp/noproc/text_encoder"
expect_fail 1 "preprocessor_config.json" "$H3" stage vision-encode --model "$tmp/noproc" --image "$tmp/A.ppm" --out "$o"
ppm 8 2000 5 "$tmp/thin.ppm"
expect_fail 1 "aspect ratio" "$H3" stage vision-encode --model "$snap" --image "$tmp/thin.ppm" --out "$o"
expect_fail 2 "need --image" "$H3" stage text-encode --model "$snap" --prompt hi --processor "$snap/processor" --out "$o"
test ! -e "$o"
"$H3" stage vision-encode --help | grep "deepstack_image_embeds" >/dev/null
"$H3" stage text-encode --help | grep -- "--image FILE" >/dev/null
"$H3" stage --help | grep "vision-encode" >/dev/null
echo "stage vision-encode / text-encode --image: ok"

# ---- against the reference ----
vg="$H3_SOURCE_DIR/tests/golden/vision"
if [ ! -f "$vg/cases.json" ]; then
  echo "SKIP: tests/golden/vision/ not generated yet (tools/golden/make_vision_fixtures.py): no reference comparison"
  exit 77
fi
vs="$tmp/vsnap"
mkdir -p "$vs/text_encoder" "$vs/processor"
cp "$vg/model/config.json" "$vs/text_encoder/"
cp "$vg"/model/*.index.json "$vs/text_encoder/" 2>/dev/null || true
for f in "$vg"/model/*.safetensors.gz; do gzip -dc "$f" > "$vs/text_encoder/$(basename "$f" .gz)"; done
cp "$vg/preprocessor_config.json" "$vs/processor/"
ln -s "$snapdata/tokenizer" "$vs/tokenizer"
tap=$(python3 -c "import json; print(json.load(open('$vg/cases.json'))['tap'])")
# reference files with the stage's names: tower case A, fl2va cases first and both
python3 - "$H3_SOURCE_DIR/tests/tools" "$vg" "$tmp" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from st_tool import read, write
vg, tmp = sys.argv[2], sys.argv[3]
hdr, body, _ = read(vg + "/cases.safetensors")
def emit(path, pairs, batch=()):
    out, blob = {}, b""
    for src, dst in pairs:
        e = hdr[src]
        a, b = e["data_offsets"]
        shape = [1] + e["shape"] if dst in batch else e["shape"]
        out[dst] = {"dtype": e["dtype"], "shape": shape, "data_offsets": [len(blob), len(blob) + b - a]}
        blob += body[a:b]
    write(path, out, blob)
emit(tmp + "/ref_A.safetensors", [("A.image_embeds", "image_embeds")] +
     [(f"A.deepstack.{i}", f"deepstack_image_embeds.{i}") for i in range(3)])
for c in ("first", "both"):
    emit(f"{tmp}/ref_{c}.safetensors", [(c + ".hidden", "encoder_hidden_states")], batch=("encoder_hidden_states",))
EOF
"$H3" stage vision-encode -q --model "$vs" --image "$tmp/A.ppm" --out "$tmp/ga.safetensors"
$st compare "$tmp/ga.safetensors" "$tmp/ref_A.safetensors" --tol 1e-5
prompt=$(python3 -c "import json; print(json.load(open('$vg/cases.json'))['fl2va']['first']['prompt'])")
"$H3" stage text-encode -q --model "$vs" --image "$tmp/A.ppm" --prompt "$prompt" --tap "$tap" --out "$tmp/gf.safetensors"
$st compare "$tmp/gf.safetensors" "$tmp/ref_first.safetensors" --tol 1e-5 --names encoder_hidden_states
prompt=$(python3 -c "import json; print(json.load(open('$vg/cases.json'))['fl2va']['both']['prompt'])")
"$H3" stage text-encode -q --model "$vs" --image "$tmp/A.ppm" --image "$tmp/B.ppm" --prompt "$prompt" --tap "$tap" \
  --out "$tmp/gb.safetensors"
$st compare "$tmp/gb.safetensors" "$tmp/ref_both.safetensors" --tol 1e-5 --names encoder_hidden_states
echo "stage vision-encode / text-encode --image against the reference: ok"
