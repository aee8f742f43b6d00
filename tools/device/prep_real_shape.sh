#!/usr/bin/env bash
# Here (not on the GPU machine): copy the release's configs, index files and tokenizer files that
# tools/device/make_sparse_snapshot.py needs (~4.7 MB; default source: the project's copy in
# tests/data/minimax-h3-snapshot) into .devsnap/meta, so that they can be carried to the device
# machine.  (The device machine also gets the tracked tests/data copy with the working tree, so
# make_sparse_snapshot.py can read tests/data/minimax-h3-snapshot there directly.)  Then:
#   bash tools/device/make_bundle.sh && bash tools/device/prep_real_shape.sh
#   run(command="bash tools/device/real_shape_run.sh", carry=[".devbundle", ".devsnap"], timeout_s=600)
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${1:-tests/data/minimax-h3-snapshot}
rm -rf .devsnap && mkdir -p .devsnap/meta
for f in FL2VA/transformer/config.json FL2VA/transformer/model.safetensors.index.json \
         text_encoder/config.json text_encoder/model.safetensors.index.json \
         tokenizer/vocab.json tokenizer/merges.txt tokenizer/tokenizer_config.json \
         vae/config.json vae/diffusion_pytorch_model.safetensors.index.json audio_vae/config.json; do
  mkdir -p ".devsnap/meta/$(dirname "$f")"
  cp "$src/$f" ".devsnap/meta/$f"
done
grep -q '^/.devsnap/$' .git/info/exclude 2>/dev/null || echo '/.devsnap/' >> .git/info/exclude
du -sh .devsnap
