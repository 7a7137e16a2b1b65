#!/usr/bin/env bash
# Tactician vs ONNX Runtime 1.30 on the CPU, interleaved, several rounds; writes a Markdown report.
#
# usage: bench/run_cpu.sh [--rounds R] [--threads "1 2"] [--models "resnet18 bert-base ..." | --wide]
#                         [--out FILE | --no-save] [--quick]
#
# For each model and thread count, R rounds; each round runs Tactician once and then ORT once
# (A B A B ...), each a separate process:
#   $TACTICIAN bench MODEL.onnx --threads N --json $TACTICIAN_ARGS       (last stdout line: JSON)
#   node bench/ort/bench_ort.js MODEL.onnx --threads N $ORT_ARGS          (one JSON line)
# An engine's figure is the median of its R round medians (median_ms of each JSON line). A side that is
# missing, fails, times out or prints no median gives "n/a" for that cell, never a number.
# Environment: TACTICIAN (default build/tactician), TACTICIAN_ARGS, ORT_ARGS, SHARED_MODELS (default
# ../shared/models from the repo root), BENCH_TIMEOUT (seconds per invocation, default 900).
# Needs: node (+ npm install in bench/ort), python3 (standard library only), g++ for fma_peak.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

ROUNDS=5
THREADS="1 2"
MODELS="resnet18 mobilenet_v2 squeezenet1.1 bert-mini-like tiny-gpt resnet50 bert-base"
WIDE_MODELS="mobilenet_v3_large efficientnet_b1 shufflenet_v2_x0_5 densenet121 mnasnet1_0 regnet_y_400mf resnext50_32x4d convnext_tiny yolo_head distilbert_mask lstm_audio resnet18_fp16"
OUT=""
SAVE=1
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --wide) MODELS=$WIDE_MODELS; shift ;;
    --out) OUT=$2; shift 2 ;;
    --no-save) SAVE=0; shift ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_cpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
CMDLINE="bench/run_cpu.sh"
[ "$ROUNDS" != 5 ] && CMDLINE+=" --rounds $ROUNDS"
[ "$THREADS" != "1 2" ] && CMDLINE+=" --threads \"$THREADS\""
if [ "$MODELS" = "$WIDE_MODELS" ]; then CMDLINE+=" --wide"
elif [ "$MODELS" != "resnet18 mobilenet_v2 squeezenet1.1 bert-mini-like tiny-gpt resnet50 bert-base" ]; then CMDLINE+=" --models \"$MODELS\""; fi
[ "$QUICK" = 1 ] && CMDLINE+=" --quick"

TACTICIAN=${TACTICIAN:-build/tactician}
SHARED_MODELS=${SHARED_MODELS:-$ROOT/../shared/models}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-900}
TACTICIAN_ARGS=${TACTICIAN_ARGS:-}
ORT_ARGS=${ORT_ARGS:-}
if [ "$QUICK" = 1 ]; then
  ORT_ARGS="--min-runs 5 --min-s 0.5 --warmup-s 0.2 $ORT_ARGS"
fi

# The zoo's models from ../shared/models; resnet50, bert-base and the wider set of issue 31
# (--wide: bench/export_models.py --only wide) from bench/models.
model_path() {
  if [ -f "$SHARED_MODELS/$1/model.onnx" ]; then echo "$SHARED_MODELS/$1/model.onnx"
  else echo "$ROOT/bench/models/$1/model.onnx"; fi
}

# ---- FMA peak ----
FMA=build/bench/fma_peak
if [ ! -x "$FMA" ] || [ bench/fma_peak.cc -nt "$FMA" ]; then
  mkdir -p build/bench && g++ -O2 -std=c++17 -o "$FMA" bench/fma_peak.cc || echo "run_cpu.sh: fma_peak did not build" >&2
fi
FMA_LINES=$([ -x "$FMA" ] && "$FMA" 2>&1 || echo "fma_peak: n/a")
echo "$FMA_LINES" >&2

# ---- work per model (for achieved GFLOP/s): bench/flops.py, 2 x MACs of Conv/MatMul/Gemm ----
PY_ONNX=${PY_ONNX:-/usr/bin/python3}
FLOPS=""
for m in $MODELS; do
  mp=$(model_path "$m")
  [ -f "$mp" ] || continue
  f=$("$PY_ONNX" bench/flops.py "$mp" 2>/dev/null | tail -n 1 | cut -f1,2)
  [ -n "$f" ] && FLOPS+="$m"$'\t'"$f"$'\n'
done
PEAK=$(printf '%s\n' "$FMA_LINES" | sed -n 's/.*AVX-512: \([0-9.]*\) GFLOP.*/\1/p' | head -1)

# ---- the runs ----
LOGDIR=$(mktemp -d /tmp/tactician-bench.XXXXXX)
RAW="$LOGDIR/raw.tsv"   # model threads engine round median_ms|n/a note
: > "$RAW"
[ -x "$TACTICIAN" ] || echo "run_cpu.sh: no $TACTICIAN: the Tactician column will be n/a" >&2
[ -d bench/ort/node_modules/onnxruntime-node ] || echo "run_cpu.sh: run 'npm install --ignore-scripts' in bench/ort first: the ORT column will be n/a" >&2

# run ENGINE MODEL THREADS ROUND: appends one line to $RAW
run_one() {
  local engine=$1 model=$2 threads=$3 round=$4 mp log json med note=""
  mp=$(model_path "$model")
  log="$LOGDIR/$model.t$threads.$engine.r$round.log"
  if [ ! -f "$mp" ]; then
    note="model missing: $mp"
  elif [ "$engine" = tactician ]; then
    if [ -x "$TACTICIAN" ]; then
      # shellcheck disable=SC2086
      timeout "$BENCH_TIMEOUT" "$TACTICIAN" bench "$mp" --threads "$threads" --json $TACTICIAN_ARGS > "$log" 2> "$log.err"
      local rc=$?; [ $rc -ne 0 ] && note="exit $rc"
    else
      note="no $TACTICIAN"
    fi
  else
    # shellcheck disable=SC2086
    timeout "$BENCH_TIMEOUT" node bench/ort/bench_ort.js "$mp" --threads "$threads" $ORT_ARGS > "$log" 2> "$log.err"
    local rc=$?; [ $rc -ne 0 ] && note="exit $rc"
  fi
  med="n/a"
  if [ -z "$note" ]; then
    json=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)
    med=$(printf '%s' "$json" | python3 -c '
import json, math, sys
try:
    v = float(json.loads(sys.stdin.read())["median_ms"])
    print(repr(v) if math.isfinite(v) and v > 0 else "n/a")
except Exception:
    print("n/a")')
    [ "$med" = "n/a" ] && note="no median_ms in the last line"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$threads" "$engine" "$round" "$med" "$note" >> "$RAW"
  printf 'run_cpu.sh: %-14s t%s %-9s round %s: %s %s\n' "$model" "$threads" "$engine" "$round" "$med" "$note" >&2
}

START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for t in $THREADS; do
  for m in $MODELS; do
    for r in $(seq 1 "$ROUNDS"); do
      run_one tactician "$m" "$t" "$r"
      run_one ort "$m" "$t" "$r"
    done
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the report ----
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT-dirty"
CPU=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
NCPU=$(nproc)
DATE=$(date -u +%Y-%m-%d)
ORTV=$(node -p 'require("./bench/ort/node_modules/onnxruntime-node/package.json").version' 2>/dev/null || echo "?")
REPORT="$LOGDIR/report.md"
RAW="$RAW" ROUNDS="$ROUNDS" THREADS="$THREADS" MODELS="$MODELS" FMA_LINES="$FMA_LINES" \
CMDLINE="$CMDLINE" COMMIT="$COMMIT" CPU="$CPU" NCPU="$NCPU" START="$START" ORTV="$ORTV" \
LOAD="$LOAD_BEFORE -> $LOAD_AFTER" FLOPS="$FLOPS" PEAK="$PEAK" TACTICIAN_ARGS="$TACTICIAN_ARGS" ORT_ARGS="$ORT_ARGS" \
python3 - > "$REPORT" <<'PY'
import math, os, statistics as st
E = os.environ
rows = {}
for line in open(E['RAW']):
    model, threads, engine, rnd, med, note = line.rstrip('\n').split('\t')
    r = rows.setdefault((model, int(threads)), {'tactician': [], 'ort': [], 'notes': set()})
    if med != 'n/a':
        r[engine].append(float(med))
    elif note:
        r['notes'].add(f'{engine}: {note}')

def agg(v):  # median of the round medians, relative spread (max - min) / median
    if not v: return None, None
    m = st.median(v)
    return m, (max(v) - min(v)) / m
gflop = {}
for l in E['FLOPS'].splitlines():
    m, g, kind = l.split('\t')
    gflop[m] = (float(g), kind == 'lower-bound')
peak = float(E['PEAK']) if E['PEAK'] else None
def rate(m, t, x):  # achieved GFLOP/s and share of the measured peak x threads
    if x is None or m not in gflop: return 'n/a'
    g, lb = gflop[m]
    r = g / (x / 1e3)
    return ('≥' if lb else '') + f'{r:.0f}' + (f' ({100 * r / (peak * t):.0f}%)' if peak else '')
def ms(x): return 'n/a' if x is None else f'{x:.2f}'
def pct(x): return 'n/a' if x is None else f'{100 * x:.1f}%'

print('# CPU benchmark: Tactician vs ONNX Runtime')
print()
print(f"- command: `{E['CMDLINE']}`" + (f" with TACTICIAN_ARGS=`{E['TACTICIAN_ARGS']}`" if E['TACTICIAN_ARGS'] else '')
      + (f" ORT_ARGS=`{E['ORT_ARGS']}`" if E['ORT_ARGS'] else ''))
print(f"- commit: {E['COMMIT']}")
print(f"- machine: {E['CPU']}, {E['NCPU']} cores (shared with other work; load average before -> after: {E['LOAD']})")
print(f"- date: {E['START']} (UTC)")
print(f"- ONNX Runtime: onnxruntime-node {E['ORTV']}, CPU EP, graph optimizations all, intra-op threads = N, "
      f"inter-op 1, sequential")
print(f"- method: {E['ROUNDS']} rounds per cell, interleaved (Tactician, ORT, Tactician, ORT, ...), each run a new "
      f"process; each engine's figure is the median of its round medians; spread = (max - min) / median of the "
      f"round medians, per engine")
print("- GFLOP = 2 x multiply-adds of the model's Conv/MatMul/Gemm nodes at batch 1 (bench/flops.py; ≥: some "
      "attention MatMuls had no inferred shape and are left out); peak = the AVX-512 line below")
for l in E['FMA_LINES'].splitlines():
    print(f'- {l.strip()}')
print()
print('| model | threads | tactician ms | ORT ms | ratio tactician/ORT | spread (tactician; ORT) | GFLOP | GFLOP/s (% of peak x threads): tactician; ORT |')
print('| --- | --- | --- | --- | --- | --- | --- | --- |')
ratios = {}
notes = []
for t in [int(x) for x in E['THREADS'].split()]:
    for m in E['MODELS'].split():
        r = rows.get((m, t), {'tactician': [], 'ort': [], 'notes': set()})
        tm, ts = agg(r['tactician'])
        om, os_ = agg(r['ort'])
        ratio = tm / om if tm and om else None
        if ratio: ratios.setdefault(t, []).append(ratio)
        nr = f" ({len(r['tactician'])}/{len(r['ort'])} rounds)" if (r['tactician'] and len(r['tactician']) != int(E['ROUNDS'])) or (r['ort'] and len(r['ort']) != int(E['ROUNDS'])) else ''
        print(f"| {m} | {t} | {ms(tm)} | {ms(om)} | {'n/a' if ratio is None else f'{ratio:.3f}'} | {pct(ts)}; {pct(om and os_)}{nr} | {('≥' if gflop[m][1] else '') + f'{gflop[m][0]:.3f}' if m in gflop else 'n/a'} | {rate(m, t, tm)}; {rate(m, t, om)} |")
        for n in sorted(r['notes']):
            notes.append(f'{m}, {t} thread(s): {n}')
print()
for t in [int(x) for x in E['THREADS'].split()]:
    v = ratios.get(t, [])
    g = math.exp(sum(math.log(x) for x in v) / len(v)) if v else None
    print(f"- geometric mean of tactician/ORT at {t} thread(s): {'n/a' if g is None else f'{g:.3f}'} "
          f"over {len(v)} model(s)")
if notes:
    print()
    print('Cells without a figure:')
    print()
    for n in sorted(set(notes)):
        print(f'- {n}')
PY
cat "$REPORT"
if [ "$SAVE" = 1 ]; then
  if [ -z "$OUT" ]; then
    mkdir -p bench/results
    OUT="bench/results/cpu-$DATE-$COMMIT.md"
    i=2; while [ -e "$OUT" ]; do OUT="bench/results/cpu-$DATE-$COMMIT-$i.md"; i=$((i + 1)); done
  fi
  cp "$REPORT" "$OUT"
  echo "run_cpu.sh: saved $OUT (logs in $LOGDIR)" >&2
else
  echo "run_cpu.sh: logs in $LOGDIR" >&2
fi
