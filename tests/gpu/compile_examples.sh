#!/usr/bin/env bash
# Compiles every CUDA example for Hopper (sm_90 + PTX), as check.sh does on a GPU machine.
# usage: compile_examples.sh NVCC OUT_DIR
set -euo pipefail
NVCC=${1:-nvcc}
OUT=${2:-build-examples}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
# The NCCL examples only where the toolkit has NCCL (CUDA 13 ships nccl.h and libnccl.so).
NCCL_H="$(dirname "$(command -v "$NVCC")")/../include/nccl.h"
[ -f "$NCCL_H" ] || NCCL_H=/usr/include/nccl.h
for ex in data_bound launch_bound compute_bound comm_bound nccl_allreduce tensor_matmul elementwise \
  queued_ahead; do
  extra=()
  case "$ex" in comm_bound | nccl_allreduce) extra=(-lnccl) ;; esac
  if [ ${#extra[@]} -gt 0 ] && [ ! -f "$NCCL_H" ]; then
    echo "skipped $ex: no $NCCL_H"
    continue
  fi
  "$NVCC" -std=c++17 -O2 -gencode 'arch=compute_90,code=[sm_90,compute_90]' \
    -I"$ROOT/include" -I"$ROOT/examples" -o "$OUT/$ex" "$ROOT/examples/$ex.cu" "${extra[@]}" -ldl
  echo "compiled $ex"
done
# The counting NCCL profiler plugin of the unit tests, for check.sh's forwarding run (the
# library's test build makes it too, but check.sh builds without tests).  No NCCL needed.
"${CXX:-g++}" -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror \
  -I"$ROOT" -o "$OUT/nccl_test_plugin.so" "$ROOT/inject/nccl/nccl_test_plugin.cc"
echo "compiled nccl_test_plugin.so"
