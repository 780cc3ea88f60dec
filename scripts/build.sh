#!/usr/bin/env bash
# Configures and builds gpuacct into build/ (override with GPUACCT_BUILD_DIR).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${GPUACCT_BUILD_DIR:-$root/build}"
jobs="${GPUACCT_JOBS:-$(nproc)}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
inject=ON
[ -f "$cuda/include/cupti.h" ] || inject=OFF
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUACCT_BUILD_INJECT=$inject \
  -DCUDAToolkit_ROOT="$cuda" "$@" >/dev/null
cmake --build "$build" -j "$jobs"
