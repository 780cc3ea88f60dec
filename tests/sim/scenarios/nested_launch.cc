// nested_launch: every launch is a cudaLaunchKernel that makes its cuLaunchKernel, as the real
// runtime does: with both CUPTI API domains traced, a runtime call and a driver call nested in
// it, with correlation ids as GPUACCT_SIM_NESTED_IDS says (shared / runtime / driver).  After
// the driver call returns the runtime stalls S = 200 us (longer than the 100 us host-pause
// threshold), and the GPU idles meanwhile: the host is inside a CUDA call, so that is launch
// time, and each runtime call is one launch.
//
// Per step, from T (the previous step's GPU end): N launches; launch i runs
//   runtime [h_i, h_i + pre + L + S), driver [h_i + pre, h_i + pre + L), h_i = T + i (pre + L + S)
// and submits a D-us kernel (the last one D_last) at h_i + pre + lat.  Gaps:
//   [T, k_0): pre + lat (the first call);
//   [end of kernel i-1, k_i): pre + L + S - D (launch i-1's runtime tail, then launch i).
// The last kernel outlasts the host's last call, so the step's synchronize waits for it.
//   compute = (N - 1) D + D_last,  launch_gap = pre + lat + (N - 1)(pre + L + S - D).
#include "scenario_common.h"

using namespace sim_scenario;

int main(int argc, char** argv) {
  Harness h(argc, argv, "nested_launch", 20);
  const uint64_t pre = 2 * kUs, L = 4 * kUs, S = 200 * kUs, lat = 5 * kUs;
  const uint64_t D = 50 * kUs, D_last = 500 * kUs;
  const uint64_t n = 10;
  h.Init(1, L, lat);
  h.Param("runtime_before_driver_ns", pre);
  h.Param("runtime_after_driver_ns", S);
  h.Param("kernel_ns", D);
  h.Param("last_kernel_ns", D_last);
  h.Param("launches_per_step", n);
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    for (uint64_t k = 0; k < n; ++k) {
      simLaunchKernelNested(s, "nested_gemm_kernel", k + 1 < n ? D : D_last, pre, S);
    }
    simStreamSynchronize(s);
    Expect e;
    e.compute = (n - 1) * D + D_last;
    e.launch_gap = pre + lat + (n - 1) * (pre + L + S - D);
    h.StepEnd(e);
  }
  return h.Finish("launch_gap");
}
