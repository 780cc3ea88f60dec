// million: 1,000,000 kernels in total (scale test).  Kernels of 4 us == launch cost, so the
// stream never idles after the first one.  Per step: launch_gap lat, compute K*4 us, where
// K = 1,000,000 / steps (default 100 steps of 10,000 kernels).
#include "scenario_common.h"

using namespace sim_scenario;

int main(int argc, char** argv) {
  Harness h(argc, argv, "million", 100);
  const uint64_t L = 4 * kUs, lat = 5 * kUs, dk = 4 * kUs;
  const uint64_t per_step = uint64_t{1000000} / static_cast<uint64_t>(h.steps());
  h.Init(1, L, lat);
  h.Param("kernel_ns", dk);
  h.Param("kernels_per_step", per_step);
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    for (uint64_t k = 0; k < per_step; ++k) simLaunchKernel(s, "tiny_kernel", dk);
    simStreamSynchronize(s);
    Expect e;
    e.launch_gap = lat;
    e.compute = per_step * dk;
    h.StepEnd(e);
  }
  return h.Finish("compute");
}
