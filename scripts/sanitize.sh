#!/usr/bin/env bash
# Builds tactician with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/, CPU backend
# only) and runs the hostile-input corpus (tests/hostile) through it: every crafted model, plan,
# input and database must give its clear error with no sanitizer finding.
# Usage: scripts/sanitize.sh [--filter SUBSTRING]   (after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTAC_SANITIZE=ON -DTAC_CUDA=OFF -DTAC_MPI=OFF >/dev/null
ninja -C build-asan tactician > build-asan.log 2>&1 || { tail -30 build-asan.log; echo "sanitize.sh: the ASan build failed" >&2; exit 1; }
# halt_on_error: the first finding fails the command; the corpus rejects any sanitizer output.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
/usr/bin/python3 tests/hostile/hostile.py build-asan/tactician "$@"
