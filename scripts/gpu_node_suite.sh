#!/usr/bin/env bash
# One device call for issue 27: the CUDA unit tests, the ONNX node conformance suite through CUDA
# engines (the CPU pass list's tests), the host fallbacks left per node test, and three zoo models on
# CUDA with the default and the fp16 route. Prepare the folder here, then run it there:
#
#   scripts/pack_gpu.sh .devpack-cuda                       # binaries + libraries (CUDA build)
#   (cd ../shared/onnx-backend/node && tar cJf "$OLDPWD/.devpack-cuda/node.tar.xz" \
#      $(grep -v "^#" "$OLDPWD/tests/conformance/node.engine.pass"))
#   cp -r ../shared/models/{squeezenet1.1,super-resolution,tiny-gpt} .devpack-cuda/
#   device: OUT=$OUT bash scripts/gpu_node_suite.sh .devpack-cuda     (carry .devpack-cuda)
#   or, where little device time is left: ... scripts/gpu_node_suite.sh .devpack-cuda quick
#   (the issue-27 tactics' unit tests only, shorter limits, and compare CPU vs CUDA on two models
#   instead of the zoo checks; not yet run on a GPU)
#
# Writes OUT/unit.txt, node-cuda.txt (failures and the JSON counts), host-steps.txt (one line per
# host step: test name), zoo.txt.
set -u
R=$(pwd); D=$(cd "${1:-.devpack-cuda}" && pwd); O=${OUT:-/tmp/out}
quick=0; [ "${2:-}" = quick ] && quick=1
filter='CudaTactics.*:CudaEngine.*:CudaBackend.*'; t_unit=240; t_node=150; t_host=120
[ $quick = 1 ] && filter='CudaTactics.Reductions*:CudaTactics.Resize*:CudaTactics.Selection*:CudaEngine.*' && t_unit=60 && t_node=80 && t_host=30
cd /tmp && tar xJf "$D/tactician-gpu.tar.xz" && source tactician-gpu/env.sh
mkdir -p /tmp/node && tar xJf "$D/node.tar.xz" -C /tmp/node
T=/tmp/tactician-gpu/bin
nvidia-smi -L > "$O/device.txt" 2>&1
timeout $t_unit $T/unit_tests --gtest_filter="$filter" > /tmp/unit.txt 2>&1
echo "rc=$?" >> /tmp/unit.txt
grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|Expected|Which is|actual|rc=" /tmp/unit.txt | head -300 > "$O/unit.txt"
tail -40 /tmp/unit.txt >> "$O/unit.txt"
timeout $t_node $T/tactician check /tmp/node --backend cuda --json -j 16 > /tmp/node-cuda.txt 2>&1
grep -E "^FAIL|^CRASH|^ERROR|^\{" /tmp/node-cuda.txt | head -400 > "$O/node-cuda.txt"; tail -3 /tmp/node-cuda.txt >> "$O/node-cuda.txt"
ls /tmp/node | timeout $t_host xargs -P 16 -I{} sh -c "$T/tactician build /tmp/node/{}/model.onnx --backend cuda 2>&1 >/dev/null | grep -o 'runs on the host' | sed 's|^|{} |'" > "$O/host-steps.txt" 2>&1
if [ $quick = 1 ]; then
  for m in squeezenet1.1 tiny-gpt; do
    timeout 20 $T/tactician compare "$D/$m/model.onnx" --a default --a-backend cpu --b default --b-backend cuda --tolerance "cos>=0.9999" >> "$O/zoo.txt" 2>&1
  done
else
  for m in squeezenet1.1 super-resolution tiny-gpt; do
    for r in "" "precision.default=fp16"; do
      echo "== $m route '$r'" >> "$O/zoo.txt"
      timeout 60 $T/tactician check "$D/$m" --backend cuda --route "$r" --rtol 1e-2 --atol 1e-3 --json >> "$O/zoo.txt" 2>&1
      timeout 60 $T/tactician build "$D/$m/model.onnx" --backend cuda --route "$r" 2>&1 | grep -E "warning|fall back" >> "$O/zoo.txt"
    done
  done
fi
cd "$R"
