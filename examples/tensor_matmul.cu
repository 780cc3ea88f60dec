// tensor_matmul: tensor-core work -- every warp multiplies 16x16x16 half tiles with WMMA in a
// loop (fragments in registers: the tensor pipes are the busy unit, not memory).  Per step 10
// kernels of ~2 ms.  With GPUACCT_COUNTERS=1 the tensor pipes should be busy most of the compute
// time (tests/gpu/check.sh compares it with examples/elementwise).  Prints the time per step.
#include <mma.h>

#include "common.cuh"

__global__ void wmma_spin(float* out, int iterations) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::fill_fragment(a, __float2half(0.001f));
  wmma::fill_fragment(b, __float2half(0.002f));
  wmma::fill_fragment(c, 0.0f);
  for (int i = 0; i < iterations; ++i) wmma::mma_sync(c, a, b, c);
  // One store per warp keeps the loop from being optimised away.
  wmma::store_matrix_sync(out + (blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * 256, c, 16,
                          wmma::mem_row_major);
}

int main(int argc, char** argv) {
  ExampleArgs args(argc, argv, 30);
  Marks marks(args.marks);
  const int blocks = 132 * 4, warps = 8;
  float* out = nullptr;
  CK(cudaMalloc(&out, static_cast<size_t>(blocks) * warps * 256 * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  // Calibrate: iterations for ~2 ms a kernel.
  int iterations = 1 << 14;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0, s));
  wmma_spin<<<blocks, warps * 32, 0, s>>>(out, iterations);
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  if (ms > 0) iterations = static_cast<int>(iterations * (2.0f / ms)) + 1;
  const double t0 = now_ms();
  for (int i = 0; i < args.steps; ++i) {
    marks.step_begin(i);
    for (int k = 0; k < 10; ++k) wmma_spin<<<blocks, warps * 32, 0, s>>>(out, iterations);
    CK(cudaStreamSynchronize(s));
    marks.step_end();
  }
  const double t = now_ms() - t0;
  std::printf("tensor_matmul: %d steps in %.1f ms, %.3f ms/step\n", args.steps, t, t / args.steps);
  CK(cudaFree(out));
  return 0;
}
