#!/usr/bin/env bash
# Builds everything and runs every test (unit, property, golden, simulated-device end-to-end,
# Python).  This is what CI runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${GPUACCT_BUILD_DIR:-$root/build}"
"$root/scripts/install_deps.sh"
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${GPUACCT_JOBS:-$(nproc)}" --timeout 600
