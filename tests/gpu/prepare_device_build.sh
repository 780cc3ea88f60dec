#!/usr/bin/env bash
# Builds, on a machine without a GPU, what tests/gpu/device_run.sh runs on a lent one, into a
# small folder that can travel (no object files): the library and the CLI (-O2 -DNDEBUG, the
# main build's flags), the CUDA examples (nvcc, sm_90), the bare CUPTI tracer, and lib/ with the
# shared libraries the GPU image lacks (libunwind).
#
#   tests/gpu/prepare_device_build.sh [DEST]     (default .device; ignored by git)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST=$(realpath -m "${1:-$ROOT/.device}")
B="$ROOT/build-device"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
  -DGPUACCT_BUILD_TESTS=OFF -DGPUACCT_BUILD_BENCH=OFF -DGPUACCT_BUILD_E2E=OFF \
  -DCUDAToolkit_ROOT="$CUDA_HOME" "${launcher[@]}" >/dev/null
cmake --build "$B" -j "${GPUACCT_JOBS:-$(nproc)}" --target gpuacct gpuacct_cli
rm -rf "$DEST"
mkdir -p "$DEST/inject" "$DEST/bin" "$DEST/lib" "$DEST/examples"
cp "$B/inject/libgpuacct.so" "$DEST/inject/"
cp "$B/bin/gpuacct" "$DEST/bin/"
strip --strip-unneeded "$DEST/inject/libgpuacct.so" "$DEST/bin/gpuacct"
PATH="$CUDA_HOME/bin:$PATH" "$ROOT/tests/gpu/compile_examples.sh" nvcc "$DEST/examples"
g++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -I"$CUDA_HOME/include" -I"$ROOT" \
  "$ROOT/tests/gpu/bare_cupti_tracer.cc" "$ROOT/cupti_hooks/api_table.cc" \
  -o "$DEST/bare_cupti_tracer.so" -L"$CUDA_HOME/lib64" -lcupti -Wl,-rpath,"$CUDA_HOME/lib64"
for lib in $(ldd "$DEST/inject/libgpuacct.so" | awk '/libunwind/ {print $3}'); do
  cp -L "$lib" "$DEST/lib/"
done
du -sh "$DEST"
