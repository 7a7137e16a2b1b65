#!/usr/bin/env bash
# Builds the libFuzzer target with clang (ASan + UBSan) and runs it for SECONDS (default 60)
# on a seed corpus of ONNX backend conformance models. Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
backend="${TAC_ONNX_BACKEND_DIR:-../shared/onnx-backend}"

for p in clang libclang-rt-14-dev; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
    break
  fi
done
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTAC_FUZZ=ON >/dev/null
ninja -C build-fuzz fuzz_load_model > build-fuzz.log 2>&1 || { tail -20 build-fuzz.log; echo "fuzz.sh: building the fuzz target failed" >&2; exit 1; }

corpus=build-fuzz/corpus
if [ ! -d "$corpus" ]; then
  mkdir -p "$corpus"
  # One model per op family is plenty of seeds: every 4th conformance model, all simple/ ones.
  find "$backend/node" "$backend/simple" -name model.onnx 2>/dev/null | sort | awk 'NR % 4 == 1' |
    while read -r f; do cp "$f" "$corpus/$(echo "$f" | md5sum | cut -c1-16).onnx"; done
fi
mkdir -p build-fuzz/findings
build-fuzz/tests/fuzz/fuzz_load_model "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix=build-fuzz/findings/ -print_final_stats=1 2>&1 | tail -20
