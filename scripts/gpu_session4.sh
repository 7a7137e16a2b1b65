#!/usr/bin/env bash
# A device call for issue 5's "every model passes check on the GPU with the default route and
# with tuned routes": the CUDA unit tests, then per zoo model in the devpack a default-route
# check and a short `tune --backend cuda` whose best.route is checked too (scripts/gpu_check.sh).
#
#   bash DEVPACK/scripts/gpu_session4.sh DEVPACK OUT [BUDGET]
set -u
dp=$(cd "$1" && pwd) out=$2 budget=${3:-40s}
( cd /tmp && tar xJf "$dp/tactician-gpu.tar.xz" )
pkg=/tmp/tactician-gpu
models=()
for m in "$dp"/models/*/; do models+=("${m%/}"); done
bash "$dp/scripts/gpu_check.sh" "$pkg" "$out" --unit --tune "$budget" "${models[@]}"
