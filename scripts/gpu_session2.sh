#!/usr/bin/env bash
# Second device call of the session: the CUDA unit tests, fp16 checks of three zoo models, then
# the whole benchmark (bench/run_cuda.sh: Tactician fp32/fp16/graphs off/cold L2, PyTorch eager
# and torch.compile). Logs packed into OUT/logs.tar.gz; the table printed last.
#
#   bash DEVPACK/scripts/gpu_session2.sh DEVPACK OUT [BENCH_MODELS] [TORCH_MODES]
set -u
dp=$(cd "$1" && pwd) out=$2
models=${3:-"resnet50:1 resnet50:32 mobilenet_v2:1 bert-base:1 bert-base:8"}
modes=${4:-eager,compile}
log=/tmp/gpu-logs
mkdir -p "$log"
( cd /tmp && tar xJf "$dp/tactician-gpu.tar.xz" )
pkg=/tmp/tactician-gpu
t0=$(date +%s)
stage() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$log/stages.txt"; }
stage "unit tests + fp16 zoo checks"
timeout 90 bash "$dp/scripts/gpu_check.sh" "$pkg" "$log/fp16" --unit --route "precision.default=fp16" --rtol 0.05 --atol 0.05 \
  "$dp/models/bert-toy" "$dp/models/tiny-gpt" "$dp/models/mobilenet_v2" "$dp/models/super-resolution"
stage "benchmark ($models; torch: $modes)"
TORCH_LIMIT=${TORCH_LIMIT:-240} timeout ${BENCH_LIMIT:-470} bash "$dp/bench/run_cuda.sh" "$pkg" "$log/bench" --models "$models" --modes "$modes"
stage "done"
python3 "$dp/bench/cuda_report.py" "$log/bench" > "$log/bench/table.md" 2>&1
cp "$log/fp16/summary.txt" "$log/bench/table.md" "$out/" 2>/dev/null
cp "$log/bench/tactician.jsonl" "$log/bench/torch.jsonl" "$out/" 2>/dev/null
tar -C "$log" -czf "$out/logs.tar.gz" .
cat "$log/fp16/summary.txt" "$log/stages.txt" "$log/bench/env.txt"; grep -E "check .*rc|failed" "$log/bench/tactician.log"; cat "$log/bench/table.md"
