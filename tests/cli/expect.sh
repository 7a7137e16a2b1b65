# Sourced by the CLI test scripts: `expect NAME WANT_RC PATTERN -- command...` runs the command,
# checks its exit code (a number, or "nonzero" for a clean non-zero one: not a signal) and that its
# output matches PATTERN (grep -E); counts failures in $fails. Needs $tmp (a scratch folder).
fails=0
expect() {
  local name="$1" want="$2" pattern="$3"
  shift 4
  "$@" > "$tmp/out" 2>&1
  local rc=$?
  if [ "$want" = "nonzero" ]; then
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL $name: exit code $rc, wanted a clean non-zero"; head -5 "$tmp/out"; fails=$((fails+1)); return; fi
  elif [ $rc -ne "$want" ]; then
    echo "FAIL $name: exit code $rc, wanted $want"; head -20 "$tmp/out"; fails=$((fails+1)); return
  fi
  if ! grep -qE -- "$pattern" "$tmp/out"; then
    echo "FAIL $name: output does not match '$pattern':"; head -20 "$tmp/out"; fails=$((fails+1)); return
  fi
  echo "ok   $name"
}
