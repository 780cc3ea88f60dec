// compute_bound: 20 kernels of 2 ms back to back per step, launched well ahead of the GPU.
// Expected verdict: compute.
#include "common.cuh"

int main(int argc, char** argv) {
  ExampleArgs args(argc, argv, 30);
  Marks marks(args.marks);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const long long ms = cycles_per_ms();
  const double t0 = now_ms();
  for (int i = 0; i < args.steps; ++i) {
    marks.step_begin(i);
    for (int k = 0; k < 20; ++k) spin_kernel<<<264, 256, 0, s>>>(2 * ms);
    CK(cudaStreamSynchronize(s));
    marks.step_end();
  }
  std::printf("compute_bound: %d steps in %.1f ms\n", args.steps, now_ms() - t0);
  return 0;
}
