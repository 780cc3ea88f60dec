#!/usr/bin/env bash
# Configures and builds gpuacct into build/ (override with GPUACCT_BUILD_DIR).
#
#   scripts/build.sh          everything: tool, library, tests, simulated device, benchmarks
#   scripts/build.sh --main   only the gpuacct tool and libgpuacct.so (what scripts/run.sh needs);
#                             tests and benchmarks stay configured off until a full build, and
#                             no debug information (-O2 -DNDEBUG: the same code, a third less
#                             compile time; the full build adds -g for debugging the tests)
# Either order works: each run states every option it depends on, so a --main build followed
# by a full one (or the reverse) reconfigures the same directory and reuses what it built.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${GPUACCT_BUILD_DIR:-$root/build}"
jobs="${GPUACCT_JOBS:-$(nproc)}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
inject=ON
[ -f "$cuda/include/cupti.h" ] || inject=OFF
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
targets=()
full=ON
optimize="-O2 -g -DNDEBUG"  # CMake's RelWithDebInfo, stated so that either build resets it
if [ "${1:-}" = "--main" ]; then
  shift
  full=OFF
  optimize="-O2 -DNDEBUG"
  targets=(--target gpuacct_cli)
  [ "$inject" = ON ] && targets+=(gpuacct)
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUACCT_BUILD_INJECT=$inject \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$optimize" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$optimize" \
  -DGPUACCT_BUILD_TESTS=$full -DGPUACCT_BUILD_BENCH=$full -DGPUACCT_BUILD_E2E=$full \
  -DCUDAToolkit_ROOT="$cuda" "${launcher[@]}" "$@" >/dev/null
cmake --build "$build" -j "$jobs" "${targets[@]}"
