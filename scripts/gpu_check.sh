#!/usr/bin/env bash
# Runs on the GPU machine, over a package from scripts/pack_gpu.sh: the CUDA unit tests, then for
# each model folder given: `build --verbose` (tactics, host fallbacks), `check` against its
# reference outputs and `bench`, all with --backend cuda; optionally a slice of the ONNX node
# conformance suite. Logs go to OUT (few files: the device tool returns at most 8).
#
#   scripts/gpu_check.sh PKG_DIR OUT [--unit] [--node SLICE_DIR] [--bench] [--route R --rtol X --atol Y]
#                        [--tune BUDGET] MODEL_DIR...
#
# --route: build, check and bench with that route (e.g. "precision.default=fp16"), checking with
# the given tolerances (default rtol 1e-3, atol 1e-4); the logs name it.
# --tune B: also `tactician tune --backend cuda --budget B` per model (default tolerance, database
# and best.route under OUT/tune-<model>/), then `check` of its best.route against the reference data.
set -u
pkg=$1 out=$2
shift 2
unit=0 node="" bench=0 route="" rtol=1e-3 atol=1e-4 tune=""
while [ $# -gt 0 ]; do
  case "$1" in
    --unit) unit=1 ;;
    --node) node=$2; shift ;;
    --bench) bench=1 ;;
    --route) route=$2; shift ;;
    --rtol) rtol=$2; shift ;;
    --atol) atol=$2; shift ;;
    --tune) tune=$2; shift ;;
    *) break ;;
  esac
  shift
done
source "$pkg/env.sh"
mkdir -p "$out"
summary=$out/summary.txt
{
  echo "== $(date -u +%FT%TZ) $(cat "$pkg/COMMIT" | head -1)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv
} >> "$out/nvidia-smi.txt" 2>&1
nvidia-smi >> "$out/nvidia-smi.txt" 2>&1
if [ $unit = 1 ]; then
  filter='Cuda*:LayoutCuda*:AttentionTactics.*:BuilderPasses.Attention*'
  timeout 300 unit_tests --gtest_filter="$filter" > "$out/unit.txt" 2>&1
  echo "unit_tests $filter: rc=$? $(grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]' "$out/unit.txt" | tr '\n' ' ')" >> "$summary"
fi
for m in "$@"; do
  name=$(basename "$m")
  echo "===== $name [$route]" >> "$out/build.txt"
  timeout 300 tactician build "$m/model.onnx" --backend cuda --route "$route" --verbose >> "$out/build.txt" 2>&1
  echo "build $name [$route]: rc=$? $(grep -o '[0-9]* of [0-9]* steps fall back[^,]*' "$out/build.txt" | tail -1)" >> "$summary"
  echo "===== $name [$route]" >> "$out/check.txt"
  timeout 300 tactician check "$m" --backend cuda --route "$route" --rtol $rtol --atol $atol --verbose >> "$out/check.txt" 2>&1
  echo "check $name [$route] rtol $rtol atol $atol: rc=$? $(tail -1 "$out/check.txt")" >> "$summary"
  if [ -n "$tune" ]; then
    td=$out/tune-$name
    mkdir -p "$td"
    timeout 900 tactician tune "$m/model.onnx" --backend cuda --budget "$tune" --db "$td/tune.db" --out "$td" --quiet \
      --json > "$td.log" 2>&1
    echo "tune $name --budget $tune: rc=$? $(tail -1 "$td.log" | cut -c1-400)" >> "$summary"
    echo "===== $name [tuned: $(cat "$td/best.route" 2>/dev/null | tr '\n' ' ')]" >> "$out/check.txt"
    timeout 300 tactician check "$m" --backend cuda --route-file "$td/best.route" --rtol $rtol --atol $atol >> "$out/check.txt" 2>&1
    echo "check $name [tuned best.route] rtol $rtol atol $atol: rc=$? $(tail -1 "$out/check.txt")" >> "$summary"
    rm -f "$td/best.plan"
  fi
  if [ $bench = 1 ]; then
    for b in cuda cpu; do
      [ $b = cpu ] && [ -n "$route" ] && continue
      r=$(timeout 120 tactician bench "$m/model.onnx" --backend $b --route "$route" --min-seconds 2 2>&1 | grep -E 'median|error|warning' | tr '\n' ' ')
      echo "bench $name --backend $b [$route]: $r" >> "$summary"
    done
  fi
done
if [ -n "$node" ]; then
  timeout 400 tactician check "$node" --backend cuda -j 8 --expect-pass "$node/../slice.pass" --json > "$out/node.txt" 2>&1
  echo "node slice: rc=$? $(grep -E '^(pass|PASS|[0-9]+ tests|summary)' "$out/node.txt" | tail -2 | tr '\n' ' ')" >> "$summary"
  grep -vE '^(PASS)' "$out/node.txt" | head -60 >> "$summary"
fi
cat "$summary"
