#!/usr/bin/env bash
# End-to-end checks of the CLI on the bundled model: the commands work, and bad input gives a
# one-line error naming the file or input, a non-zero exit code, and no crash.
# Usage: cli_test.sh path/to/tactician path/to/bundled/model/dir
set -u
bin="$1"
dir="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() {  # expect NAME WANT_RC PATTERN -- command...
  local name="$1" want="$2" pattern="$3"
  shift 4
  "$@" > "$tmp/out" 2>&1
  local rc=$?
  if [ "$want" = "nonzero" ]; then
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL $name: exit code $rc, wanted a clean non-zero"; fails=$((fails+1)); return; fi
  elif [ $rc -ne "$want" ]; then
    echo "FAIL $name: exit code $rc, wanted $want"; cat "$tmp/out"; fails=$((fails+1)); return
  fi
  if ! grep -qE -- "$pattern" "$tmp/out"; then
    echo "FAIL $name: output does not match '$pattern':"; head -5 "$tmp/out"; fails=$((fails+1)); return
  fi
  echo "ok   $name"
}
model="$dir/model.onnx"
input=$(ls "$dir"/test_data_set_0/input_0.pb)

expect info 0 "Conv +26" -- "$bin" info "$model"
expect info-json 0 '"unsupported": \[\]' -- "$bin" info "$model" --json
expect run-pb 0 "outputs written" -- "$bin" run "$model" --input "data_0=$input" --output-dir "$tmp/o1"
[ -f "$tmp/o1/softmaxout_1.pb" ] || { echo "FAIL run-pb: no output file"; fails=$((fails+1)); }
expect run-random-npy 0 "outputs written" -- "$bin" run "$model" --random-inputs --seed 3 --output-dir "$tmp/o2" --format npy
[ -f "$tmp/o2/softmaxout_1.npy" ] || { echo "FAIL run-random-npy: no output file"; fails=$((fails+1)); }
expect check-json 0 '^\{"passed": 1, "failed": 0' -- "$bin" check "$dir" --json

# Bad input.
head -c 1000 "$model" > "$tmp/truncated.onnx"
expect truncated nonzero "truncated.onnx" -- "$bin" info "$tmp/truncated.onnx"
echo "hello" > "$tmp/text.onnx"
expect not-onnx nonzero "text.onnx: not an ONNX model" -- "$bin" info "$tmp/text.onnx"
expect missing-file nonzero "cannot open" -- "$bin" info "$tmp/none.onnx"
expect unknown-input nonzero "no input named 'nope'" -- "$bin" run "$model" --input "nope=$input"
expect missing-input nonzero "input 'data_0'.*not given" -- "$bin" run "$model"
expect unknown-flag nonzero "unknown flag --bogus" -- "$bin" run "$model" --bogus
"$bin" run "$model" --random-inputs --output-dir "$tmp/o3" > /dev/null 2>&1
expect wrong-shape nonzero "input 'data_0'.*expected shape" -- "$bin" run "$model" --input "data_0=$tmp/o3/softmaxout_1.pb"
expect unknown-command nonzero "unknown command" -- "$bin" frobnicate

[ $fails -eq 0 ] && echo "all CLI checks passed" || { echo "$fails CLI checks failed"; exit 1; }
