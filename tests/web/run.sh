#!/bin/sh
# Runs one node test of tests/web (ctest web.*).  Without node, or with one older than the web UI's tools
# need (20.19: Vite 8, playwright-core): skipped (77), or failed where everything is required
# (H3_REQUIRE_WEB=1, CI).  The test itself checks the rest (Chromium, node_modules, the build).
no() { echo "$1"; [ "${H3_REQUIRE_WEB:-}" = 1 ] && exit 1; exit 77; }
command -v node >/dev/null 2>&1 || no "no node"
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' ||
  no "node $(node --version) is older than 20.19 (the web UI's Vite and playwright-core need it)"
exec node "$(dirname "$0")/$1"
