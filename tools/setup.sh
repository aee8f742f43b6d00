#!/usr/bin/env bash
# Install the build dependencies (Debian), build the web gallery (web/dist) and h3 into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
# the web gallery (web/): built first, so that the h3 build embeds it (without it, h3 serve shows a page
# saying the UI was not built; everything else works)
if (cd web && npm ci --no-audit --no-fund --loglevel=error && npm run build); then
  echo "built: web/dist (the gallery h3 serve embeds)"
else
  echo "warning: the web UI did not build (node >= 20.19 and npm needed): h3 serve will say so at /" >&2
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)"
echo "built: build/h3"
