// early_init: the library is loaded before CUDA (LD_PRELOAD, or `import gpuacct` before the
// first CUDA call) and the first step opens before cuInit, so its first host records are made
// before CUPTI is loaded.  Run it with a CUPTI clock other than the host's
// (GPUACCT_SIM_CUPTI_CLOCK=monotonic or offset:<ns>) to check that host records and CUPTI
// records end up on one timeline.  Needs the library loaded at start: without it the marks of
// step 0 go nowhere (gpuacct_dyn() resolves before cuInit).
//
// Per step: a 3 ms data range, then K 1-ms kernels back to back (L = 4 us, lat = 5 us), a
// synchronize; step 0 calls cuInit (simInit) after its data range.
//   data_wait 3 ms, launch_gap lat (the first launch), compute K ms.
#include "scenario_common.h"

using namespace sim_scenario;

int main(int argc, char** argv) {
  Harness h(argc, argv, "early_init", 10);
  const uint64_t L = 4 * kUs, lat = 5 * kUs, data = 3 * kMs, dk = 1 * kMs;
  const uint64_t kernels = 5;
  simStream_t s = nullptr;
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    h.DataPush();
    simHostWork(data);
    h.DataPop();
    if (i == 0) {
      h.Init(1, L, lat);  // cuInit: the driver initialises the (already loaded) library
      h.Param("data_ns", data);
      h.Param("kernel_ns", dk);
      h.Param("kernels_per_step", kernels);
      s = simStreamCreate(0);
    }
    for (uint64_t k = 0; k < kernels; ++k) simLaunchKernel(s, "early_gemm_kernel", dk);
    simStreamSynchronize(s);
    Expect e;
    e.data_wait = data;
    e.launch_gap = lat;
    e.compute = kernels * dk;
    h.StepEnd(e);
  }
  return h.Finish("data_wait");
}
