#!/usr/bin/env bash
# Install the Debian packages h3 builds and tests with (idempotent; needs root or sudo).
set -euo pipefail
pkgs=(
  cmake make gcc clang libclang-rt-14-dev pkg-config python3
  libopenblas-dev      # CPU GEMM
  libjansson-dev       # JSON (configs, safetensors headers)
  libpcre2-dev         # tokenizer pre-split regex
  libutf8proc-dev      # tokenizer NFC normalization
  libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev  # MP4 / H.264 / AAC
  ffmpeg               # ffprobe, used by tests
)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
