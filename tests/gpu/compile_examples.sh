#!/usr/bin/env bash
# Compiles every CUDA example for Hopper (sm_90 + PTX), as check.sh does on a GPU machine.
# usage: compile_examples.sh NVCC OUT_DIR
set -euo pipefail
NVCC=${1:-nvcc}
OUT=${2:-build-examples}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
for ex in data_bound launch_bound compute_bound comm_bound; do
  extra=()
  [ "$ex" = comm_bound ] && extra=(-lnccl)
  "$NVCC" -std=c++17 -O2 -gencode 'arch=compute_90,code=[sm_90,compute_90]' \
    -I"$ROOT/include" -I"$ROOT/examples" -o "$OUT/$ex" "$ROOT/examples/$ex.cu" "${extra[@]}" -ldl
  echo "compiled $ex"
done
