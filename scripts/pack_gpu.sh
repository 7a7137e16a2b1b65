#!/usr/bin/env bash
# Packs tactician for the GPU machine: builds the binary and the unit tests with the CUDA backend,
# collects them with the shared libraries they need that the GPU machine lacks (libonnx,
# protobuf, oneDNN, OpenBLAS, gfortran, gomp, sqlite, ...) and writes one archive:
#
#   scripts/pack_gpu.sh OUT_DIR [BUILD_DIR]     ->  OUT_DIR/tactician-gpu.tar.xz
#
# On the GPU machine (Ubuntu 24.04; cuBLASLt, cuDNN and the CUDA driver come from its Python
# packages and driver, the CUDA runtime is linked statically):
#   tar xJf tactician-gpu.tar.xz && source tactician-gpu/env.sh && tactician-gpu/bin/tactician ...
# glibc and libstdc++ are not packed: the GPU machine's are newer than the build machine's.
set -euo pipefail
out=${1:?usage: scripts/pack_gpu.sh OUT_DIR [BUILD_DIR]}
build=${2:-build}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ ! -f "$build/build.ninja" ]; then
  cmake -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTAC_CUDA=ON
fi
grep -q '^TAC_CUDA:BOOL=ON' "$build/CMakeCache.txt" || { echo "pack_gpu: $build is not configured with TAC_CUDA=ON" >&2; exit 1; }
[ -n "${PACK_NO_BUILD:-}" ] || ninja -C "$build" -j2 tactician unit_tests shape_ranges

stage=$(mktemp -d)
pkg=$stage/tactician-gpu
mkdir -p "$pkg/bin" "$pkg/lib"
cp "$build/tactician" "$build/tests/unit_tests" "$build/shape_ranges" "$pkg/bin/"
# Every non-system library the binaries load, symlinks resolved, under its soname.
system='/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcublas|libcublasLt|libcudnn[^/]*)\.so'
for bin in "$pkg"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if [[ "/$soname" =~ $system ]]; then continue; fi
  cp -L "$path" "$pkg/lib/$soname"
done
# A binary built with TAC_MPI links OpenMPI: carry its runtime too (mpirun, the MCA and PMIx
# plugins, help texts), laid out as under /usr so that OPAL_PREFIX relocates it (env.sh).
if ldd "$pkg/bin/tactician" | grep -q libmpi; then
  ompi=$pkg/ompi
  mkdir -p "$ompi/bin" "$ompi/lib/x86_64-linux-gnu" "$ompi/share"
  cp -L /usr/bin/orterun "$ompi/bin/mpirun"
  cp -rL /usr/lib/x86_64-linux-gnu/openmpi "$ompi/lib/x86_64-linux-gnu/"
  rm -rf "$ompi/lib/x86_64-linux-gnu/openmpi/include"
  cp -rL /usr/lib/x86_64-linux-gnu/pmix2 "$ompi/lib/x86_64-linux-gnu/"
  rm -rf "$ompi/lib/x86_64-linux-gnu/pmix2/include" "$ompi/lib/x86_64-linux-gnu/pmix2/lib/libpmix.a"
  cp -rL /usr/share/openmpi "$ompi/share/"
  for f in "$ompi/bin/mpirun" "$ompi"/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so "$ompi"/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so; do
    ldd "$f" | awk '/=> \// {print $1, $3}'
  done | sort -u | while read -r soname path; do
    if [[ "/$soname" =~ $system ]] || [ -e "$pkg/lib/$soname" ]; then continue; fi
    cp -L "$path" "$pkg/lib/$soname"
  done
fi
cat > "$pkg/env.sh" <<'ENV'
# Source me on the GPU machine: our libraries, then cuBLASLt / cuDNN from the Python packages.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nv=$(python3 -c "import glob,site; print(':'.join(glob.glob(site.getsitepackages()[0]+'/nvidia/*/lib')))" 2>/dev/null || true)
export LD_LIBRARY_PATH="$here/lib${nv:+:$nv}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH"
export TACTICIAN_BINARY="$here/bin/tactician"  # what the unit tests exec candidates from
if [ -d "$here/ompi" ]; then  # the carried OpenMPI (pack_gpu.sh), relocated
  export OPAL_PREFIX="$here/ompi" PMIX_INSTALL_PREFIX="$here/ompi/lib/x86_64-linux-gnu/pmix2"
  export PATH="$here/ompi/bin:$PATH"
  export LD_LIBRARY_PATH="$here/ompi/lib/x86_64-linux-gnu/openmpi/lib:$here/ompi/lib/x86_64-linux-gnu/pmix2/lib:$LD_LIBRARY_PATH"
  export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
  export PMIX_MCA_pcompress_base_silence_warning=1
fi
ENV
git rev-parse HEAD > "$pkg/COMMIT" 2>/dev/null || true
git status --short --untracked-files=no | sed 's/^/dirty: /' >> "$pkg/COMMIT" || true
mkdir -p "$out"
XZ_OPT=${XZ_OPT:--T2} tar -C "$stage" -cJf "$out/tactician-gpu.tar.xz" tactician-gpu
rm -rf "$stage"
ls -l "$out/tactician-gpu.tar.xz"
