#!/usr/bin/env bash
# Does oneDNN's Winograd cost accuracy? Per model, every convolution that offers `onednn_winograd` is
# pinned to it, then to oneDNN's direct kernel (`onednn`), and each engine's first output is compared
# with the reference interpreter (float64) on seeded random inputs (`tactician compare`, seed 0):
# relative l2, max abs (linf), 1 - cosine. Models without such a convolution are skipped.
#
#   bench/winograd_accuracy.sh [MODEL_DIR ...]     (default: the zoo and the wide models with 3x3 convs)
set -euo pipefail
cd "$(dirname "$0")/.."
tac=build/tactician
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(../shared/models/{resnet18,squeezenet1.1,super-resolution} \
                                    bench/models/{resnet18_fp16,densenet121,yolo_head})
metrics() {  # MODEL ROUTE -> "l2 | linf | 1-cos"
  "$tac" compare "$1/model.onnx" --a "$2" --json 2>/dev/null | tail -1 | /usr/bin/python3 -c '
import json, sys
o = json.load(sys.stdin)["sets"][0]["outputs"][0]
print("%.2e | %.2e | %.1e" % (o["l2"], o["linf"], 1 - o["cos"]))'
}
echo "| model | 3x3 nodes | onednn l2 | onednn linf | onednn 1-cos | onednn_winograd l2 | onednn_winograd linf | onednn_winograd 1-cos |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for m in "${models[@]}"; do
  # A value the knob lists may still not apply after the fusions (e.g. a SiLU epilogue): keep only
  # the nodes where a one-node pin builds.
  wino="" direct="" n=0
  for k in $("$tac" knobs "$m/model.onnx" 2>/dev/null | awk '/^tactic\./ && /onednn_winograd/ {print $1}'); do
    "$tac" build "$m/model.onnx" --route "$k=onednn_winograd" >/dev/null 2>&1 || continue
    wino+="$k=onednn_winograd " direct+="$k=onednn " n=$((n + 1))
  done
  [ $n -gt 0 ] || continue
  echo "| $(basename "$m") | $n | $(metrics "$m" "$direct") | $(metrics "$m" "$wino") |"
done
