#!/usr/bin/env bash
# h3 info reports every problem of a snapshot and exits 1 when it is unusable:
# an invalid or empty config.json, absurd config values (refused at once),
# missing tensors, wrong shapes, missing shards, a missing tokenizer or
# transformer; merely incomplete snapshots (configs without weights, a missing
# component) give warnings and exit 0.  The base snapshot is assembled from the
# tiny checkpoints in tests/golden.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
src=$H3_SOURCE_DIR
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
. "$src/tests/cli/lib/expect_error.sh"
st() { python3 "$src/tests/tools/st_tool.py" "$@"; }

base=$tmp/base
mkdir -p "$base/tokenizer" "$base/text_encoder"
cp -rL "$src/tests/golden/dit/tiny/diffusers" "$base/transformer"
cp -rL "$src/tests/golden/generate/vae" "$base/vae"
cp -rL "$src/tests/golden/generate/audio_vae" "$base/audio_vae"
cp "$src/tests/golden/text_encoder/model/config.json" "$src/tests/golden/text_encoder/model/model.safetensors.index.json" \
  "$base/text_encoder/"
for f in "$src"/tests/golden/text_encoder/model/*.safetensors.gz; do
  gzip -dc "$f" >"$base/text_encoder/$(basename "${f%.gz}")"
done
# a tiny byte-level tokenizer (the 256 byte symbols, one merge): loads in no time
python3 - "$base/tokenizer" <<'EOF'
import json, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
vocab["he"] = 256
json.dump(vocab, open(sys.argv[1] + "/vocab.json", "w"))
open(sys.argv[1] + "/merges.txt", "w").write("#version: 0.2\nh e\n")
EOF
echo '{"_class_name": "MiniMaxH3ModularPipeline"}' >"$base/model_index.json"
chmod -R u+w "$base"

# a fresh copy of the base as $tmp/NAME
variant() { rm -rf "${tmp:?}/$1"; cp -r "$base" "$tmp/$1"; echo "$tmp/$1"; }
usable() { # NAME PATH [PATTERN]: exit 0 and the summary says usable
  "$H3" info "$2" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -eq 0 ] && grep -q ": usable (0 error(s)" "$tmp/out" && { [ -z "${3:-}" ] || grep -qF -- "$3" "$tmp/out"; }; then
    echo "ok   $1: $(tail -1 "$tmp/out")"
  else echo "FAIL $1 (rc=$rc)"; cat "$tmp/out" "$tmp/err"; fail=1; fi
}

usable "complete snapshot" "$base" "vocabulary:"
# its one warning: the 6-layer text encoder fixture is below the reference's > 50 layers
[ "$(grep -c "warning:" "$tmp/out")" = 1 ] && grep -q "num_hidden_layers 6" "$tmp/out" && echo "ok   one warning (6 layers)" ||
  { echo "FAIL complete snapshot: unexpected warnings"; grep warning "$tmp/out"; fail=1; }

# configs and indexes only: warnings, exit 0 (the release snapshot of configs is like this)
v=$(variant noweights); rm "$v"/transformer/*.safetensors "$v"/vae/*.safetensors "$v"/audio_vae/*.safetensors \
  "$v"/text_encoder/*.safetensors
usable "configs without weights" "$v" "weights not present"
# a missing component is a warning
v=$(variant novae); rm -r "$v/vae"
usable "no vae/ (incomplete)" "$v" "no video VAE"

# configs
v=$(variant emptycfg); : >"$v/transformer/config.json"
expect "empty transformer config.json" "transformer/config.json" -- "$H3" info "$v"
v=$(variant badjson); echo '{"num_layers": 3,' >"$v/vae/config.json"
expect "invalid JSON in vae/config.json" "vae/config.json" "line" -- "$H3" info "$v"
v=$(variant huge); python3 - "$v/transformer/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["num_layers"] = 2 ** 31; json.dump(c, open(sys.argv[1], "w"))
EOF
start=$(date +%s)
expect "num_layers 2^31" "num_layers" "10000" -- timeout 20 "$H3" info "$v"
[ $(( $(date +%s) - start )) -le 10 ] && echo "ok   refused at once" || { echo "FAIL num_layers 2^31 took too long"; fail=1; }
v=$(variant groups); python3 - "$v/vae/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["norm_num_groups"] = 0; json.dump(c, open(sys.argv[1], "w"))
EOF
expect "vae norm_num_groups 0" "norm_num_groups" -- "$H3" info "$v"
v=$(variant channels); python3 - "$v/vae/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["block_out_channels"] = [2 ** 40] * 4; json.dump(c, open(sys.argv[1], "w"))
EOF
expect "vae block_out_channels 2^40" "block_out_channels" -- "$H3" info "$v"
v=$(variant tecfg); python3 - "$v/text_encoder/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); (c.get("text_config") or c)["vocab_size"] = 2 ** 40; json.dump(c, open(sys.argv[1], "w"))
EOF
expect "text encoder vocab_size 2^40" "vocab_size" -- "$H3" info "$v"
v=$(variant avcfg); python3 - "$v/audio_vae/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["latent_dim"] = 2 ** 40; json.dump(c, open(sys.argv[1], "w"))
EOF
expect "audio VAE latent_dim 2^40" "latent_dim" -- "$H3" info "$v"
v=$(variant modelindex); echo '{' >"$v/model_index.json"
expect "broken model_index.json" "model_index.json" -- "$H3" info "$v"

# tensors
v=$(variant dropdit); f=$(ls "$v"/transformer/*.safetensors | head -1)
name=$(python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",d[:8])[0]; h=json.loads(d[8:8+n]); print(sorted(k for k in h if "blocks.1." in k)[0])' "$f")
st corrupt drop "$f" "$f.tmp" "$name" && mv "$f.tmp" "$f"
for idx in "$v"/transformer/*.index.json; do # the index no longer lists it either
  [ -f "$idx" ] && python3 - "$idx" "$name" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1])); del j["weight_map"][sys.argv[2]]; json.dump(j, open(sys.argv[1], "w"))
EOF
done
expect "missing DiT tensor" "missing" -- "$H3" info "$v"
grep -qF "missing tensor:        $name" "$tmp/out" || { echo "FAIL the missing tensor is not named"; fail=1; }
v=$(variant shapedit); f=$(ls "$v"/transformer/*.safetensors | head -1)
name=$(python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",d[:8])[0]; h=json.loads(d[8:8+n]); print(sorted(k for k in h if k!="__metadata__" and len(h[k]["shape"])==2)[0])' "$f")
st corrupt reshape "$f" "$f.tmp" "$name" && mv "$f.tmp" "$f"
expect "wrong DiT shape" "wrong shape" -- "$H3" info "$v"
grep -qF "wrong shape:           $name" "$tmp/out" || { echo "FAIL the mis-shaped tensor is not named"; fail=1; }
v=$(variant dropvae); f=$v/vae/diffusion_pytorch_model.safetensors
st corrupt drop "$f" "$f.tmp" decoder.norm_out.weight && mv "$f.tmp" "$f"
expect "missing video VAE tensor" "decoder.norm_out.weight" -- "$H3" info "$v"
v=$(variant shapeavae); f=$v/audio_vae/diffusion_pytorch_model.safetensors
st corrupt reshape "$f" "$f.tmp" decoder.conv_pre.weight_v && mv "$f.tmp" "$f"
expect "wrong audio VAE shape" "decoder.conv_pre" -- "$H3" info "$v"
v=$(variant shard); rm "$(ls "$v"/text_encoder/*.safetensors | head -1)"
expect "a shard missing" "shard" "missing" -- "$H3" info "$v"
v=$(variant trunc); f=$v/vae/diffusion_pytorch_model.safetensors
st corrupt truncate "$f" "$f.tmp" && mv "$f.tmp" "$f"
expect "truncated weights file" "diffusion_pytorch_model.safetensors" -- "$H3" info "$v"

# components
v=$(variant notok); rm -r "$v/tokenizer"
expect "text encoder without tokenizer" "tokenizer" -- "$H3" info "$v"
v=$(variant badtok); echo '{"h": ' >"$v/tokenizer/vocab.json"
expect "corrupt vocab.json" "vocab.json" -- "$H3" info "$v"
v=$(variant badtokjson); echo '{"model": ' >"$v/tokenizer/tokenizer.json"
expect "corrupt tokenizer.json" "tokenizer.json" -- "$H3" info "$v"
v=$(variant nodit); rm -r "$v/transformer"
expect "no transformer" "no transformer" -- "$H3" info "$v"

# one component folder, one file
expect "an empty config.json in a component folder" "config.json" -- "$H3" info "$tmp/emptycfg/transformer"
usable "the transformer folder alone" "$base/transformer"
st corrupt truncate "$base/vae/diffusion_pytorch_model.safetensors" "$tmp/trunc.safetensors"
expect "a truncated single file" "trunc.safetensors" -- "$H3" info "$tmp/trunc.safetensors"
usable "a video VAE single file" "$base/vae/diffusion_pytorch_model.safetensors" "video VAE"
expect "no such path" "nonexistent" -- "$H3" info "$tmp/nonexistent"
exit $fail
