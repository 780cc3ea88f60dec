// copy_bound: each step copies a 256 MiB batch from pageable host memory (15 ms; the host blocks
// until it is done, like real CUDA), then runs one 5 ms kernel.  Per step:
//   launch_gap = 2*lat (before the copy starts, and before the kernel starts), copy = 15 ms,
//   compute = 5 ms.
#include "scenario_common.h"

using namespace sim_scenario;

int main(int argc, char** argv) {
  Harness h(argc, argv, "copy_bound", 20);
  const uint64_t L = 4 * kUs, lat = 5 * kUs, dcopy = 15 * kMs, dk = 5 * kMs;
  const uint64_t bytes = 256ull << 20;
  h.Init(1, L, lat);
  h.Param("copy_ns", dcopy);
  h.Param("copy_bytes", bytes);
  h.Param("kernel_ns", dk);
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    simMemcpyAsync(s, SIM_MEMCPY_H2D, bytes, dcopy, /*pageable=*/1);
    simLaunchKernel(s, "train_step_kernel", dk);
    simStreamSynchronize(s);
    Expect e;
    e.launch_gap = 2 * lat;
    e.copy = dcopy;
    e.compute = dk;
    h.StepEnd(e);
  }
  return h.Finish("copy");
}
