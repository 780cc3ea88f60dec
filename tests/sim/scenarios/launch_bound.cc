// launch_bound: thousands of 5 us kernels per step; each launch costs 12 us of host time, so the
// GPU idles between kernels while the host issues the next one.  Launch latency is 7 us, chosen
// so latency + kernel == launch cost: kernel j runs [T0+12j+7, T0+12j+12] and the last one ends
// exactly when the host reaches the synchronize.  Per step: compute = N*5 us,
// launch_gap = N*7 us (every gap < 30 us with the host issuing calls).
#include "scenario_common.h"

using namespace sim_scenario;

int main(int argc, char** argv) {
  Harness h(argc, argv, "launch_bound", 20);
  const uint64_t L = 12 * kUs, lat = 7 * kUs, dk = 5 * kUs;
  const uint64_t kernels = 2000;
  h.Init(1, L, lat);
  h.Param("kernel_ns", dk);
  h.Param("kernels_per_step", kernels);
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    for (uint64_t k = 0; k < kernels; ++k) simLaunchKernel(s, "elementwise_add_kernel", dk);
    simStreamSynchronize(s);
    Expect e;
    e.compute = kernels * dk;
    e.launch_gap = kernels * lat;
    h.StepEnd(e);
  }
  return h.Finish("launch_gap");
}
