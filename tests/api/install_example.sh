#!/usr/bin/env bash
# The C++ API as an application meets it (issue 29): install Tactician into a fresh prefix,
# build examples/cpp against the installed package alone (find_package(Tactician), no build tree,
# no internal header), run it on a model's test data, save/load a plan, tune briefly.
#   install_example.sh BUILD_DIR SOURCE_DIR MODEL_DIR
set -euo pipefail
trap 'echo "install_example: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
build=$1 src=$2 model=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# Only the public headers are installed.
headers=$(cd "$work/prefix/include" && find . -type f | sort | tr '\n' ' ')
[ "$headers" = "./tactician/status.h ./tactician/tactician.h ./tactician/tensor.h " ] || { echo "installed headers: $headers"; exit 1; }
cmake -S "$src/examples/cpp" -B "$work/example" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/example" >/dev/null
# The example links the installed library, not the build tree's.
# (ldd's output is read whole first: `ldd | grep -q` under pipefail fails when grep exits early.)
libs=$(ldd "$work/example/deploy")
grep -q "$work/prefix/lib/libtactician.so" <<<"$libs" || {
  echo "deploy does not load the installed libtactician.so:"; echo "$libs"; exit 1; }
out=$("$work/example/deploy" "$model" --tune 60)  # ends after 8 candidates (deploy.cc); 60 s leaves room on a loaded machine
echo "$out"
grep -q "^default route: output .* worst relative error" <<<"$out"
grep -q "^saved plan: output" <<<"$out"
grep -q "^unknown input refused: invalid_argument: Engine::run: the engine has no input 'no_such_input'" <<<"$out"
grep -Eq "^tuned: [1-9][0-9]* candidates" <<<"$out"
grep -q "^deploy: ok$" <<<"$out"
# A missing model is an error value with the file named, exit 1, not a crash.
set +e
err=$("$work/example/deploy" "$work/no-such-model" 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "no-such-model" <<<"$err" || { echo "missing model: rc=$rc: $err"; exit 1; }
echo "install_example: ok"
