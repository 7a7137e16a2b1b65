#!/usr/bin/env bash
# Every tuner command on every model of ../shared/models (issue 4's "all commands work on every
# model"): a short tune with --json and --out, the best route replayed (`build --route-file` then
# `check` against the model's own test data at MODELS.md's tolerance), `explain` and `report` on
# the tune's database. Prints one line per model and a summary; exit status 1 if any step failed.
#
# usage: scripts/tune_zoo_check.sh [--budget 30s] [--threads 1] [--models "mnist-cntk ..."] [--keep DIR]
# Environment: TACTICIAN (default build/tactician), SHARED_MODELS (default ../shared/models).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUDGET=30s
THREADS=1
MODELS=""
KEEP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) BUDGET=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tune_zoo_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
TACTICIAN=${TACTICIAN:-build/tactician}
SHARED_MODELS=${SHARED_MODELS:-$ROOT/../shared/models}
[ -x "$TACTICIAN" ] || { echo "tune_zoo_check.sh: no $TACTICIAN" >&2; exit 1; }
if [ -z "$MODELS" ]; then
  MODELS=$(for d in "$SHARED_MODELS"/*/; do [ -f "$d/model.onnx" ] && basename "$d"; done)
fi
WORK=${KEEP:-$(mktemp -d /tmp/tactician-zoo-tune.XXXXXX)}
mkdir -p "$WORK"
fails=0
printf '%-18s %-6s %9s %9s %8s %5s %-6s %-6s %-7s %-6s\n' model tune default_ms best_ms speedup cands replay check explain report
for m in $MODELS; do
  dir="$SHARED_MODELS/$m"
  out="$WORK/$m"
  db="$WORK/$m.db"
  rm -rf "$out" "$db"*
  st_tune=ok st_replay=ok st_check=ok st_explain=ok st_report=ok
  "$TACTICIAN" tune "$dir/model.onnx" --budget "$BUDGET" --threads "$THREADS" --db "$db" --out "$out" --quiet --json \
    > "$WORK/$m.tune.log" 2> "$WORK/$m.tune.err" || st_tune=FAIL
  summary=$(tail -n 1 "$WORK/$m.tune.log" 2>/dev/null)
  read -r def best sp cands < <(python3 -c '
import json, sys
try:
    s = json.loads(sys.argv[1]); print("%.3f %.3f %.3f %s" % (s["default_ms"], s["best_ms"], s["speedup"], s["candidates"]))
except Exception:
    print("n/a n/a n/a n/a")' "$summary")
  [ "$def" = n/a ] && st_tune=FAIL
  # The best route replays: built from best.route, then checked on the model's own test data.
  if [ -f "$out/best.route" ]; then
    "$TACTICIAN" build "$dir/model.onnx" --route-file "$out/best.route" -o "$WORK/$m.replay.plan" \
      > "$WORK/$m.replay.log" 2>&1 || st_replay=FAIL
    if ls -d "$dir"/test_data_set_* > /dev/null 2>&1; then
      "$TACTICIAN" check "$dir" --route-file "$out/best.route" --rtol 1e-3 --atol 1e-4 \
        > "$WORK/$m.check.log" 2>&1 || st_check=FAIL
    else
      st_check=n/a
    fi
  else
    st_replay=FAIL st_check=FAIL
  fi
  "$TACTICIAN" explain "$dir/model.onnx" --db "$db" --threads "$THREADS" --rounds 1 > "$WORK/$m.explain.log" 2>&1 || st_explain=FAIL
  "$TACTICIAN" report "$db" -o "$WORK/$m.report.html" > "$WORK/$m.report.log" 2>&1 || st_report=FAIL
  [ -s "$WORK/$m.report.html" ] || st_report=FAIL
  for s in $st_tune $st_replay $st_check $st_explain $st_report; do [ "$s" = FAIL ] && fails=$((fails + 1)); done
  printf '%-18s %-6s %9s %9s %8s %5s %-6s %-6s %-7s %-6s\n' "$m" $st_tune "$def" "$best" "$sp" "$cands" $st_replay $st_check \
    $st_explain $st_report
done
echo "logs in $WORK; $fails failed step(s)"
[ $fails -eq 0 ]
