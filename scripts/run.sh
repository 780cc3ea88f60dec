#!/usr/bin/env bash
# The main job.
#   scripts/run.sh                      no program: analyse the bundled sample recording
#   scripts/run.sh python train.py ...  run the program with libgpuacct.so injected
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${GPUACCT_BUILD_DIR:-$root/build}"
"$root/scripts/install_deps.sh" --main
"$root/scripts/build.sh" --main >/dev/null

if [ $# -eq 0 ]; then
  echo "gpuacct: no program given; analysing the bundled sample recording" >&2
  exec "$build/bin/gpuacct" analyze "$root/examples/data/sample.gpuacct" --out "$root/gpuacct-out"
fi

lib="$build/inject/libgpuacct.so"
if [ ! -f "$lib" ]; then
  echo "gpuacct: $lib was not built (no CUDA toolkit?)" >&2
  exit 1
fi
export CUDA_INJECTION64_PATH="$lib" NVTX_INJECTION64_PATH="$lib" GPUACCT_LIBRARY="$lib"
export GPUACCT_OUTPUT_DIR="${GPUACCT_OUTPUT_DIR:-$root/gpuacct-out}"
# Python programs: the package from this checkout, and its interpreter-start hook (as
# `gpuacct run` sets it up) so a CPU-only run, where CUDA never loads the library, records too.
export PYTHONPATH="$root/python_shim/gpuacct/_bootstrap:$root/python_shim${PYTHONPATH:+:$PYTHONPATH}"
exec "$@"
