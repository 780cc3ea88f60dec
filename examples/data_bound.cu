// data_bound: every step waits 30 ms for its batch (host work inside a data range, like a
// DataLoader with too few workers), copies it (pinned, 64 MiB) and runs 5 ms of kernels.
// Expected verdict: data.
#include "common.cuh"

int main(int argc, char** argv) {
  ExampleArgs args(argc, argv, 30);
  Marks marks(args.marks);
  const size_t bytes = 64u << 20;
  float *host = nullptr, *dev = nullptr;
  CK(cudaMallocHost(&host, bytes));
  CK(cudaMalloc(&dev, bytes));
  std::memset(host, 0, bytes);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const long long ms = cycles_per_ms();
  const double t0 = now_ms();
  for (int i = 0; i < args.steps; ++i) {
    marks.step_begin(i);
    marks.data_push();
    host_sleep_ms(30);  // "decode the batch"
    marks.data_pop();
    CK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
    for (int k = 0; k < 5; ++k) spin_kernel<<<132, 128, 0, s>>>(ms);
    CK(cudaStreamSynchronize(s));
    marks.step_end();
  }
  std::printf("data_bound: %d steps in %.1f ms\n", args.steps, now_ms() - t0);
  CK(cudaFree(dev));
  CK(cudaFreeHost(host));
  return 0;
}
