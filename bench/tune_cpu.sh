#!/usr/bin/env bash
# Tuned vs default vs isolated-selection engines, and against ONNX Runtime, on the CPU.
#
# usage: bench/tune_cpu.sh [--budget 10m] [--threads "1 2"] [--models "resnet18 ..."] [--rounds 3]
#                          [--strategy tpe] [--tolerance "..."] [--out FILE | --no-save] [--reuse WORK]
#
# For each model and thread count:
#   1. tactician tune MODEL --budget B --threads N --strategy S [--tolerance T] --out WORK/<model>.t<N>
#      (its wall time is the tuning cost; its best.route is the tuned engine)
#   2. R rounds, each a new process per engine kind:
#        tactician bench MODEL --threads N --json --compare default,WORK/isolated.route,WORK/.../best.route
#          (default route, builder.selection=isolated = per-layer profiling, tuned: the three engines in one
#          process, timed in 0.5 s blocks that rotate among them 3 times, so a slow spell of the shared
#          machine falls on all three alike; separate processes per engine disagreed by up to 30% at 2 threads)
#        node bench/ort/bench_ort.js MODEL --threads N                               (ONNX Runtime, if installed)
#   (all tunes first, then all rounds). --reuse WORK: no tunes; the best.route files and tuning
#   times of an earlier run's work folder (/tmp/tactician-tune-bench.*) are measured again. Each figure is the median of the R round medians. Prints a Markdown table with the speed-ups
#   (default/tuned, default/isolated, ORT/tuned), the tuning wall time and the break-even (how many
#   inferences repay the tuning time), with geometric means; saves it to results/tune-<date>-<commit>.md.
# Environment: TACTICIAN (default build/tactician), SHARED_MODELS, BENCH_TIMEOUT (default 900 s).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUDGET=10m
ROUNDS=3
THREADS="1 2"
MODELS="resnet18 mobilenet_v2 squeezenet1.1 bert-mini-like tiny-gpt resnet50 bert-base"
STRATEGY=tpe
TOLERANCE=""
OUT=""
SAVE=1
REUSE=""
CMDLINE="bench/tune_cpu.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) BUDGET=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --strategy) STRATEGY=$2; shift 2 ;;
    --tolerance) TOLERANCE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --no-save) SAVE=0; shift ;;
    --reuse) REUSE=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tune_cpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
TACTICIAN=${TACTICIAN:-build/tactician}
SHARED_MODELS=${SHARED_MODELS:-$ROOT/../shared/models}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900}
[ -x "$TACTICIAN" ] || { echo "tune_cpu.sh: no $TACTICIAN (run scripts/setup.sh)" >&2; exit 1; }
HAVE_ORT=1
[ -d bench/ort/node_modules/onnxruntime-node ] || { HAVE_ORT=0; echo "tune_cpu.sh: no ONNX Runtime (npm install --ignore-scripts in bench/ort): its column will be n/a" >&2; }
model_path() {
  case "$1" in
    resnet50|bert-base) echo "$ROOT/bench/models/$1/model.onnx" ;;
    *) echo "$SHARED_MODELS/$1/model.onnx" ;;
  esac
}
WORK=$(mktemp -d /tmp/tactician-tune-bench.XXXXXX)
RAW="$WORK/raw.tsv"   # model threads engine value note   (engine: tune_s | default | isolated | tuned | ort)
: > "$RAW"
median_of_last_json() {
  grep -v '^[[:space:]]*$' "$1" | tail -n 1 | python3 -c '
import json, math, sys
try:
    v = float(json.loads(sys.stdin.read())["median_ms"]); print(repr(v) if math.isfinite(v) and v > 0 else "n/a")
except Exception:
    print("n/a")'
}
bench_compare() {  # model threads round entries: one process, default/isolated/tuned interleaved
  local m=$1 t=$2 r=$3 entries=$4
  local log="$WORK/$m.t$t.compare.r$r.log"
  timeout "$BENCH_TIMEOUT" "$TACTICIAN" bench "$(model_path "$m")" --threads "$t" --json --compare "$entries" \
    --rounds 3 --block-seconds 0.5 > "$log" 2> "$log.err"
  grep -v '^[[:space:]]*$' "$log" | tail -n 1 | python3 -c '
import json, sys
names = sys.argv[1].split(",")
try:
    got = {e["name"]: e["median_ms"] for e in json.loads(sys.stdin.read())["engines"]}
except Exception:
    got = {}
for label, name in zip(("default", "isolated", "tuned"), names):
    print("\t".join([sys.argv[2], sys.argv[3], label, str(got.get(name, "n/a")), ""]))' "$entries" "$m" "$t" >> "$RAW"
  printf 'tune_cpu.sh: %-14s t%s compare round %s: %s\n' "$m" "$t" "$r" "$(tail -n 3 "$RAW" | cut -f3,4 | tr '\t\n' '= ')" >&2
}
bench_one() {  # engine model threads round [args...]
  local engine=$1 m=$2 t=$3 r=$4; shift 4
  local log="$WORK/$m.t$t.$engine.r$r.log" med
  if [ "$engine" = ort ]; then
    if [ $HAVE_ORT = 1 ]; then timeout "$BENCH_TIMEOUT" node bench/ort/bench_ort.js "$(model_path "$m")" --threads "$t" > "$log" 2> "$log.err"; fi
  else
    timeout "$BENCH_TIMEOUT" "$TACTICIAN" bench "$(model_path "$m")" --threads "$t" --json "$@" > "$log" 2> "$log.err"
  fi
  med=$( [ -s "$log" ] && median_of_last_json "$log" || echo n/a)
  printf '%s\t%s\t%s\t%s\t\n' "$m" "$t" "$engine" "$med" >> "$RAW"
  printf 'tune_cpu.sh: %-14s t%s %-8s round %s: %s\n' "$m" "$t" "$engine" "$r" "$med" >&2
}
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# The commit of the checkout when the run starts (a run takes an hour or more: later commits must
# not be named as the one measured; with TACTICIAN pointing at a copy, the copy's build is meant).
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT-dirty"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
# Phase 1: every tune (the long part); phase 2: every comparison round, so that the rounds of all
# models run together at the end (keep the machine quiet then).
for t in $THREADS; do
  for m in $MODELS; do
    mp=$(model_path "$m")
    [ -f "$mp" ] || { echo "tune_cpu.sh: $mp missing, skipped" >&2; continue; }
    out="$WORK/$m.t$t"
    if [ -n "$REUSE" ]; then
      [ -d "$REUSE/$m.t$t" ] && ln -s "$REUSE/$m.t$t" "$out"
      grep -P "^$m\t$t\ttune_s\t" "$REUSE/raw.tsv" | tail -n 1 >> "$RAW"
      continue
    fi
    tol=(); [ -n "$TOLERANCE" ] && tol=(--tolerance "$TOLERANCE")
    echo "tune_cpu.sh: tuning $m at $t thread(s), budget $BUDGET ($(date -u +%H:%M:%S) UTC)" >&2
    t0=$(date +%s.%N)
    "$TACTICIAN" tune "$mp" --budget "$BUDGET" --threads "$t" --strategy "$STRATEGY" "${tol[@]}" \
      --db "$WORK/tune.db" --out "$out" --quiet --json > "$out.tune.log" 2> "$out.tune.err"
    t1=$(date +%s.%N)
    printf '%s\t%s\ttune_s\t%s\t%s\n' "$m" "$t" "$(python3 -c "print($t1 - $t0)")" "$(tail -n 1 "$out.tune.log" | tr '\t' ' ')" >> "$RAW"
  done
done
LOAD_MID=$(cut -d' ' -f1-3 /proc/loadavg)
echo "tune_cpu.sh: tunes done, comparison rounds start ($(date -u +%H:%M:%S) UTC)" >&2
for t in $THREADS; do
  for m in $MODELS; do
    [ -f "$(model_path "$m")" ] || continue
    out="$WORK/$m.t$t"
    echo "builder.selection=isolated" > "$WORK/isolated.route"
    entries="default,$WORK/isolated.route"
    if [ -f "$out/best.route" ]; then entries="$entries,$out/best.route"; else printf '%s\t%s\ttuned\tn/a\tno best.route\n' "$m" "$t" >> "$RAW"; fi
    for r in $(seq 1 "$ROUNDS"); do
      bench_compare "$m" "$t" "$r" "$entries"
      bench_one ort "$m" "$t" "$r"
    done
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
REPORT="$WORK/report.md"
RAW="$RAW" CMDLINE="$CMDLINE" COMMIT="$COMMIT" BINARY="$TACTICIAN" START="$START" LOAD="$LOAD_BEFORE -> $LOAD_MID (tunes done) -> $LOAD_AFTER" THREADS="$THREADS" \
MODELS="$MODELS" CPU="$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)" NCPU="$(nproc)" ROUNDS="$ROUNDS" \
BUDGET="$BUDGET" STRATEGY="$STRATEGY" TOLERANCE="${TOLERANCE:-default (fp32: l2<=1e-5, cos>=0.99999)}" python3 - > "$REPORT" <<'PY'
import glob, json, math, os, statistics as st
E = os.environ
vals, tune = {}, {}
for line in open(E['RAW']):
    m, t, eng, v, note = (line.rstrip('\n').split('\t') + [''])[:5]
    if eng == 'tune_s':
        try: tune[(m, int(t))] = (float(v), json.loads(note))
        except Exception: tune[(m, int(t))] = (float(v), {})
        continue
    if v != 'n/a': vals.setdefault((m, int(t), eng), []).append(float(v))
med = lambda k: st.median(vals[k]) if vals.get(k) else None
f2 = lambda x: 'n/a' if x is None else f'{x:.2f}'
f3 = lambda x: 'n/a' if x is None else f'{x:.3f}x'
print('# CPU benchmark: tuned vs default vs isolated selection, and ONNX Runtime')
print()
print(f"- command: `{E['CMDLINE']}`")
print(f"- commit: {E['COMMIT']} (binary {E['BINARY']}); machine: {E['CPU']}, {E['NCPU']} cores (shared; load {E['LOAD']}); date {E['START']} UTC")
print(f"- tune: `tactician tune MODEL --budget {E['BUDGET']} --strategy {E['STRATEGY']} --threads N`, tolerance {E['TOLERANCE']}")
print(f"- all tunes first, then {E['ROUNDS']} rounds, each one `bench --compare default,isolated,tuned` process (3 rotations of 0.5 s blocks) and one ORT process; ms figures are medians of the round medians, default/tuned and default/isolated the medians of the per-round (paired) ratios")
print()
print('| model | threads | default ms | isolated ms | tuned ms | ORT ms | default/tuned | default/isolated | ORT/tuned | tuning s (candidates) | break-even inferences |')
print('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
geo = {}
for t in [int(x) for x in E['THREADS'].split()]:
    for m in E['MODELS'].split():
        d, i, u, o = (med((m, t, e)) for e in ('default', 'isolated', 'tuned', 'ort'))
        if d is None and u is None: continue
        ts, summ = tune.get((m, t), (None, {}))
        s_tu = d / u if d and u else None
        s_is = d / i if d and i else None
        # Paired: the median over rounds of each round's default/tuned and default/isolated ratio
        # (one --compare process per round: the engines of a round share its process's state).
        pr = {'isolated': [], 'tuned': []}
        for log in sorted(glob.glob(os.path.join(os.path.dirname(E['RAW']), f'{m}.t{t}.compare.r*.log'))):
            try:
                eng = json.loads([l for l in open(log) if l.strip()][-1])['engines']
                for k, name in ((1, 'isolated'), (2, 'tuned')):
                    if len(eng) > k: pr[name].append(eng[0]['median_ms'] / eng[k]['median_ms'])
            except Exception:
                pass
        if pr['tuned']: s_tu = st.median(pr['tuned'])
        if pr['isolated']: s_is = st.median(pr['isolated'])
        s_ort = o / u if o and u else None
        for k, v in (('tuned', s_tu), ('isolated', s_is), ('ort', s_ort)):
            if v: geo.setdefault((t, k), []).append(v)
        be = 'never' if not (d and u and d > u) else f'{ts / ((d - u) / 1e3):,.0f}'
        cand = summ.get('candidates', '?')
        print(f'| {m} | {t} | {f2(d)} | {f2(i)} | {f2(u)} | {f2(o)} | {f3(s_tu)} | {f3(s_is)} | {f3(s_ort)} | '
              f"{'n/a' if ts is None else f'{ts:.0f}'} ({cand}) | {be} |")
print()
gm = lambda v: math.exp(sum(map(math.log, v)) / len(v))
for t in [int(x) for x in E['THREADS'].split()]:
    parts = [f'{k} {gm(geo[(t, k)]):.3f}x over {len(geo[(t, k)])}' for k in ('tuned', 'isolated', 'ort') if geo.get((t, k))]
    print(f'- geometric means at {t} thread(s): default/tuned, default/isolated, ORT/tuned: ' + '; '.join(parts))
PY
cat "$REPORT"
if [ "$SAVE" = 1 ]; then
  dest=${OUT:-bench/results/tune-$(date -u +%Y-%m-%d)-$COMMIT.md}
  cp "$REPORT" "$dest" && echo "tune_cpu.sh: saved $dest" >&2
fi
echo "tune_cpu.sh: logs in $WORK" >&2
