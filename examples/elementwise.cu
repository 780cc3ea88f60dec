// elementwise: memory-bound element-wise work (y = a*x + y over 256 MiB), no tensor cores.  Per
// step 10 passes.  With GPUACCT_COUNTERS=1 the tensor pipes should be near idle and DRAM busy
// (tests/gpu/check.sh compares it with examples/tensor_matmul).  Prints the time per step.
#include "common.cuh"

__global__ void axpy(const float* x, float* y, float a, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

int main(int argc, char** argv) {
  ExampleArgs args(argc, argv, 30);
  Marks marks(args.marks);
  const size_t n = size_t{32} << 20;  // 32 Mi floats = 128 MiB each
  float *x = nullptr, *y = nullptr;
  CK(cudaMalloc(&x, n * sizeof(float)));
  CK(cudaMalloc(&y, n * sizeof(float)));
  CK(cudaMemset(x, 0, n * sizeof(float)));
  CK(cudaMemset(y, 0, n * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const double t0 = now_ms();
  for (int i = 0; i < args.steps; ++i) {
    marks.step_begin(i);
    for (int k = 0; k < 10; ++k) axpy<<<132 * 8, 256, 0, s>>>(x, y, 1.0001f, n);
    CK(cudaStreamSynchronize(s));
    marks.step_end();
  }
  const double t = now_ms() - t0;
  std::printf("elementwise: %d steps in %.1f ms, %.3f ms/step\n", args.steps, t, t / args.steps);
  CK(cudaFree(x));
  CK(cudaFree(y));
  return 0;
}
