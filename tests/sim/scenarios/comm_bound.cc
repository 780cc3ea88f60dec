// comm_bound: 4 compute kernels of 2 ms on stream A, then a 20 ms NCCL AllReduce on stream B that
// starts while the compute is still running.  Per step (L = launch cost, lat = latency):
//   launch_gap = lat; compute = 4*2 ms; communication_exposed = 4*L + 20 ms - 8 ms
// (the AllReduce starts at T0+4L+lat and ends after the compute: the part under compute counts
// as compute by priority).
#include "scenario_common.h"

using namespace sim_scenario;

int main(int argc, char** argv) {
  Harness h(argc, argv, "comm_bound", 20);
  const uint64_t L = 4 * kUs, lat = 5 * kUs, dk = 2 * kMs, dar = 20 * kMs;
  const uint64_t kernels = 4;
  h.Init(1, L, lat);
  h.Param("kernel_ns", dk);
  h.Param("kernels_per_step", kernels);
  h.Param("allreduce_ns", dar);
  simStream_t compute = simStreamCreate(0);
  simStream_t comm = simStreamCreate(0);
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    for (uint64_t k = 0; k < kernels; ++k) simLaunchKernel(compute, "backward_gemm_kernel", dk);
    simNcclAllReduce(comm, dar);
    simDeviceSynchronize(0);
    Expect e;
    e.launch_gap = lat;
    e.compute = kernels * dk;
    e.communication_exposed = kernels * L + dar - kernels * dk;
    h.StepEnd(e);
  }
  return h.Finish("communication_exposed");
}
