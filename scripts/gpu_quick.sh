#!/usr/bin/env bash
# The short first device call for issue 27 (fits a nearly spent device budget): the new CUDA tactics' unit
# tests, the node suite through CUDA engines, host fallbacks per node test, compare CPU vs CUDA on two zoo
# models. Prepare .devpack-cuda as scripts/gpu_node_suite.sh says (pack_gpu.sh, node.tar.xz, the zoo
# models), then on the device: bash scripts/gpu_quick.sh   (carry .devpack-cuda). Writes OUT/unit.txt,
# node-cuda.txt, host-steps.txt, zoo.txt.
set -u
D=$(cd .devpack-cuda && pwd); O=${OUT:-/tmp/out}
cd /tmp && tar xJf "$D/tactician-gpu.tar.xz" && source tactician-gpu/env.sh
mkdir -p /tmp/node && tar xJf "$D/node.tar.xz" -C /tmp/node
T=/tmp/tactician-gpu/bin
nvidia-smi -L > "$O/device.txt" 2>&1
timeout 60 $T/unit_tests --gtest_filter='CudaTactics.Reductions*:CudaTactics.Resize*:CudaTactics.Selection*:CudaEngine.*' > /tmp/unit.txt 2>&1
echo "rc=$?" >> /tmp/unit.txt
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is|actual|rc=" /tmp/unit.txt | head -200 > "$O/unit.txt"
timeout 80 $T/tactician check /tmp/node --backend cuda --json -j 16 > /tmp/node-cuda.txt 2>&1
grep -E "^FAIL|^CRASH|^ERROR|^\{" /tmp/node-cuda.txt | head -400 > "$O/node-cuda.txt"; tail -3 /tmp/node-cuda.txt >> "$O/node-cuda.txt"
ls /tmp/node | timeout 30 xargs -P 16 -I{} sh -c "$T/tactician build /tmp/node/{}/model.onnx --backend cuda 2>&1 >/dev/null | grep -o 'runs on the host' | sed 's|^|{} |'" > "$O/host-steps.txt" 2>&1
for m in squeezenet1.1 tiny-gpt; do
  timeout 20 $T/tactician compare "$D/$m/model.onnx" --a default --a-backend cpu --b default --b-backend cuda --tolerance "cos>=0.9999" >> "$O/zoo.txt" 2>&1
done
