#!/usr/bin/env bash
# One device call (the lent H200): unpack DEVPACK (scripts/gpu_devpack.sh), run the CUDA unit
# tests, the zoo and node-slice checks in fp32 and fp16, then the Tactician side of the benchmark
# (bench/run_cuda.sh --skip-torch unless TORCH_MODES is set). Every stage has its own time limit
# so that the logs are packed into OUT/logs.tar.gz (the device tool returns at most 8 files).
#
#   bash DEVPACK/scripts/gpu_session1.sh DEVPACK OUT [BENCH_MODELS] [TORCH_MODES]
set -u
dp=$(cd "$1" && pwd) out=$2
models=${3:-"resnet50:1 mobilenet_v2:1 bert-base:1"}
modes=${4:-}
log=/tmp/gpu-logs
mkdir -p "$log"
( cd /tmp && tar xJf "$dp/tactician-gpu.tar.xz" )
pkg=/tmp/tactician-gpu
zoo="$dp/models/mnist-cntk $dp/models/squeezenet1.1 $dp/models/super-resolution $dp/models/bert-toy $dp/models/mobilenet_v2 $dp/models/tiny-gpt"
t0=$(date +%s)
stage() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$log/stages.txt"; }
stage "fp32 checks"
timeout 170 bash "$dp/scripts/gpu_check.sh" "$pkg" "$log/fp32" --unit --node "$dp/node" $zoo
stage "fp16 checks + bench"
timeout 130 bash "$dp/scripts/gpu_check.sh" "$pkg" "$log/fp16" --bench --route "precision.default=fp16" --rtol 0.05 --atol 0.05 $zoo
stage "fp32 bench"
timeout 50 bash "$dp/scripts/gpu_check.sh" "$pkg" "$log/fp32b" --bench "$dp/models/mobilenet_v2" "$dp/models/super-resolution" "$dp/models/tiny-gpt"
stage "benchmark ($models; torch: ${modes:-skipped})"
if [ -n "$modes" ]; then
  timeout ${BENCH_LIMIT:-220} bash "$dp/bench/run_cuda.sh" "$pkg" "$log/bench" --models "$models" --modes "$modes"
else
  timeout ${BENCH_LIMIT:-220} bash "$dp/bench/run_cuda.sh" "$pkg" "$log/bench" --models "$models" --skip-torch
fi
stage "done"
cat "$log"/fp32/summary.txt "$log"/fp16/summary.txt "$log"/fp32b/summary.txt 2>/dev/null > "$out/summary.txt"
cp "$log/bench/table.md" "$out/" 2>/dev/null
tar -C "$log" -czf "$out/logs.tar.gz" .
cat "$out/summary.txt" "$log/stages.txt"; cat "$log/bench/table.md" 2>/dev/null
