#!/usr/bin/env bash
# Builds everything and runs every test (unit, property, golden, CLI, simulated-device
# end-to-end, Python), after a short libFuzzer run of the trace importer.  This is what CI runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${GPUACCT_BUILD_DIR:-$root/build}"
jobs="${GPUACCT_JOBS:-$(nproc)}"
"$root/scripts/install_deps.sh"

# 1. Fuzz smoke test (clang + libFuzzer, analysis sources only): 20 s on the seed corpus.
if command -v clang++ >/dev/null 2>&1; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build-fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUACCT_BUILD_FUZZ=ON -DGPUACCT_BUILD_INJECT=OFF -DGPUACCT_BUILD_BENCH=OFF \
    -DGPUACCT_BUILD_E2E=OFF >/dev/null
  cmake --build "$build-fuzz" -j "$jobs" --target kineto_importer_fuzz >/dev/null
  ctest --test-dir "$build-fuzz" -L fuzz --output-on-failure
fi

# 2. Everything else.
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "$jobs" --timeout 600
