// balanced: a bit of everything.  Per step, from T0:
//   0.5 ms host work outside any range           -> host_other 0.5 ms
//   2 ms data range                               -> data_wait 2 ms
//   at T1: pinned H2D copy of 1 ms (stream A), 3 kernels of 2 ms (A), AllReduce 3 ms (B)
//     [T1, T1+lat]            idle, op submitted  -> launch_gap lat
//     [T1+lat, T1+4L+lat]     copy only           -> copy 4L
//     [T1+4L+lat, T1+lat+1ms] copy + AllReduce    -> communication_exposed 1 ms - 4L
//     [T1+lat+1ms, +6 ms]     kernels (AllReduce hidden under them) -> compute 6 ms
#include "scenario_common.h"

using namespace sim_scenario;

int main(int argc, char** argv) {
  Harness h(argc, argv, "balanced", 20);
  const uint64_t L = 4 * kUs, lat = 5 * kUs;
  const uint64_t host = 500 * kUs, data = 2 * kMs, dcopy = 1 * kMs, dk = 2 * kMs, dar = 3 * kMs;
  const uint64_t kernels = 3;
  h.Init(1, L, lat);
  h.Param("host_other_ns", host);
  h.Param("data_ns", data);
  h.Param("copy_ns", dcopy);
  h.Param("kernel_ns", dk);
  h.Param("allreduce_ns", dar);
  // Unmarked (--marks=none), the host pause before the input copy -- the host work and the
  // data range, no CUDA call between them -- is inferred data wait (docs/accounting.md).
  h.Param("unmarked_input_pause_ns", host + data);
  simStream_t a = simStreamCreate(0);
  simStream_t b = simStreamCreate(0);
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    simHostWork(host);
    h.DataPush();
    simHostWork(data);
    h.DataPop();
    simMemcpyAsync(a, SIM_MEMCPY_H2D, 64ull << 20, dcopy, /*pageable=*/0);
    for (uint64_t k = 0; k < kernels; ++k) simLaunchKernel(a, "transformer_block_kernel", dk);
    simNcclAllReduce(b, dar);
    simDeviceSynchronize(0);
    Expect e;
    e.host_other = host;
    e.data_wait = data;
    e.launch_gap = lat;
    e.copy = (kernels + 1) * L;
    e.communication_exposed = dcopy - (kernels + 1) * L;
    e.compute = kernels * dk;
    h.StepEnd(e);
  }
  return h.Finish("compute");
}
