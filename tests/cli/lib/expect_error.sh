# Sourced by the CLI error tests (needs $tmp, a scratch folder, and $fail, set to 1 on a failure):
# expect NAME PATTERN... -- CMD...: exit status 1 and exactly one stderr line "h3: error: ..." matching every pattern
expect() {
  local name=$1; shift
  local pats=()
  while [ "$1" != "--" ]; do pats+=("$1"); shift; done; shift
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  local lines; lines=$(wc -l <"$tmp/err")
  local ok=1
  [ $rc -eq 1 ] || ok=0
  [ "$lines" -eq 1 ] || ok=0
  grep -q '^h3: error: ' "$tmp/err" || ok=0
  for p in "${pats[@]}"; do grep -qF -- "$p" "$tmp/err" || ok=0; done
  if [ $ok = 1 ]; then echo "ok   $name: $(cat "$tmp/err")"; else
    echo "FAIL $name (rc=$rc, $lines lines):"; cat "$tmp/err"; fail=1; fi
}
