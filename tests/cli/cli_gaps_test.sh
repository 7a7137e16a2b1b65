#!/usr/bin/env bash
# The CLI gaps of issue 29, end to end on real models: check --plan and --tolerance, compare,
# run/info on a .plan, profile --json, bench --export-times. Every case asserts the outputs (values,
# counts, verdicts) or the exact error naming the file or flag, and a clean exit code.
# Usage: cli_gaps_test.sh path/to/tactician path/to/bundled/squeezenet1.1 [path/to/shared/models]
set -u
bin="$1"
dir="$2"
zoo="${3:-}"
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/expect.sh"
# pycheck NAME FILE PYTHON: runs PYTHON with the file's last line parsed as JSON in `j` (None when
# it is not JSON) and the whole text in `text`; an AssertionError fails the case.
pycheck() {
  local name="$1" file="$2" code="$3"
  if "$py" - "$file" > "$tmp/py.out" 2>&1 <<PY
import json, sys
text = open(sys.argv[1]).read()
try:
    j = json.loads(text.strip().split("\n")[-1])
except ValueError:
    j = None
$code
PY
  then echo "ok   $name"; else echo "FAIL $name:"; cat "$tmp/py.out"; fails=$((fails+1)); fi
}
model="$dir/model.onnx"
input="$dir/test_data_set_0/input_0.pb"
printf 'pass.fuse_conv=off\nmemory.planner=no_reuse\n' > "$tmp/r.route"
"$bin" build "$model" --route-file "$tmp/r.route" -o "$tmp/r.plan" > /dev/null 2>&1 || { echo "FAIL setup: build r.plan"; exit 1; }
"$bin" build "$model" -o "$tmp/default.plan" > "$tmp/build.out" 2>&1 || { echo "FAIL setup: build default.plan"; exit 1; }
steps=$(sed -n 's/^plan: \([0-9]*\) steps.*/\1/p' "$tmp/build.out")

# --- check --plan: a saved plan against the test data of its model.
expect check-plan 0 '^\{"passed":1,"failed":0,"unsupported":0,"errors":0' -- "$bin" check "$dir" --plan "$tmp/r.plan" --json
grep -q "^plan $tmp/r.plan (route: memory.planner=no_reuse pass.fuse_conv=off, cpu," "$tmp/out" \
  && echo "ok   check-plan-names-route" || { echo "FAIL check-plan-names-route"; head -3 "$tmp/out"; fails=$((fails+1)); }
expect check-plan-missing 2 "none.plan: cannot open the plan" -- "$bin" check "$dir" --plan "$tmp/none.plan"
expect check-plan-with-route 2 "--plan runs a built plan: --route / --route-file / --shapes do not apply" -- \
  "$bin" check "$dir" --plan "$tmp/r.plan" --route "pass.fuse_conv=on"
expect check-plan-reference 2 "--reference runs the interpreter: --route/--threads/--plan do not apply" -- \
  "$bin" check "$dir" --plan "$tmp/r.plan" --reference
if [ -n "$zoo" ] && [ -d "$zoo/mnist-cntk" ]; then
  "$bin" build "$zoo/mnist-cntk/model.onnx" -o "$tmp/mnist.plan" > /dev/null 2>&1
  expect check-plan-other-model 2 "mnist.plan: the plan was built from another model \(hash [0-9a-f]+\) than .*squeezenet1.1/model.onnx" -- \
    "$bin" check "$dir" --plan "$tmp/mnist.plan"
  expect check-plan-many-dirs 2 "--plan .*r.plan: .*holds [0-9]+ test directories; a plan runs the one model" -- \
    "$bin" check "$zoo" --plan "$tmp/r.plan"
fi

# --- check --tolerance: the tuner's language instead of rtol/atol.
expect check-tolerance-pass 0 '^\{"passed":1,"failed":0' -- "$bin" check "$dir" --tolerance "cos>=0.9999,l2<=1e-4" --json
grep -q "^tolerance: cos>=0.9999,l2<=1e-04,atol=1e-04,rtol=0.001$" "$tmp/out" \
  && echo "ok   check-tolerance-echo" || { echo "FAIL check-tolerance-echo"; head -3 "$tmp/out"; fails=$((fails+1)); }
# An fp32 engine is not bit-exact with the stored outputs: a relative l2 of 1e-12 must fail, naming the output.
expect check-tolerance-fail 1 "^FAIL +squeezenet1.1 +test_data_set_0 output 'softmaxout_1': l2 [0-9.e-]+ > 1e-12" -- \
  "$bin" check "$dir" --tolerance "l2<=1e-12"
printf 'cos>=0.9999\nl0<=0.01\natol=1e-5\n' > "$tmp/tol.txt"
expect check-tolerance-file 0 '^\{"passed":1,"failed":0' -- "$bin" check "$dir" --tolerance-file "$tmp/tol.txt" --json
expect check-tolerance-plan 0 '^\{"passed":1,"failed":0' -- "$bin" check "$dir" --plan "$tmp/r.plan" --tolerance "cos>=0.99999" --json
expect check-tolerance-bad 2 "tolerance term 'cos>0.9': comparison '>' is not allowed" -- "$bin" check "$dir" --tolerance "cos>0.9"
expect check-tolerance-unknown 2 "unknown name 'cosine'" -- "$bin" check "$dir" --tolerance "cosine>=0.9"
expect check-tolerance-and-rtol 2 "--tolerance replaces --rtol/--atol" -- "$bin" check "$dir" --tolerance "cos>=0.9" --rtol 0.1
expect check-tolerance-file-missing 2 "nope.txt: cannot open the tolerance file" -- "$bin" check "$dir" --tolerance-file "$tmp/nope.txt"

# --- run and info on a .plan.
expect run-plan-positional 0 "ran .*r.plan with a built engine \([0-9]+ steps, route: memory.planner=no_reuse pass.fuse_conv=off\)" -- \
  "$bin" run "$tmp/r.plan" --input "data_0=$input" --output-dir "$tmp/p1"
"$bin" run "$model" --plan "$tmp/r.plan" --input "data_0=$input" --output-dir "$tmp/p2" > /dev/null 2>&1
if [ -f "$tmp/p1/softmaxout_1.pb" ] && cmp -s "$tmp/p1/softmaxout_1.pb" "$tmp/p2/softmaxout_1.pb"; then echo "ok   run-plan-same-as-model-plan"
else echo "FAIL run-plan-same-as-model-plan: run PLAN and run MODEL --plan PLAN differ"; fails=$((fails+1)); fi
"$bin" run "$tmp/r.plan" --random-inputs --seed 5 --output-dir "$tmp/p3" --format npy > /dev/null 2>&1
"$bin" run "$model" --route-file "$tmp/r.route" --random-inputs --seed 5 --output-dir "$tmp/p4" --format npy > /dev/null 2>&1
pycheck run-plan-random "$tmp/out" "
import numpy as np
a = np.load('$tmp/p3/softmaxout_1.npy'); b = np.load('$tmp/p4/softmaxout_1.npy')
assert a.shape == (1, 1000, 1, 1), a.shape
assert abs(a.sum() - 1) < 1e-3 and a.std() > 0, (a.sum(), a.std())
assert np.array_equal(a, b), 'the plan and a build of its route disagree on the same seeded inputs'
"
expect run-plan-reference 2 "r.plan is a plan: --reference needs MODEL.onnx" -- "$bin" run "$tmp/r.plan" --reference --random-inputs
expect run-plan-route 2 "--plan runs a built plan" -- "$bin" run "$tmp/r.plan" --route "pass.fuse_conv=on" --random-inputs
expect run-plan-missing 1 "none.plan: cannot open the plan" -- "$bin" run "$tmp/none.plan" --random-inputs
expect run-plan-unknown-input 2 "no input named 'nope'" -- "$bin" run "$tmp/r.plan" --input "nope=$input"
expect info-plan 0 "^route +memory.planner=no_reuse pass.fuse_conv=off" -- "$bin" info "$tmp/r.plan"
grep -qE "^  data_0 +float\[1,3,224,224\]" "$tmp/out" && grep -qE "^  softmaxout_1 +float\[1,1000,1,1\]" "$tmp/out" \
  && grep -qE "^steps +[0-9]+ \(0 dynamic\)" "$tmp/out" && echo "ok   info-plan-io" || { echo "FAIL info-plan-io"; cat "$tmp/out"; fails=$((fails+1)); }
"$bin" info "$tmp/default.plan" --json --dump > "$tmp/info.json" 2>&1
pycheck info-plan-json "$tmp/info.json" "
assert j['route'] == '' and j['backend'] == 'cpu' and j['steps'] == $steps, (j['route'], j['steps'], $steps)
assert j['inputs'] == [{'name': 'data_0', 'type': 'float[1,3,224,224]'}], j['inputs']
assert [o['name'] for o in j['outputs']] == ['softmaxout_1']
assert len(j['step_list']) == j['steps'] and sum(j['tactics'].values()) == j['steps']
assert j['arena_bytes'] > 0 and j['weight_bytes'] > 4e6, (j['arena_bytes'], j['weight_bytes'])
"
python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[len(b)//2]^=0x40; open(sys.argv[2],"wb").write(b)' "$tmp/r.plan" "$tmp/corrupt.plan"
expect info-plan-corrupt 2 "corrupt.plan: checksum mismatch: the plan is corrupt" -- "$bin" info "$tmp/corrupt.plan"

# --- profile --json: every step in run order.
"$bin" profile "$tmp/default.plan" --runs 3 --json > "$tmp/prof.out" 2>&1
pycheck profile-json "$tmp/prof.out" "
s = j['steps']
assert len(s) == $steps, (len(s), $steps)
assert [x['step'] for x in s] == list(range(len(s)))
assert all(x['tactic'] and x['op'] and x['engine_us'] >= 0 and x['isolated_us'] >= 0 for x in s)
assert abs(sum(x['engine_us'] for x in s) / 1e3 - j['sum_engine_ms']) < 1e-3 * max(1, j['sum_engine_ms'])
assert j['median_ms'] > 0 and j['runs'] >= 3 and j['backend'] == 'cpu'
assert sum(1 for x in s if x['op'] in ('Conv', 'FusedConv')) >= 26, 'squeezenet has 26 convolutions'
"
grep -q "^sum of steps inside the engine" "$tmp/prof.out" && echo "ok   profile-json-keeps-table" || { echo "FAIL profile-json-keeps-table"; fails=$((fails+1)); }

# --- bench --export-times: every timed run.
"$bin" bench "$tmp/default.plan" --min-runs 9 --min-seconds 0 --warmup 1 --input-sets 3 --export-times "$tmp/times.json" --json > "$tmp/bench.out" 2>&1
pycheck bench-export-times "$tmp/bench.out" "
t = json.load(open('$tmp/times.json'))
it = t['iterations']
assert len(it) == j['runs'] >= 9, (len(it), j['runs'])
assert [x['iteration'] for x in it] == list(range(len(it)))
assert [x['input_set'] for x in it] == [i % 3 for i in range(len(it))]
assert t['timing'] == 'host_wall' and t['input_sets'] == 3 and t['warmup_runs'] == 1
ms = sorted(x['ms'] for x in it)
assert all(m > 0 for m in ms)
assert abs(ms[len(ms) // 2] - j['median_ms']) <= 1e-5 * j['median_ms'] + 1e-6, (ms[len(ms) // 2], j['median_ms'])
"
expect bench-export-times-compare 2 "--export-times writes one engine's runs: it does not apply to --compare" -- \
  "$bin" bench "$model" --compare "default,$tmp/r.route" --export-times "$tmp/t2.json"
expect bench-export-times-unwritable 1 "$tmp/no/dir/t.json: cannot write the --export-times file" -- \
  "$bin" bench "$tmp/default.plan" --min-runs 2 --min-seconds 0 --warmup 0 --export-times "$tmp/no/dir/t.json"

# --- compare: two engines on the same inputs.
expect compare-default-vs-reference 0 "^PASS: every compared output of A is within the tolerance of B" -- "$bin" compare "$model" --json
grep -q "^B: reference interpreter" "$tmp/out" && grep -q "^tolerance: l2<=1e-05,cos>=0.99999,atol=1e-04,rtol=0.001 (metrics of A against B)" "$tmp/out" \
  && echo "ok   compare-defaults" || { echo "FAIL compare-defaults"; head -5 "$tmp/out"; fails=$((fails+1)); }
pycheck compare-json "$tmp/out" "
assert j['pass'] is True and j['b'] == 'reference interpreter'
o = j['sets'][0]['outputs']
assert [x['name'] for x in o] == ['softmaxout_1']
o = o[0]
assert 0 < o['linf'] < 1e-4 and o['cos'] > 0.99999 and o['max_rel'] >= 0 and o['finite'] is True, o
"
# A plan and a fresh build of its route: the same engine, bit-identical outputs.
expect compare-plan-vs-route 0 "softmaxout_1 +float\[1,1000,1,1\] +0 +0 +0 +0 +1\.00000000 +0 +PASS" -- \
  "$bin" compare "$model" --a "$tmp/r.plan" --b "$tmp/r.route" --seed 7
expect compare-route-text 0 "^A: route 'pass.fuse_conv=off' on cpu" -- "$bin" compare "$model" --a "pass.fuse_conv=off" --b default
expect compare-test-data 0 "^test_data_set_0: A ran" -- "$bin" compare "$model" --inputs "$dir/test_data_set_0"
expect compare-input-file 0 "^inputs: --input files" -- "$bin" compare "$model" --input "data_0=$input"
# float32 against the float64 reference cannot meet a relative l2 of 1e-12: exit 1, naming the output.
expect compare-fail 1 "^FAIL: output 'softmaxout_1': l2 [0-9.e-]+ > 1e-12" -- "$bin" compare "$model" --tolerance "l2<=1e-12"
if "$bin" knobs "$model" | grep -q '^precision.calibration'; then
  expect compare-int8-strict 1 "^FAIL: output 'softmaxout_1': (l2|cos) " -- "$bin" compare "$model" --a "precision.default=int8" --b default
  expect compare-int8-loose 0 "^PASS" -- "$bin" compare "$model" --a "precision.default=int8" --b default --tolerance "cos>=0.99"
fi
expect compare-missing-plan 1 "io_error: --a '.*none.plan': .*none.plan: cannot open the plan" -- \
  "$bin" compare "$model" --a "$tmp/none.plan"
expect compare-no-such-side 2 "--b 'nosuch': no such file; a side is default, reference, route text" -- "$bin" compare "$model" --b nosuch
expect compare-unknown-output 2 "--output 'nope': .*squeezenet1.1/model.onnx has no output or node output named so" -- \
  "$bin" compare "$model" --output nope
# An intermediate value becomes an output of both engines: how a wrong output is traced to a step.
expect compare-intermediate 0 "^  fire2/concat_1 +float\[1,128,55,55\] .* PASS" -- \
  "$bin" compare "$model" --a "pass.fuse_conv=off" --b reference --output fire2/concat_1 --output softmaxout_1
grep -q "^  softmaxout_1 .* PASS" "$tmp/out" && echo "ok   compare-intermediate-and-output" \
  || { echo "FAIL compare-intermediate-and-output"; cat "$tmp/out"; fails=$((fails+1)); }
expect compare-intermediate-fail 1 "^FAIL: output 'conv1_2': l2 [0-9.e-]+ > 1e-14" -- \
  "$bin" compare "$model" --output conv1_2 --tolerance "l2<=1e-14" --b "layout.default=nchw"
expect compare-intermediate-plan 2 "--output 'conv1_2': not an output of .*model.onnx, and --a is a saved plan, whose outputs are fixed" -- \
  "$bin" compare "$model" --a "$tmp/r.plan" --output conv1_2
expect compare-intermediate-input 2 "--output 'data_0': .* has no output or node output named so" -- "$bin" compare "$model" --output data_0
expect compare-bad-tolerance 2 "--tolerance: tolerance term 'l2<1e-3'" -- "$bin" compare "$model" --tolerance "l2<1e-3"
expect compare-reference-backend 2 "--a-backend: --a reference runs the reference interpreter on the host" -- \
  "$bin" compare "$model" --a reference --a-backend cpu
expect compare-bad-knob 2 "--b 'pass.fuse_cnv=off': .*unknown knob 'pass.fuse_cnv'" -- "$bin" compare "$model" --b "pass.fuse_cnv=off"
expect compare-plan-positional 2 "compare takes MODEL.onnx; give plans as --a / --b" -- "$bin" compare "$tmp/r.plan"
if ! "$bin" build "$model" --backend cuda > /dev/null 2>&1; then
  expect compare-cuda-absent 2 "invalid_argument: --b 'default': --backend cuda: (no CUDA device is present|this tactician was built without)" -- \
    "$bin" compare "$model" --a default --a-backend cpu --b default --b-backend cuda
else
  expect compare-cpu-vs-cuda 0 "^PASS" -- "$bin" compare "$model" --a default --a-backend cpu --b default --b-backend cuda \
    --tolerance "cos>=0.9999,l2<=1e-3"
fi
if [ -n "$zoo" ] && [ -d "$zoo/bert-toy" ]; then
  # Two outputs, integer inputs with symbolic dims, the model's own test data; --output picks one.
  expect compare-bert-both 0 "^  seq_relationship_score .*PASS" -- "$bin" compare "$zoo/bert-toy/model.onnx" --inputs "$zoo/bert-toy/test_data_set_0" --json
  pycheck compare-bert-json "$tmp/out" "
assert [o['name'] for o in j['sets'][0]['outputs']] == ['prediction_scores', 'seq_relationship_score']
assert all(o['pass'] and o['cos'] > 0.99999 for o in j['sets'][0]['outputs'])
"
  expect compare-bert-output 0 "seq_relationship_score" -- "$bin" compare "$zoo/bert-toy/model.onnx" --inputs "$zoo/bert-toy/test_data_set_0" \
    --output seq_relationship_score --json
  pycheck compare-bert-output-json "$tmp/out" "assert [o['name'] for o in j['sets'][0]['outputs']] == ['seq_relationship_score']"
  expect compare-bert-random-dims 0 "^inputs: seeded random \(--seed 3\)" -- "$bin" compare "$zoo/bert-toy/model.onnx" --dim batch=2 \
    --dim max_seq_len_in_batch=5 --seed 3 --a default --b "pass.fuse_attention=off"
  expect compare-inputs-and-input 2 "--inputs DIR and --input NAME=FILE: give one" -- "$bin" compare "$zoo/bert-toy/model.onnx" \
    --inputs "$zoo/bert-toy/test_data_set_0" --input "input_ids=$zoo/bert-toy/test_data_set_0/input_0.pb"
fi
if [ -n "$zoo" ] && [ -f "$tmp/mnist.plan" ]; then
  expect compare-plan-other-model 2 "mnist.plan: the plan was built from another model" -- "$bin" compare "$model" --a "$tmp/mnist.plan"
fi

[ $fails -eq 0 ] && echo "all CLI gap checks passed" || { echo "$fails CLI gap checks failed"; exit 1; }
