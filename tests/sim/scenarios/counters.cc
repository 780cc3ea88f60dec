// counters: planted hardware counters (simPlantCounters) for the fake CUPTI's PM sampling.
// Per step and device: a 3 ms data range (GPU idle), then a 4 ms "gemm" kernel and a 4 ms
// "elementwise" kernel back to back.  Counter values are planted per sampling interval of the
// sim clock (the fake samples on a grid of whole intervals): an interval whose midpoint falls in
// the gemm runs at the gemm's values (tensor pipes 80% on device 0), one in the elementwise at
// its values (tensor 10%), any other reads 0.  Kernels do not start on the grid, so intervals
// straddle the compute edges, the gemm -> elementwise change and the step edges.
//
// Truth (GPUACCT_SIM_COUNTERS_TRUTH=<path>): per step and device the compute time and each
// metric's expected mean over it -- sum over intervals of |interval n compute| x planted value,
// over the compute time; the speeds of light as docs/counters.md defines them (compute: the max
// of SM throughput and tensor activity, memory: the max of memory throughput and DRAM), per
// interval.  Written here from the planted values, apart from the library's code.
//
// Environment: GPUACCT_COUNTERS_INTERVAL_US (the grid; default 1000, as the library's),
// GPUACCT_SIM_SCENARIO_DEVICES (1 or 2), GPUACCT_SIM_SCENARIO_PAUSE_MS (real-time sleep after
// each step, so the library's worker ticks while the job runs; default 0),
// GPUACCT_SIM_SCENARIO_START_MS (default 10000): with GPUACCT_COUNTERS=1, the most real time
// to wait after step 0 for the library to start sampling (or be refused) on every device that
// ran work -- it does on a worker tick once the device's first records came -- before step 1
// (WaitForSampling; step 0 is run before sampling, as a real job's first step can be), and
// GPUACCT_SIM_SCENARIO_STRAY_CONTEXT=1: one more device whose context is created (simInit) but
// that never gets work, like a rank's stray context on another rank's GPU, and
// GPUACCT_SIM_SCENARIO_ONLY=gemm|elementwise: only that kernel per step (4 ms of compute; the
// tests/gpu scripts' stand-ins for examples/tensor_matmul and examples/elementwise), and
// GPUACCT_SIM_SCENARIO_FIRST_PAUSE_MS (default 0): a real-time sleep after step 0 only, as a
// real program's first step takes longer (its first launches load modules, cuBLAS warms up):
// with GPUACCT_SIM_SCENARIO_START_MS=0 the library gets only that time to start sampling, no
// wait for it -- the run as a short program makes it, shorter than a flush period if the
// pauses are short.
//
// The truth file also says, per device created, whether a client started PM sampling or was
// refused there (`pm_settled`, the fake's simPmSamplingSettled at the end of the steps).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "scenario_common.h"

using namespace sim_scenario;

namespace {

struct Planted {
  double v[SIM_COUNTER_COUNT];
};

// sm_active, tensor_active, dram, sm_throughput, memory_throughput.
constexpr Planted kGemm[2] = {{{95, 80, 30, 85, 40}}, {{90, 60, 25, 70, 35}}};
constexpr Planted kElementwise[2] = {{{90, 10, 70, 40, 75}}, {{85, 20, 65, 35, 92}}};

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

struct DeviceStep {
  int device;
  uint64_t gemm_begin, gemm_end, elementwise_end;
};

// Plants the intervals of [from, to) by their midpoints; returns nothing (the expected values
// are computed from the same rule by Expected()).
const Planted* ValueAt(const DeviceStep& s, uint64_t t) {
  if (t >= s.gemm_begin && t < s.gemm_end) return &kGemm[s.device];
  if (t >= s.gemm_end && t < s.elementwise_end) return &kElementwise[s.device];
  return nullptr;
}

void Plant(const DeviceStep& s, uint64_t interval) {
  for (uint64_t k = s.gemm_begin / interval; k * interval < s.elementwise_end; ++k) {
    const Planted* p = ValueAt(s, k * interval + interval / 2);
    if (p != nullptr) simPlantCounters(s.device, k * interval, (k + 1) * interval, p->v);
  }
}

// sm_active, tensor_active, dram, compute_sol, memory_sol over the compute time.
void Expected(const DeviceStep& s, uint64_t interval, double out[5]) {
  double sum[5] = {};
  for (uint64_t k = s.gemm_begin / interval; k * interval < s.elementwise_end; ++k) {
    const uint64_t a = std::max(k * interval, s.gemm_begin);
    const uint64_t b = std::min((k + 1) * interval, s.elementwise_end);
    const Planted* p = ValueAt(s, k * interval + interval / 2);
    if (b <= a || p == nullptr) continue;  // unplanted: 0
    const double w = static_cast<double>(b - a);
    sum[0] += w * p->v[SIM_COUNTER_SM_ACTIVE];
    sum[1] += w * p->v[SIM_COUNTER_TENSOR_ACTIVE];
    sum[2] += w * p->v[SIM_COUNTER_DRAM];
    sum[3] += w * std::max(p->v[SIM_COUNTER_SM_THROUGHPUT], p->v[SIM_COUNTER_TENSOR_ACTIVE]);
    sum[4] += w * std::max(p->v[SIM_COUNTER_MEMORY_THROUGHPUT], p->v[SIM_COUNTER_DRAM]);
  }
  const double total = static_cast<double>(s.elementwise_end - s.gemm_begin);
  for (int m = 0; m < 5; ++m) out[m] = sum[m] / total;
}

using Settled = int (*)(int);

// The fake CUPTI's simPmSamplingSettled (nullptr without CUPTI loaded).
Settled SettledFn() {
  void* cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  return cupti != nullptr ? reinterpret_cast<Settled>(dlsym(cupti, "simPmSamplingSettled"))
                          : nullptr;
}

// With GPUACCT_COUNTERS=1, waits (real time, at most GPUACCT_SIM_SCENARIO_START_MS, default
// 10 s) until the library started sampling on devices [0, devices), or was refused: the library
// sets a device up on its worker's tick once records from it arrived, which gpuacct_flush()
// brings forward.
void WaitForSampling(int devices) {
  const char* on = std::getenv("GPUACCT_COUNTERS");
  if (on == nullptr || std::strcmp(on, "1") != 0) return;
  const Settled settled = SettledFn();
  const gpuacct_dyn_api* api = gpuacct_dyn();
  const uint64_t max_ms = EnvU64("GPUACCT_SIM_SCENARIO_START_MS", 10000);
  for (uint64_t waited = 0; waited < max_ms; waited += 5) {
    bool all = settled != nullptr;
    for (int d = 0; all && d < devices; ++d) all = settled(d) != 0;
    if (all) return;
    if (api != nullptr) api->flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Harness h(argc, argv, "counters", 12);
  const uint64_t L = 4 * kUs, lat = 5 * kUs, data = 3 * kMs, dk = 4 * kMs;
  const uint64_t interval = EnvU64("GPUACCT_COUNTERS_INTERVAL_US", 1000) * kUs;
  const int devices = EnvU64("GPUACCT_SIM_SCENARIO_DEVICES", 1) >= 2 ? 2 : 1;
  const uint64_t pause_ms = EnvU64("GPUACCT_SIM_SCENARIO_PAUSE_MS", 0);
  const uint64_t first_pause_ms = EnvU64("GPUACCT_SIM_SCENARIO_FIRST_PAUSE_MS", 0);
  const char* only_env = std::getenv("GPUACCT_SIM_SCENARIO_ONLY");
  const std::string only = only_env != nullptr ? only_env : "";
  const bool gemm = only != "elementwise";
  const bool elementwise = only != "gemm";
  const int stray = EnvU64("GPUACCT_SIM_SCENARIO_STRAY_CONTEXT", 0) != 0 ? 1 : 0;
  h.Init(devices + stray, L, lat);
  h.Param("interval_ns", interval);
  simStream_t streams[2] = {simStreamCreate(0), devices > 1 ? simStreamCreate(1) : nullptr};
  std::string truth = "{\"interval_ns\": " + std::to_string(interval) + ", \"steps\": [";
  for (int i = 0; i < h.steps(); ++i) {
    h.StepBegin(i);
    h.DataPush();
    simHostWork(data);
    h.DataPop();
    // Planted before the launches: the sampler may read any interval once the clock passed it.
    DeviceStep steps[2];
    const uint64_t now = simNow();
    for (int d = 0; d < devices; ++d) {
      // Launch calls follow one another L apart: gemm on device 0, its elementwise, then
      // device 1's pair.  Each kernel starts at launch + latency, the elementwise when its
      // gemm ends.
      const uint64_t kernels = (gemm ? 1u : 0u) + (elementwise ? 1u : 0u);
      const uint64_t launch = now + static_cast<uint64_t>(d) * kernels * L;
      const uint64_t gemm_end = launch + lat + (gemm ? dk : 0);
      steps[d] = {d, launch + lat, gemm_end, gemm_end + (elementwise ? dk : 0)};
      Plant(steps[d], interval);
    }
    for (int d = 0; d < devices; ++d) {
      if (gemm) simLaunchKernel(streams[d], "gemm_bf16_tensorcore", dk);
      if (elementwise) simLaunchKernel(streams[d], "elementwise_add", dk);
    }
    simDeviceSynchronize(-1);
    Expect e;
    e.data_wait = data;
    e.launch_gap = lat;
    const uint64_t per_device = (gemm ? 1u : 0u) + (elementwise ? 1u : 0u);
    e.compute = per_device * dk + static_cast<uint64_t>(devices - 1) * per_device * L;  // last end
    h.StepEnd(e);
    for (int d = 0; d < devices; ++d) {
      double x[5];
      Expected(steps[d], interval, x);
      char line[512];
      std::snprintf(line, sizeof line,
                    "%s{\"index\": %d, \"device\": %d, \"compute_ns\": %" PRIu64
                    ", \"expected\": {\"sm_active\": %.9f, \"tensor_active\": %.9f, \"dram\": "
                    "%.9f, \"compute_sol\": %.9f, \"memory_sol\": %.9f}}",
                    (i == 0 && d == 0) ? "" : ", ", i, d,
                    steps[d].elementwise_end - steps[d].gemm_begin, x[0], x[1], x[2], x[3], x[4]);
      truth += line;
    }
    if (i == 0) WaitForSampling(devices);
    if (i == 0 && first_pause_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(first_pause_ms));
    }
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
  truth += "], \"pm_settled\": [";
  const Settled settled = SettledFn();
  for (int d = 0; d < devices + stray; ++d)
    truth += std::string(d == 0 ? "" : ", ") + (settled != nullptr && settled(d) != 0 ? "1" : "0");
  truth += "]}\n";
  if (const char* path = std::getenv("GPUACCT_SIM_COUNTERS_TRUTH"); path != nullptr && *path) {
    std::FILE* f = std::fopen(path, "w");
    if (f == nullptr || std::fputs(truth.c_str(), f) < 0 || std::fclose(f) != 0) return 2;
  }
  return h.Finish("compute");
}
