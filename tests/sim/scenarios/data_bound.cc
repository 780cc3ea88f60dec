// data_bound: each step waits ~30 ms for input (a data range of host work), then runs 10 ms of
// kernels.  Per step: data_wait = 30 ms, launch_gap = latency (first kernel), compute = 10 ms.
#include "scenario_common.h"

using namespace sim_scenario;

int main(int argc, char** argv) {
  Harness h(argc, argv, "data_bound", 20);
  const uint64_t L = 4 * kUs, lat = 5 * kUs, data = 30 * kMs, dk = 1 * kMs;
  const int kernels = 10;
  h.Init(1, L, lat);
  h.Param("data_ns", data);
  h.Param("kernel_ns", dk);
  h.Param("kernels_per_step", kernels);
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    h.DataPush();
    simHostWork(data);
    h.DataPop();
    for (int k = 0; k < kernels; ++k) simLaunchKernel(s, "fwd_bwd_gemm_kernel", dk);
    simStreamSynchronize(s);
    Expect e;
    e.data_wait = data;
    e.launch_gap = lat;        // host issuing the first launch; op submitted, gap < 30 us
    e.compute = kernels * dk;  // back to back: each launch (4 us) is far shorter than a kernel
    h.StepEnd(e);
  }
  return h.Finish("data_wait");
}
