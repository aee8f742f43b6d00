#!/usr/bin/env bash
# h3 info on full-size sparse shards carrying the real MiniMax-H3 names and shapes
# (original release FL2VA/ and the diffusers transformer/ layout): right counts, no data read.
set -euo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
snap="$H3_SOURCE_DIR/tests/data/minimax-h3-snapshot"   # the release's configs + indexes (SOURCE.md there)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 "$H3_SOURCE_DIR/tests/tools/make_sparse_shards.py" "$snap/FL2VA/transformer" "$tmp/FL2VA/transformer" >/dev/null
python3 "$H3_SOURCE_DIR/tests/tools/make_sparse_shards.py" "$snap/transformer" "$tmp/transformer" >/dev/null
cp "$snap/model_index.json" "$tmp/"

out=$("$H3" info "$tmp")
echo "$out"
fail=0
check() { if ! grep -qE -- "$1" <<<"$out"; then echo "MISSING: $1"; fail=1; fi; }
check 'FL2VA/transformer'
check 'weights: +13 file\(s\), 535 tensors, 61.73 GiB'
check 'weights: +14 file\(s\), 638 tensors, 61.73 GiB'
check 'parameters \(stored\): +33,122,992,896'
check 'parameters \(config\): +33,122,992,896'
check 'buffers \(rope.inv_freq\): +16'
check '535 listed, 535 expected from the config, 0 missing, 0 unexpected'
check '638 listed, 638 expected from the config, 0 missing, 0 unexpected'
check 'original release \(sglang-native names'
check 'layout: +diffusers'
[ "$(grep -c 'parameters (stored): *33,122,992,896' <<<"$out")" = 2 ] || { echo "expected both layouts to count 33,122,992,896"; fail=1; }

# A checkpoint whose index and shards lack one tensor: reported as missing, by name.
mkdir -p "$tmp/src"
cp "$snap/FL2VA/transformer/config.json" "$tmp/src/"
python3 - "$snap/FL2VA/transformer/model.safetensors.index.json" "$tmp/src/model.safetensors.index.json" <<'PY'
import json, sys
idx = json.load(open(sys.argv[1]))
del idx["weight_map"]["blocks.7.mlp.fc2.weight"]
json.dump(idx, open(sys.argv[2], "w"))
PY
python3 "$H3_SOURCE_DIR/tests/tools/make_sparse_shards.py" "$tmp/src" "$tmp/broken" >/dev/null
out=$("$H3" info "$tmp/broken" 2>&1 || true)
echo "$out"
grep -q "missing tensor: *blocks.7.mlp.fc2.weight" <<<"$out" || { echo "missing tensor not reported"; fail=1; }
grep -q "534 listed, 535 expected from the config, 1 missing, 0 unexpected" <<<"$out" || { echo "bad counts"; fail=1; }
exit $fail
