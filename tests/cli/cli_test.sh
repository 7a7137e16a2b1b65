#!/usr/bin/env bash
# End-to-end checks of the CLI on the bundled model: the commands work, and bad input gives a
# one-line error naming the file or input, a non-zero exit code, and no crash.
# Usage: cli_test.sh path/to/tactician path/to/bundled/model/dir
set -u
bin="$1"
dir="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"
model="$dir/model.onnx"
input=$(ls "$dir"/test_data_set_0/input_0.pb)

expect info 0 "Conv +26" -- "$bin" info "$model"
expect info-json 0 '"unsupported":\[\]' -- "$bin" info "$model" --json
expect run-pb 0 "outputs written" -- "$bin" run "$model" --input "data_0=$input" --output-dir "$tmp/o1"
[ -f "$tmp/o1/softmaxout_1.pb" ] || { echo "FAIL run-pb: no output file"; fails=$((fails+1)); }
expect run-random-npy 0 "outputs written" -- "$bin" run "$model" --random-inputs --seed 3 --output-dir "$tmp/o2" --format npy
[ -f "$tmp/o2/softmaxout_1.npy" ] || { echo "FAIL run-random-npy: no output file"; fails=$((fails+1)); }
expect check-json 0 '^\{"passed":1,"failed":0' -- "$bin" check "$dir" --json

# Bad input.
head -c 1000 "$model" > "$tmp/truncated.onnx"
expect truncated nonzero "truncated.onnx" -- "$bin" info "$tmp/truncated.onnx"
echo "hello" > "$tmp/text.onnx"
expect not-onnx nonzero "text.onnx: not an ONNX model" -- "$bin" info "$tmp/text.onnx"
expect missing-file nonzero "cannot open" -- "$bin" info "$tmp/none.onnx"
expect unknown-input nonzero "no input named 'nope'" -- "$bin" run "$model" --input "nope=$input"
expect missing-input nonzero "input 'data_0'.*not given" -- "$bin" run "$model"
expect unknown-flag nonzero "unknown flag --bogus" -- "$bin" run "$model" --bogus
# Numbers are read strictly (issue 32): junk or an out-of-range value is a usage error naming the
# flag and the text, never read as 0 or clamped.
expect strict-int 2 "--runs abc: expected an integer" -- "$bin" profile "$model" --runs abc
expect strict-trailing 2 "--min-runs 2x: expected an integer" -- "$bin" bench "$model" --min-runs 2x
expect strict-range 2 "--warmup -1: expected an integer at least 0" -- "$bin" bench "$model" --warmup -1
expect strict-number 2 "--rtol nan: expected a number" -- "$bin" check "$dir" --rtol nan
expect strict-threads 2 "--threads two: expected an integer" -- "$bin" tune "$model" --threads two
expect strict-seed 2 "--seed -3: expected a non-negative integer" -- "$bin" run "$model" --random-inputs --seed -3
expect strict-duration 2 "--timeout: duration '5q'" -- "$bin" check "$dir" --timeout 5q
"$bin" run "$model" --random-inputs --output-dir "$tmp/o3" > /dev/null 2>&1
expect wrong-shape nonzero "input 'data_0'.*(expected shape|built for float\[1,3,224,224\], got float\[1,1000,1,1\])" -- "$bin" run "$model" --input "data_0=$tmp/o3/softmaxout_1.pb"
expect unknown-command nonzero "unknown command" -- "$bin" frobnicate


# Builder commands: knobs, build, plans, and their error paths.
expect knobs 0 "pass.fold_batchnorm" -- "$bin" knobs "$model"
"$bin" knobs "$model" --json > "$tmp/knobs.json" 2> "$tmp/knobs.err"
if [ $? -ne 0 ]; then echo "FAIL knobs-json: exit code non-zero"; cat "$tmp/knobs.err"; fails=$((fails+1))
elif ! python3 -c 'import json,sys; k=json.load(sys.stdin); assert isinstance(k, list) and k and all({"name","values","default","help","scope"} <= set(x) for x in k), "bad knob records"' < "$tmp/knobs.json"; then
  echo "FAIL knobs-json: not valid JSON or not [{name, values, default, help, scope}]"; head -c 300 "$tmp/knobs.json"; fails=$((fails+1))
else echo "ok   knobs-json"; fi
expect build-unknown-knob 2 "unknown knob 'pass\.fuse_cnv'" -- "$bin" build "$model" --route "pass.fuse_cnv=off"
expect build-unknown-knob-plain 2 "unknown knob 'frobnicate'" -- "$bin" build "$model" --route "frobnicate=1"
expect build-bad-value 2 "knob 'memory\.planner' cannot be 'fastest'; allowed: greedy_by_size, greedy_by_order, no_reuse" -- \
  "$bin" build "$model" --route "memory.planner=fastest"
expect build-bad-pass-value 2 "knob 'pass\.fuse_conv' cannot be 'maybe'; allowed: on, off" -- "$bin" build "$model" --route "pass.fuse_conv=maybe"
expect build-malformed-route 2 "'pass\.fuse_conv' is not of the form knob=value" -- "$bin" build "$model" --route "pass.fuse_conv"
expect build-duplicate-knob 2 "knob 'pass\.fuse_conv' is set twice" -- "$bin" build "$model" --route "pass.fuse_conv=on pass.fuse_conv=off"
printf '# a route file\npass.fuse_conv=off   # keep convs apart\n\nmemory.planner=no_reuse\n' > "$tmp/r.route"
expect build-route-file 0 "route: memory.planner=no_reuse pass.fuse_conv=off" -- "$bin" build "$model" --route-file "$tmp/r.route" -o "$tmp/r.plan"
# With a GPU: a step pinned to host_reference is named on stderr in a plain warning line.
if "$bin" build "$model" --backend cuda > /dev/null 2>&1; then
  knob=$("$bin" knobs "$model" --backend cuda --json 2>/dev/null | grep -o '"tactic\.[^"]*"' | head -1 | tr -d '"')
  if [ -n "$knob" ]; then
    expect build-host-warning 0 "^warning: node .* runs on the host \(host_reference\): every run pays a device synchronisation" -- \
      "$bin" build "$model" --backend cuda --route "$knob=host_reference"
  else
    echo "FAIL build-host-warning: no tactic knob listed for --backend cuda"; fails=$((fails+1))
  fi
fi
expect bench-compare 0 '^\{"engines":\[\{"name":"default","median_ms":[0-9.e-]+,"speedup_vs_first":1\.0,.*\{"name":".*r\.route","median_ms":[0-9.e-]+,"speedup_vs_first":[0-9.]+.*"rounds":2' -- \
  "$bin" bench "$model" --compare "default,$tmp/r.route" --rounds 2 --block-seconds 0.05 --json
expect bench-compare-one nonzero "--compare needs MODEL.onnx and at least two entries" -- "$bin" bench "$model" --compare default
expect bench-compare-bad-entry nonzero "--compare entry '$tmp/none.route'" -- "$bin" bench "$model" --compare "default,$tmp/none.route"
expect run-plan 0 "outputs written" -- "$bin" run "$model" --plan "$tmp/r.plan" --input "data_0=$input" --output-dir "$tmp/o4"
[ -f "$tmp/o4/softmaxout_1.pb" ] || { echo "FAIL run-plan: no output file"; fails=$((fails+1)); }
# A corrupt plan (one byte flipped in the payload), a truncated plan, and something that is not a plan.
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[len(b)//2]^=0x40; open(sys.argv[2],"wb").write(b)' "$tmp/r.plan" "$tmp/corrupt.plan"
expect run-corrupt-plan nonzero "corrupt.plan: checksum mismatch: the plan is corrupt" -- \
  "$bin" run "$model" --plan "$tmp/corrupt.plan" --input "data_0=$input" --output-dir "$tmp/o5"
[ -e "$tmp/o5/softmaxout_1.pb" ] && { echo "FAIL run-corrupt-plan: wrote outputs"; fails=$((fails+1)); }
head -c 500 "$tmp/r.plan" > "$tmp/cut.plan"
expect run-truncated-plan nonzero "cut.plan: the plan is truncated" -- "$bin" run "$model" --plan "$tmp/cut.plan" --random-inputs
expect run-not-a-plan nonzero "model.onnx: not a Tactician plan" -- "$bin" run "$model" --plan "$model" --random-inputs
expect run-missing-plan nonzero "none.plan: cannot open the plan" -- "$bin" run "$model" --plan "$tmp/none.plan" --random-inputs
expect run-plan-and-route nonzero "--plan runs a built plan" -- "$bin" run "$model" --plan "$tmp/r.plan" --route "pass.fuse_conv=on" --random-inputs

# int8 calibration (where this CPU has int8): data given with --calibration, ranges shared
# through --calibration-cache. Scaling the cached ranges must change the outputs (the cache is
# read); building without the cache must reproduce the first outputs exactly (it is the same data).
if "$bin" knobs "$model" | grep -q '^precision.calibration'; then
  r="precision.default=int8 threads=1"
  expect calib-not-a-folder nonzero "--calibration $tmp/nope: not a folder" -- "$bin" build "$model" --route "$r" --calibration "$tmp/nope"
  mkdir -p "$tmp/empty"
  expect calib-no-data nonzero "empty: holds neither test_data_set_\*/ folders nor input_0.pb" -- \
    "$bin" build "$model" --route "$r" --calibration "$tmp/empty"
  cal=(--calibration "$dir/test_data_set_0")
  expect calib-given 0 "int8 calibration: 1 input set\(s\) of .*test_data_set_0" -- \
    "$bin" build "$model" --route "$r" "${cal[@]}" --calibration-cache "$tmp/cc"
  "$bin" run "$model" --route "$r" "${cal[@]}" --calibration-cache "$tmp/cc" --input "data_0=$input" --output-dir "$tmp/c1" > /dev/null 2>&1
  ls "$tmp"/cc/*.calib > /dev/null 2>&1 || { echo "FAIL calib-cache: no cache file written"; fails=$((fails+1)); }
  python3 - "$tmp"/cc/*.calib <<'PY'
import sys
for path in sys.argv[1:]:
    lines = open(path).read().split("\n")
    out = lines[:3] + [" ".join([str(float(l.split(" ", 2)[0]) * 64)] + l.split(" ", 2)[1:]) if l else l for l in lines[3:]]
    open(path, "w").write("\n".join(out))
PY
  "$bin" run "$model" --route "$r" "${cal[@]}" --calibration-cache "$tmp/cc" --input "data_0=$input" --output-dir "$tmp/c2" > /dev/null 2>&1
  "$bin" run "$model" --route "$r" "${cal[@]}" --input "data_0=$input" --output-dir "$tmp/c3" > /dev/null 2>&1
  if cmp -s "$tmp/c1/softmaxout_1.pb" "$tmp/c2/softmaxout_1.pb"; then echo "FAIL calib-cache-read: the tampered cache did not change the outputs"; fails=$((fails+1))
  elif ! cmp -s "$tmp/c1/softmaxout_1.pb" "$tmp/c3/softmaxout_1.pb"; then echo "FAIL calib-cache-same: without the cache the outputs differ"; fails=$((fails+1))
  else echo "ok   calib-cache"; fi
fi

[ $fails -eq 0 ] && echo "all CLI checks passed" || { echo "$fails CLI checks failed"; exit 1; }
