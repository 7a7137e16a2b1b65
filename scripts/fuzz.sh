#!/usr/bin/env bash
# Fuzzes Tactician's readers of untrusted bytes, each target for SECONDS (default 60), under
# ASan + UBSan. Usage: scripts/fuzz.sh [SECONDS] [TARGET ...]
#   load_model  ONNX model bytes -> import -> shape inference          (libFuzzer, clang; default)
#   db_row      a tuning-database row's route and metrics text -> the checks rows are read with
#               (validate_candidate) -> the route's canonical round trip  (libFuzzer, clang; default)
#   load_plan   plan payload (header and checksum made valid) -> load + validation -> engine -> one
#               run                                                      (libFuzzer over a GCC build
#               of the whole library with ASan + UBSan, guided by comparison coverage, as clang cannot
#               build the kernels; seeds are plans build/tactician makes from conformance models)
# Findings (inputs that crash) go to build-fuzz/findings/ and build-fuzz-gcc/findings/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(load_model db_row)
backend="${TAC_ONNX_BACKEND_DIR:-../shared/onnx-backend}"

install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

libfuzzer() {  # libfuzzer TARGET SEED_DIR_MAKER
  local target="$1"
  install clang libclang-rt-14-dev
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTAC_FUZZ=ON >/dev/null
  ninja -C build-fuzz "fuzz_$target" > build-fuzz.log 2>&1 || { tail -20 build-fuzz.log; echo "fuzz.sh: building fuzz_$target failed" >&2; exit 1; }
  local corpus="build-fuzz/corpus-$target"
  if [ ! -d "$corpus" ]; then
    mkdir -p "$corpus"
    if [ "$target" = load_model ]; then
      # One model per op family is plenty of seeds: every 4th conformance model, all simple/ ones.
      find "$backend/node" "$backend/simple" -name model.onnx 2>/dev/null | sort | awk 'NR % 4 == 1' |
        while read -r f; do cp "$f" "$corpus/$(echo "$f" | md5sum | cut -c1-16).onnx"; done
    else
      printf 'pass.fuse_conv=off threads=1\0[{"linf": 3e-06, "l1": 1e-07, "l2": 2e-07, "cos": 1, "l0": 0, "finite": true}]' > "$corpus/a"
      printf 'layout.default=nhwc precision.ln_3=fp32 tactic.conv_17=winograd_f4\0[]' > "$corpus/b"
      printf '# a route file\nmemory.planner=greedy_by_size\n\nbuilder.selection=isolated\n' > "$corpus/c"
    fi
  fi
  mkdir -p build-fuzz/findings
  echo "== $target (libFuzzer, $seconds s)"
  "build-fuzz/tests/fuzz/fuzz_$target" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix=build-fuzz/findings/ -print_final_stats=1 2>&1 | tail -20
}

gccfuzz() {  # the whole library, built by GCC, under libFuzzer
  local target="$1"
  install clang libclang-rt-14-dev
  [ -x build/tactician ] || { echo "fuzz.sh: $target needs build/tactician for its seeds (run scripts/setup.sh)" >&2; exit 1; }
  cmake -S . -B build-fuzz-gcc -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTAC_SANITIZE=ON -DTAC_FUZZ_GCC=ON \
    -DTAC_CUDA=OFF -DTAC_MPI=OFF >/dev/null
  ninja -C build-fuzz-gcc "fuzz_$target" > build-fuzz-gcc.log 2>&1 ||
    { tail -20 build-fuzz-gcc.log; echo "fuzz.sh: building fuzz_$target failed" >&2; exit 1; }
  local corpus="build-fuzz-gcc/corpus-$target"
  if [ ! -d "$corpus" ]; then
    mkdir -p "$corpus"
    # Small plans of varied ops: every 40th conformance model that builds, at one thread; the
    # target takes a plan's payload (it writes the 28-byte header and checksum itself).
    find "$backend/node" -name model.onnx | sort | awk 'NR % 40 == 1' | while read -r f; do
      out="$corpus/$(echo "$f" | md5sum | cut -c1-16)"
      build/tactician build "$f" --threads 1 -o "$out.plan" >/dev/null 2>&1 && tail -c +29 "$out.plan" > "$out"
      rm -f "$out.plan"
      [ ! -f "$out" ] || [ "$(stat -c %s "$out")" -lt 65536 ] || rm -f "$out"
    done
  fi
  mkdir -p build-fuzz-gcc/findings
  echo "== $target (libFuzzer over a GCC build, comparison coverage, $seconds s, $(ls "$corpus" | wc -l) seeds)"
  ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1" \
    "build-fuzz-gcc/tests/fuzz/fuzz_$target" "$corpus" -use_value_profile=1 -max_total_time="$seconds" \
    -rss_limit_mb=4096 -timeout=20 -max_len=65536 -artifact_prefix=build-fuzz-gcc/findings/ -print_final_stats=1 2>&1 | tail -12
}

for t in "${targets[@]}"; do
  case "$t" in
    load_model|db_row) libfuzzer "$t" ;;
    load_plan) gccfuzz "$t" ;;
    *) echo "fuzz.sh: unknown target $t (load_model, db_row, load_plan)" >&2; exit 2 ;;
  esac
done
