#!/usr/bin/env bash
# Packs the GPU checks for a lent GPU machine that has the CUDA driver but none of Canopy's build
# dependencies (no fmt, GoogleTest, Asio... and no package archive to install them from): builds them
# here with CUDA, then copies the executables (stripped) and the shared libraries they need beside them,
# so that bench/gpu/run.sh can run them there with LD_LIBRARY_PATH. The CUDA runtime travels too; the
# driver (libcuda) is the machine's own.
# Usage, from the repository root:  bench/gpu/pack.sh [DIR]     (default gpu-pack; about 25 MB)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${1:-$ROOT/gpu-pack}
BUILD=${BUILD:-$ROOT/build}
targets=(gradsync_cuda_test gradsync_synchronizer_test gradsync_pinned_bandwidth gradsync_overlap_bench
         canopy-run canopy-bench)

grep -q '^CANOPY_WITH_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt" ||
  { echo "pack: $BUILD is not configured with -DCANOPY_WITH_CUDA=ON" >&2; exit 1; }
cmake --build "$BUILD" --target "${targets[@]}"
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/lib"
for t in "${targets[@]}"; do
  strip -o "$DIR/bin/$t" "$BUILD/bin/$t"
  # Every library but the C library's own, which must be the machine's (and libcuda, the driver's).
  ldd "$BUILD/bin/$t" | awk '$3 ~ /^\// {print $3}' |
    grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' | while read -r lib; do
      cp -nL "$lib" "$DIR/lib/"
    done
done
du -sh "$DIR"
