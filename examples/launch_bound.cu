// launch_bound: 3000 tiny kernels per step, each shorter than the host needs to launch it, so
// the GPU waits on kernel submission.  Expected verdict: launch.  Also the overhead benchmark
// of tests/gpu/check.sh (it prints the time per step).
#include "common.cuh"

int main(int argc, char** argv) {
  ExampleArgs args(argc, argv, 50);
  Marks marks(args.marks);
  float* dev = nullptr;
  CK(cudaMalloc(&dev, 1024 * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const int kernels = 3000;
  // Warm-up outside the timed loop (module load, CUPTI instrumentation).
  for (int k = 0; k < 100; ++k) tiny_kernel<<<1, 32, 0, s>>>(dev);
  CK(cudaStreamSynchronize(s));
  const double t0 = now_ms();
  for (int i = 0; i < args.steps; ++i) {
    marks.step_begin(i);
    for (int k = 0; k < kernels; ++k) tiny_kernel<<<1, 32, 0, s>>>(dev);
    CK(cudaStreamSynchronize(s));
    marks.step_end();
  }
  const double t = now_ms() - t0;
  std::printf("launch_bound: %d steps in %.1f ms, %.3f ms/step, %.2f us/launch\n", args.steps, t,
              t / args.steps, t * 1000.0 / (static_cast<double>(args.steps) * kernels));
  CK(cudaFree(dev));
  return 0;
}
