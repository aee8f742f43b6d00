#!/usr/bin/env bash
# h3 stage audio-encode: the three input forms (sample [B, 1, N], audio [C, S] with its rate, an
# audio / video file) on the decoder fixtures' tiny model, the output's names, shapes and metadata,
# the truncation to --num-frames; bad inputs (one "h3: error:" line, exit 1; usage errors exit 2;
# no output left behind).  With tests/golden/audio_encoder (tools/golden/make_audio_encoder_fixtures.py):
# the outputs against diffusers' encode and the reference encoder step within rel-L2 1e-5; without
# it the script exits 77 (skipped) after the other checks pass.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
g="$H3_SOURCE_DIR/tests/golden/audio_vae"
media="$H3_SOURCE_DIR/tests/data/audio"
gold="$H3_SOURCE_DIR/tests/golden/audio_encoder"
st="python3 $H3_SOURCE_DIR/tests/tools/st_tool.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

# mk OUT NAME SHAPE [META_KEY META_VAL]: a safetensors file with one deterministic F32 tensor
mk() {
  python3 - "$H3_SOURCE_DIR/tests/tools" "$@" <<'PY'
import json, math, struct, sys
sys.path.insert(0, sys.argv[1])
from st_tool import write
out, name, shape = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
n = math.prod(shape)
vals = [0.6 * math.sin(0.05 * i * (1 + i % 3)) for i in range(n)]
hdr = {name: {"dtype": "F32", "shape": shape, "data_offsets": [0, 4 * n]}}
if len(sys.argv) > 6:
    hdr["__metadata__"] = {sys.argv[5]: sys.argv[6]}
write(out, hdr, struct.pack(f"<{n}f", *vals))
PY
}

# shapes OUT EXPECT_JSON: the header's tensors and shapes (dtype F32) and metadata keys
shapes() {
  python3 - "$H3_SOURCE_DIR/tests/tools" "$@" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
from st_tool import read
h, _, _ = read(sys.argv[2])
want = json.loads(sys.argv[3])
meta = h.pop("__metadata__", {})
got = {k: v["shape"] for k, v in h.items()}
assert all(v["dtype"] == "F32" for v in h.values()), h
assert got == want["tensors"], (got, want["tensors"])
for k, v in want.get("meta", {}).items():
    assert meta.get(k) == v, (k, meta.get(k), v)
print(" ".join(f"{k}{v}" for k, v in sorted(got.items())), meta.get("latents"))
PY
}

run_ok() { # NAME EXPECT -- CMD...
  local name=$1 exp=$2; shift 3
  rm -f "$tmp/o.safetensors"
  if "$@" -q --out "$tmp/o.safetensors" 2>"$tmp/err" && msg=$(shapes "$tmp/o.safetensors" "$exp" 2>&1); then
    echo "ok   $name: $msg"
  else
    echo "FAIL $name: ${msg:-$(cat "$tmp/err")}"; fail=1
  fi
  msg=
}
enc() { "$H3" stage audio-encode --model "$g/tiny/diffusers" "$@"; }

# the encoder's own input: [2, 1, 33] -> right-padded to 36 -> 9 latents (hop 4), 8 channels
mk "$tmp/sample.safetensors" sample "[2, 1, 33]"
run_ok "sample [2, 1, 33]" '{"tensors": {"mean": [2, 8, 9], "audio_condition_latents": [18, 8]}, "meta": {"latents": "9", "hop": "4", "sampling_rate": "32000"}}' -- \
  enc --in "$tmp/sample.safetensors"
# a mono soundtrack at 16 kHz: duplicated, resampled to 32 kHz (2 x 1000 -> 2000 samples, 500 latents)
mk "$tmp/mono16k.safetensors" audio "[1, 1000]" sample_rate 16000
run_ok "audio [1, 1000] at 16 kHz" '{"tensors": {"mean": [2, 8, 500], "audio_condition_latents": [1000, 8], "audio": [2, 2000]}, "meta": {"source_sample_rate": "16000"}}' -- \
  enc --in "$tmp/mono16k.safetensors"
# --sample-rate overrides; 48 kHz -> ceil(2 * 999 / 3) = 666 samples
mk "$tmp/st.safetensors" audio "[2, 999]"
run_ok "audio [2, 999] --sample-rate 48000" '{"tensors": {"mean": [2, 8, 167], "audio_condition_latents": [334, 8], "audio": [2, 666]}}' -- \
  enc --in "$tmp/st.safetensors" --sample-rate 48000
# a file, truncated to 2 frames: int(2 / 24 * 44100) = 3675 samples -> ceil(320 * 3675 / 441) = 2667
run_ok "--audio stereo_44k.mp3 --num-frames 2" '{"tensors": {"mean": [2, 8, 667], "audio_condition_latents": [1334, 8], "audio": [2, 2667]}}' -- \
  enc --audio "$media/stereo_44k.mp3" --num-frames 2
run_ok "--audio stereo_16k_f32.wav (whole)" '{"tensors": {"mean": [2, 8, 2400], "audio_condition_latents": [4800, 8], "audio": [2, 9600]}}' -- \
  enc --audio "$media/stereo_16k_f32.wav"
run_ok "--audio video_aac.mp4 --video" '{"tensors": {"mean": [2, 8, 4087], "audio_condition_latents": [8174, 8], "audio": [2, 16347]}}' -- \
  enc --audio "$media/video_aac.mp4" --video
# a checkpoint without latent statistics: the mean only
run_ok "no statistics: mean only" '{"tensors": {"mean": [2, 8, 2]}}' -- \
  "$H3" stage audio-encode --model "$g/mid/param_prefixed.safetensors" --in "$tmp/sample.safetensors"

. "$H3_SOURCE_DIR/tests/cli/lib/expect_error.sh"
ae() { "$H3" stage audio-encode -q --model "$g/tiny/diffusers" --out "$tmp/err_out.safetensors" "$@"; }
mk "$tmp/neither.safetensors" wave "[2, 100]"
expect "input with neither sample nor audio" "neither.safetensors" "'sample'" -- ae --in "$tmp/neither.safetensors"
mk "$tmp/badshape.safetensors" sample "[2, 2, 10]"
expect "sample of two channels" "badshape.safetensors" "'sample'" -- ae --in "$tmp/badshape.safetensors"
mk "$tmp/rank.safetensors" audio "[2, 3, 10]"
expect "audio of rank 3" "rank.safetensors" "[channels, samples]" -- ae --in "$tmp/rank.safetensors"
expect "six channels" "six_48k.wav" "mono or stereo" -- ae --audio "$media/six_48k.wav"
expect "a video without sound" "video_silent.mp4" "no audio stream" -- ae --audio "$media/video_silent.mp4"
expect "missing audio file" "$tmp/none.wav" -- ae --audio "$tmp/none.wav"
printf 'not audio at all, only text' >"$tmp/text.wav"
expect "not a media file" "text.wav" -- ae --audio "$tmp/text.wav"
# files that are not usable audio: one line naming the file and the reason
: >"$tmp/empty.wav"
expect "zero-length file" "empty.wav" "empty file" -- ae --audio "$tmp/empty.wav"
mkdir -p "$tmp/dir.wav"
expect "a directory" "dir.wav" "directory" -- ae --audio "$tmp/dir.wav"
truncate -s 2049M "$tmp/huge.wav" # sparse: refused by its size before anything is read
expect "file over the 2 GiB cap" "huge.wav" "exceed the limit" -- ae --audio "$tmp/huge.wav"
# wav OUT RATE CHANNELS SAMPLES BITS: a PCM WAV of a sine (u8: silence)
wav() {
  python3 - "$@" <<'PY'
import math, struct, sys
out, rate, ch, n, bits = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ba = ch * bits // 8
if bits == 16:
    data = struct.pack(f"<{n * ch}h", *[int(8000 * math.sin(0.3 * i)) for i in range(n * ch)])
else:
    data = bytes([128]) * (n * ch)
fmt = struct.pack("<IHHIIHH", 16, 1, ch, rate, rate * ba, ba, bits)
open(out, "wb").write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + fmt + b"data" + struct.pack("<I", len(data)) + data)
PY
}
wav "$tmp/nosamples.wav" 44100 2 0 16
expect "a WAV with no samples" "nosamples.wav" "no samples" -- ae --audio "$tmp/nosamples.wav"
wav "$tmp/long.wav" 1000 1 601000 8 # 601 s (at 1 kHz: 600 KB)
expect "longer than the 600 s cap" "long.wav" "longer than 600 s" -- ae --audio "$tmp/long.wav"
wav "$tmp/fast.wav" 4000000 1 4000 16
expect "a rate over the resampler's 1 MHz" "fast.wav" "4000000 Hz" -- ae --audio "$tmp/fast.wav"
wav "$tmp/rate1.wav" 1 1 40 16
expect "1 Hz truncated to 22 frames: no sample left" "rate1.wav" "keeps no sample" -- ae --audio "$tmp/rate1.wav" --num-frames 22
# an odd rate that is only unusual: 7 Hz, 22 frames keep int(22 / 24 * 7) = 6 samples -> ceil(32000 * 6 / 7) = 27429,
# used with one warning (outside the release's 2-15 s)
wav "$tmp/rate7.wav" 7 1 40 16
run_ok "7 Hz clip, --num-frames 22" '{"tensors": {"mean": [2, 8, 6858], "audio_condition_latents": [13716, 8], "audio": [2, 27429]}, "meta": {"source_sample_rate": "7"}}' -- \
  enc --audio "$tmp/rate7.wav" --num-frames 22
n=$(enc --audio "$tmp/rate7.wav" --num-frames 22 --out "$tmp/o7.safetensors" 2>&1 | grep -c '^h3: warning: .*2-15 s')
[ "$n" = 1 ] && echo "ok   7 Hz clip: one duration warning" || { echo "FAIL 7 Hz clip: $n duration warnings"; fail=1; }
expect "configs without weights (the release snapshot)" "diffusion_pytorch_model.safetensors" -- \
  "$H3" stage audio-encode -q --model "$H3_SOURCE_DIR/tests/data/minimax-h3-snapshot" --out "$tmp/err_out.safetensors" \
  --in "$tmp/sample.safetensors"
[ ! -e "$tmp/err_out.safetensors" ] && echo "ok   no partial output left behind" || { echo "FAIL partial output left"; fail=1; }

usage() { # NAME -- CMD...
  local name=$1; shift 2
  "$@" >/dev/null 2>"$tmp/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^h3: error: ' "$tmp/err"; then
    echo "ok   $name: $(cat "$tmp/err")"; else echo "FAIL $name (rc=$rc):"; cat "$tmp/err"; fail=1; fi
}
usage "neither --in nor --audio" -- "$H3" stage audio-encode --model "$g/tiny/diffusers" --out "$tmp/x.safetensors"
usage "both --in and --audio" -- "$H3" stage audio-encode --model "$g/tiny/diffusers" --in "$tmp/sample.safetensors" \
  --audio "$media/stereo_44k.mp3" --out "$tmp/x.safetensors"
usage "--video without --audio" -- "$H3" stage audio-encode --model "$g/tiny/diffusers" --in "$tmp/sample.safetensors" \
  --video --out "$tmp/x.safetensors"
usage "bad --num-frames" -- "$H3" stage audio-encode --model "$g/tiny/diffusers" --audio "$media/stereo_44k.mp3" \
  --num-frames 0 --out "$tmp/x.safetensors"
[ ! -e "$tmp/x.safetensors" ] || { echo "FAIL usage error left an output"; fail=1; }
"$H3" stage audio-encode --help | grep "audio_condition_latents" >/dev/null && echo "ok   --help" || { echo "FAIL --help"; fail=1; }

# the reference's outputs (golden set)
if [ -d "$gold" ]; then
  for cfg in tiny mid; do
    [ -f "$gold/$cfg/io.safetensors" ] || continue
    python3 - "$H3_SOURCE_DIR/tests/tools" "$gold/$cfg/io.safetensors" "$tmp" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
from st_tool import read, write
h, body, _ = read(sys.argv[2])
def sub(names, out):
    o, blob = {}, b""
    for src, dst, shape in names:
        e = h[src]; a, b = e["data_offsets"]
        o[dst] = {"dtype": e["dtype"], "shape": shape or e["shape"], "data_offsets": [len(blob), len(blob) + b - a]}
        blob += body[a:b]
    write(out, o, blob)
w = h["case0.wave"]["shape"]
sub([("case0.wave", "sample", [w[0], 1, w[1]])], sys.argv[3] + "/g.in.safetensors")
sub([("case0.mean", "mean", None), ("case0.rows", "audio_condition_latents", None)], sys.argv[3] + "/g.ref.safetensors")
PY
    if "$H3" stage audio-encode -q --model "$gold/$cfg/model" --in "$tmp/g.in.safetensors" --out "$tmp/g.out.safetensors" \
         2>"$tmp/err" && msg=$($st compare "$tmp/g.out.safetensors" "$tmp/g.ref.safetensors" --tol 1e-5 \
         --names mean,audio_condition_latents); then
      echo "ok   golden $cfg: $msg"
    else
      echo "FAIL golden $cfg: ${msg:-$(cat "$tmp/err")}"; fail=1
    fi
    msg=
  done
  exit $fail
fi
[ $fail = 0 ] && { echo "SKIP: tests/golden/audio_encoder missing (tools/golden/make_audio_encoder_fixtures.py)"; exit 77; }
exit $fail
