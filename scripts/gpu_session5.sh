#!/usr/bin/env bash
# A device call for issue 5's third step (nhwc layouts on CUDA, cuDNN's fused conv call, the fused
# attention kernel, cuda.workspace_mb): the CUDA unit tests (Cuda*, LayoutCuda*, the CUDA
# attention test), the Tactician fp16 benchmark with the new routes (bench/run_cuda.sh; torch only in
# the modes TORCH_MODES names, e.g. "eager"), then `check` of every devpack zoo model in fp16 + nhwc
# and, for the transformers, fp16 + fused attention. Everything lands in OUT/logs.tgz; the summary
# and the table are also copied to OUT (the device tool returns at most 8 files).
#
#   bash DEVPACK/scripts/gpu_session5.sh DEVPACK OUT
set -u
dp=$(cd "$1" && pwd) out=$2
work=/tmp/session5
mkdir -p "$work" "$out"
( cd /tmp && tar xJf "$dp/tactician-gpu.tar.xz" )
pkg=/tmp/tactician-gpu
models=()
for m in "$dp"/models/*/; do models+=("${m%/}"); done
bash "$dp/scripts/gpu_check.sh" "$pkg" "$work/unit" --unit
TAC_CONFIGS="${TAC_CONFIGS:-fp16 fp16-nchw fp16-attn}" LOW="fp16" \
  bash "$dp/bench/run_cuda.sh" "$pkg" "$work/bench" $([ -n "${TORCH_MODES:-}" ] && echo "--modes $TORCH_MODES" || echo --skip-torch) \
  --models "${BENCH_MODELS:-resnet50:1 resnet50:32 mobilenet_v2:1 bert-base:1 bert-base:8}"
bash "$dp/scripts/gpu_check.sh" "$pkg" "$work/nhwc16" --route "precision.default=fp16 layout.default=nhwc" --rtol 0.05 --atol 0.05 "${models[@]}"
bash "$dp/scripts/gpu_check.sh" "$pkg" "$work/attn16" --route "precision.default=fp16 pass.fuse_attention=on" --rtol 0.05 --atol 0.05 \
  "$dp/models/bert-toy" "$dp/models/tiny-gpt"
cat "$work"/*/summary.txt > "$out/summary.txt" 2>/dev/null
cp "$work/bench/table.md" "$out/" 2>/dev/null
cp "$work/unit/unit.txt" "$out/" 2>/dev/null
tar czf "$out/logs.tgz" -C "$work" .
