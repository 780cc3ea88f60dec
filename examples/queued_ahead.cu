// queued_ahead: the host never waits for the GPU within a step.  Each step launches 10 kernels
// of 1 ms and spends 5 ms on the host; only every 50th step synchronizes, so the GPU queue grows
// 5 ms a step and a kernel is always in flight between those synchronizes.  Real CUPTI hands a
// buffer back only once every record in it is complete (docs/injection.md, "What CUPTI may
// do", item 1): this is the loop whose records it holds back.  Expected verdict: compute; no
// GPU op or host event dropped as late (tests/gpu/check.sh, "held buffers").
#include "common.cuh"

int main(int argc, char** argv) {
  ExampleArgs args(argc, argv, 200);
  Marks marks(args.marks);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const long long ms = cycles_per_ms();
  const double t0 = now_ms();
  for (int i = 0; i < args.steps; ++i) {
    marks.step_begin(i);
    for (int k = 0; k < 10; ++k) spin_kernel<<<264, 256, 0, s>>>(ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if ((i + 1) % 50 == 0) CK(cudaStreamSynchronize(s));
    marks.step_end();
  }
  CK(cudaStreamSynchronize(s));
  std::printf("queued_ahead: %d steps in %.1f ms\n", args.steps, now_ms() - t0);
  return 0;
}
