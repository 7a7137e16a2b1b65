#!/usr/bin/env bash
# Installs what Tactician needs from Debian's packages (idempotent, quiet) and builds it.
# Usage: scripts/setup.sh [--werror] [--build-type Release|RelWithDebInfo|Debug]
# After it, the binary is build/tactician.
set -euo pipefail
cd "$(dirname "$0")/.."

werror=OFF
build_type=Release
while [ $# -gt 0 ]; do
  case "$1" in
    --werror) werror=ON ;;
    --build-type) build_type="$2"; shift ;;
    *) echo "setup.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

packages=(cmake ninja-build g++ ccache pkg-config
          libonnx-dev libprotobuf-dev protobuf-compiler
          libgtest-dev libgmock-dev
          libdnnl-dev libopenblas-openmp-dev libsqlite3-dev nlohmann-json3-dev libbenchmark-dev python3
          python3-onnx python3-numpy
          python3-dev pybind11-dev python3-pytest  # the Python module (import tactician) and its tests
          clang-format  # scripts/check_format.sh (CI)
          libopenmpi-dev openmpi-bin)  # distributed tuning: mpirun -np N tactician tune
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DTAC_WERROR="$werror" >/dev/null
ninja -C build
echo "setup: built build/tactician"
# `import tactician` in Debian's Python 3: a .pth file in this user's site-packages names the build's
# module folder (remove the file to undo; `cmake --install` puts the module under PREFIX instead).
if [ -d build/python ] && site=$(/usr/bin/python3 -m site --user-site 2>/dev/null); then
  mkdir -p "$site" && echo "$PWD/build/python" > "$site/tactician-build.pth" &&
    echo "setup: /usr/bin/python3 imports tactician from build/python ($site/tactician-build.pth)"
fi
