#!/usr/bin/env bash
# Fills a folder to carry to the GPU machine in one device call: the packed binaries
# (scripts/pack_gpu.sh), this checkout's scripts/ and bench/ (the device copies another tree),
# the zoo models small enough to travel (resnet18 and bert-mini-like are left out: 46 + 21 MB; the
# bench exports resnet50 and the BertLike bert-base there), and a slice of the ONNX node
# conformance suite for the ops with CUDA tactics (tests that pass on CPU engines).
#
#   scripts/gpu_devpack.sh DEST [BUILD_DIR]     then, on the GPU machine, from the repo root:
#   bash DEST/scripts/gpu_check.sh ...  /  bash DEST/bench/run_cuda.sh ...
set -euo pipefail
dest=${1:?usage: scripts/gpu_devpack.sh DEST [BUILD_DIR]}
build=${2:-build-gpu}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=${SHARED:-$root/../shared}
mkdir -p "$dest"
rm -rf "$dest/models" "$dest/node" "$dest/scripts" "$dest/bench"
"$root/scripts/pack_gpu.sh" "$dest" "$build"
mkdir -p "$dest/models" "$dest/node" "$dest/scripts" "$dest/bench"
for m in mnist-cntk squeezenet1.1 super-resolution bert-toy mobilenet_v2 tiny-gpt; do cp -r "$shared/models/$m" "$dest/models/"; done
cp "$root"/scripts/gpu_*.sh "$dest/scripts/"
cp "$root"/bench/{run_cuda.sh,cuda_torch.py,cuda_report.py,export_models.py} "$dest/bench/"
ops='slice|cast|depthtospace|spacetodepth|conv|layer_normalization|softmax|relu|add|mul|sub|div|gelu|erf|sigmoid|tanh|clip|transpose|gather|concat|reshape|matmul|gemm|maxpool|averagepool|globalaveragepool'
grep -E "^test_($ops)" "$root/tests/conformance/node.engine.pass" | while read -r t; do
  [ -d "$shared/onnx-backend/node/$t" ] && cp -r "$shared/onnx-backend/node/$t" "$dest/node/"
done
ls "$dest/node" > "$dest/slice.pass"
du -sh "$dest"
