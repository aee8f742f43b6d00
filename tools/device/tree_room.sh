#!/usr/bin/env bash
# The device tool sends the working tree (tracked + untracked-not-ignored files) and the carried paths, 64 MiB in
# all. The tracked tree is about 62 MB (mostly tests/golden), so a call that carries the CUDA bundle no longer fits.
# This moves golden folders that the call does not need out of the checkout and back:
#
#   bash tools/device/tree_room.sh away [DIR ...]   # default: the folders no device script reads
#   ... run(...) ...
#   bash tools/device/tree_room.sh back
#   bash tools/device/tree_room.sh size             # what would travel now, with .devbundle and .ref/pack
#
# DIRs are names under tests/golden/. The folders wait in /tmp/h3_tree_away; `back` refuses to overwrite a folder
# that is in the checkout again. Never commit while folders are away (git would see them deleted).
set -euo pipefail
cd "$(dirname "$0")/../.."
store=/tmp/h3_tree_away
default=(relaxed tokenizer quant text_encoder audio_encoder lora rng pipeline image_input)
size() {
  local tree carry=0
  tree=$( { git ls-files -z | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done
            git ls-files -z --others --exclude-standard; } | xargs -0 du -cb 2>/dev/null | awk 'END { print $1 }')
  for c in .devbundle .ref/pack; do [ -e "$c" ] && carry=$((carry + $(du -sb "$c" | cut -f1))); done
  printf 'travels: tree %d MB + .devbundle/.ref/pack %d MB = %d MB (limit 67.1 MB)\n' \
    $((tree / 1000000)) $((carry / 1000000)) $(((tree + carry) / 1000000))
}
case ${1:-size} in
  away)
    shift
    dirs=("$@")
    [ ${#dirs[@]} -gt 0 ] || dirs=("${default[@]}")
    mkdir -p "$store"
    for d in "${dirs[@]}"; do
      [ -d "tests/golden/$d" ] || { echo "tree_room: tests/golden/$d: no such folder" >&2; exit 1; }
      [ ! -e "$store/$d" ] || { echo "tree_room: $store/$d exists already (run back first)" >&2; exit 1; }
      mv "tests/golden/$d" "$store/$d"
    done
    size ;;
  back)
    [ -d "$store" ] || { echo "tree_room: nothing away"; exit 0; }
    for p in "$store"/*; do
      [ -e "$p" ] || continue
      d=$(basename "$p")
      [ ! -e "tests/golden/$d" ] || { echo "tree_room: tests/golden/$d is in the checkout again; left $p" >&2; exit 1; }
      mv "$p" "tests/golden/$d"
    done
    rmdir "$store" 2>/dev/null || true
    git status --short tests/golden | head -5
    size ;;
  size) size ;;
  *) echo "usage: tree_room.sh away [DIR ...] | back | size" >&2; exit 2 ;;
esac
