#!/usr/bin/env bash
# Install the Debian packages h3 builds and tests with (idempotent; needs root or sudo).
set -euo pipefail
pkgs=(
  cmake make gcc clang libclang-rt-14-dev pkg-config python3
  libopenblas-dev      # CPU GEMM
  libjansson-dev       # JSON (configs, safetensors headers)
  libpcre2-dev         # tokenizer pre-split regex
  libutf8proc-dev      # tokenizer NFC normalization
  libedit-dev          # the interactive session: line editing and history (BSD licence)
  libjpeg62-turbo-dev libwebp-dev  # JPEG / WebP keyframes: the libraries Pillow decodes them with, called as
                                   # Pillow calls them, so the pixels are PIL's by construction (docs/MEDIA.md)
  libavformat-dev libavcodec-dev libswscale-dev libswresample-dev libavutil-dev  # MP4 / H.264 / AAC
  ffmpeg               # ffprobe, used by tests
  time                 # /usr/bin/time: the CPU time of h3 check in its test
  libmicrohttpd-dev    # h3 serve: the HTTP server (LGPL; a thread per connection, a post processor for multipart)
  libsqlite3-dev       # h3 serve: the job store (WAL, schema migrated by user_version)
  chromium             # the web gallery's browser test (tests/web: playwright-core drives /usr/bin/chromium)
  libpq-dev            # h3 serve --db postgresql://...: the job store a fleet of servers shares (docs/FLEET.md)
  postgresql           # the fleet tests start Debian's PostgreSQL (initdb / pg_ctl) in a temp folder
)
# the web UI's build (web/, Vite) and the npm tests (tests/server, tests/web) need node and npm: Debian's unless a
# node is there already (Vite 8 wants node >= 20.19)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
