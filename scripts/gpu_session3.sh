#!/usr/bin/env bash
# Third device call of the session: ResNet-50 in fp16 and bf16 (its randomized-BN activations
# leave the fp16 range) with PyTorch eager's fp16 output checked for inf/NaN, then
# torch.compile(mode="max-autotune") for MobileNetV2 and BERT-base at batch 1.
#
#   bash DEVPACK/scripts/gpu_session3.sh DEVPACK OUT
set -u
dp=$(cd "$1" && pwd) out=$2
log=/tmp/gpu-logs
mkdir -p "$log"
( cd /tmp && tar xJf "$dp/tactician-gpu.tar.xz" )
pkg=/tmp/tactician-gpu
t0=$(date +%s)
stage() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a "$log/stages.txt"; }
stage "resnet50 fp16 / bf16"
TAC_CONFIGS="fp16 bf16" LOW="fp16 bf16" timeout 140 bash "$dp/bench/run_cuda.sh" "$pkg" "$log/a" --models "resnet50:1 resnet50:32" --modes eager
stage "max-autotune"
TORCH_LIMIT=${TORCH_LIMIT:-300} timeout 345 bash "$dp/bench/run_cuda.sh" "$pkg" "$log/b" --models "bert-base:1 mobilenet_v2:1" --modes max-autotune --skip-tactician
stage "done"
cp "$log/a/table.md" "$out/table_a.md"; cp "$log/b/table.md" "$out/table_b.md"
cat "$log"/a/*.jsonl > "$out/a.jsonl"; cat "$log"/b/*.jsonl > "$out/b.jsonl"
tar -C "$log" -czf "$out/logs.tar.gz" .
cat "$log/stages.txt"; grep -E "check .*rc|failed" "$log/a/tactician.log"; cat "$log/a/table.md" "$log/b/table.md"
