#!/usr/bin/env bash
# Configures and builds gpuacct into build/ (override with GPUACCT_BUILD_DIR).
#
#   scripts/build.sh          everything: tool, library, tests, simulated device, benchmarks
#   scripts/build.sh --main   only the gpuacct tool and libgpuacct.so (what scripts/run.sh needs);
#                             tests and benchmarks stay configured off until a full build
#
# Both compile every file with the same flags (-O2 -DNDEBUG, no debug information: it costs a
# third more compile time), so either order reuses what the other built: scripts/run.sh then
# scripts/test.sh compiles only the tests, the reverse compiles nothing.  GPUACCT_DEBUG_INFO=1
# adds -g to every file (then both builds again agree).
#
# ccache, when installed (scripts/install_deps.sh installs it), caches every compile: a second
# clone, worktree or build directory of the same sources compiles nothing again
# (scripts/compiler_cache.sh; GPUACCT_CCACHE=0 compiles without it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${GPUACCT_BUILD_DIR:-$root/build}"
jobs="${GPUACCT_JOBS:-$(nproc)}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
inject=ON
[ -f "$cuda/include/cupti.h" ] || inject=OFF
# shellcheck source=scripts/compiler_cache.sh
. "$root/scripts/compiler_cache.sh"
targets=()
full=ON
# CMake's RelWithDebInfo type, its flags stated: the same for both builds, whatever the cache
# held before (a build directory configured by an older script had -g in the full build).
optimize="-O2 -DNDEBUG"
[ "${GPUACCT_DEBUG_INFO:-0}" = 1 ] && optimize="-O2 -g -DNDEBUG"
if [ "${1:-}" = "--main" ]; then
  shift
  full=OFF
  targets=(--target gpuacct_cli)
  [ "$inject" = ON ] && targets+=(gpuacct)
fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUACCT_BUILD_INJECT=$inject \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$optimize" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$optimize" \
  -DGPUACCT_BUILD_TESTS=$full -DGPUACCT_BUILD_BENCH=$full -DGPUACCT_BUILD_E2E=$full \
  -DCUDAToolkit_ROOT="$cuda" "${launcher[@]}" "$@" >/dev/null
cmake --build "$build" -j "$jobs" "${targets[@]}"
