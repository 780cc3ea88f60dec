#include "analysis/import/kineto_format.h"

#include <algorithm>
#include <limits>

#include "analysis/import/json_scanner.h"

namespace gpuacct::kineto {
namespace {

using json_scan::Int128;

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// Microseconds at 1e-9 ns resolution (scale 10^12): at most 37 integer digits, far inside the
// 128-bit range, so two of them add without overflow.  Enough to add `ts` and `dur` exactly
// before rounding their sum to whole nanoseconds.
bool parse_us_fine(std::string_view t, Int128* out) {
  return json_scan::parse_scaled_wide(t, 12, 37, out);
}

// Fine units (1e-9 ns) -> whole ns, half away from zero; false outside int64.
bool fine_to_ns(Int128 fine, int64_t* ns) {
  constexpr Int128 kPerNs = 1'000'000'000;
  const Int128 half = kPerNs / 2;
  const Int128 q = fine >= 0 ? (fine + half) / kPerNs : -((-fine + half) / kPerNs);
  if (q > std::numeric_limits<int64_t>::max() || q < std::numeric_limits<int64_t>::min())
    return false;
  *ns = static_cast<int64_t>(q);
  return true;
}

}  // namespace

// Kineto's activity categories of accelerators other than CUDA GPUs (libkineto ActivityType
// names: mtia_runtime, mtia_ccp_events, mtia_insight, xpu_runtime, xpu_driver, hpu_op,
// privateuse1_runtime, glow_runtime, and vendor forks' mlu_* / gcu_*).
namespace {

bool is_other_accelerator_cat(std::string_view cat) {
  for (std::string_view p : {"mtia_", "xpu_", "hpu_", "mlu_", "gcu_", "privateuse1_", "glow_"}) {
    if (starts_with(cat, p)) return true;
  }
  return false;
}

}  // namespace

CatKind classify_cat(std::string_view cat) {
  if (cat == "kernel" || cat == "Kernel") return CatKind::kKernel;
  if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "Runtime") return CatKind::kRuntime;
  if (cat == "cpu_op" || cat == "Operator") return CatKind::kCpuOp;
  if (cat == "gpu_memcpy" || cat == "Memcpy") return CatKind::kMemcpy;
  if (cat == "gpu_memset" || cat == "Memset") return CatKind::kMemset;
  if (cat == "user_annotation") return CatKind::kUserAnnotation;
  if (cat == "ac2g" || cat == "async_cpu_to_gpu") return CatKind::kFlow;
  if (cat == "cuda_sync") return CatKind::kCudaSync;
  if (cat == "gpu_user_annotation") return CatKind::kGpuUserAnnotation;
  static constexpr std::string_view kIgnored[] = {
      "python_function", "fwdbwd", "Trace",  "cpu_instant_event", "cuda_profiler_range",
      "overhead",        "Python", "Mark",   "gpu_op",            "ProfilerStep",
  };
  for (std::string_view k : kIgnored) {
    if (cat == k) return CatKind::kIgnored;
  }
  if (is_other_accelerator_cat(cat)) return CatKind::kOtherAccelerator;
  return CatKind::kUnknown;
}

HostApiKind classify_api(std::string_view n) {
  if (starts_with(n, "cudaLaunchKernel") || starts_with(n, "cuLaunchKernel") ||
      starts_with(n, "cudaLaunchCooperativeKernel") ||
      starts_with(n, "cuLaunchCooperativeKernel") || starts_with(n, "cudaGraphLaunch") ||
      starts_with(n, "cuGraphLaunch"))
    return HostApiKind::kLaunch;
  if (starts_with(n, "cudaMemcpy") || starts_with(n, "cudaMemset") || starts_with(n, "cuMemcpy") ||
      starts_with(n, "cuMemset"))
    return HostApiKind::kCopy;
  // Blocking syncs: the calls that make the host wait for the GPU (cudaDeviceSynchronize,
  // cudaStreamSynchronize, cudaEventSynchronize, cuCtxSynchronize, ...).  cudaStreamWaitEvent /
  // cuStreamWaitEvent are not: they make a stream wait on the device and return at once
  // (cuda_runtime_api.h: "performed efficiently on the device").
  if (n.find("Synchronize") != std::string_view::npos) return HostApiKind::kSync;
  return HostApiKind::kOther;
}

CopyDir copy_dir_from_name(std::string_view n) {
  if (n.find("HtoD") != std::string_view::npos) return CopyDir::kH2D;
  if (n.find("DtoH") != std::string_view::npos) return CopyDir::kD2H;
  if (n.find("DtoD") != std::string_view::npos) return CopyDir::kD2D;
  if (n.find("PtoP") != std::string_view::npos) return CopyDir::kP2P;
  if (n.find("HtoH") != std::string_view::npos) return CopyDir::kH2H;
  return CopyDir::kNone;
}

bool profiler_step_number(std::string_view n, int64_t* number) {
  if (!starts_with(n, "ProfilerStep")) return false;
  size_t i = 12;
  while (i < n.size() && n[i] == ' ') ++i;
  *number = -1;
  if (i < n.size() && n[i] == '#') {
    ++i;
    while (i < n.size() && n[i] == ' ') ++i;
    size_t j = i;
    while (j < n.size() && n[j] >= '0' && n[j] <= '9') ++j;
    int64_t v = 0;
    if (j > i && j - i <= 18 && json_scan::parse_integer(n.substr(i, j - i), &v)) *number = v;
  }
  return true;
}

bool is_data_range(std::string_view n) {
  return starts_with(n, "enumerate(DataLoader)#") || starts_with(n, "enumerate(DataPipe)#");
}

bool parse_span_ns(std::string_view ts_text, std::string_view dur_text, int64_t* start,
                   int64_t* end) {
  // Kineto writes microseconds with at most 3 decimals: whole nanoseconds, exactly, and the
  // end needs no rounding.  The general path below gives the same numbers for these.
  int64_t ts_ns = 0, dur_ns = 0;
  if (json_scan::parse_scaled_simple(ts_text, 3, &ts_ns) &&
      json_scan::parse_scaled_simple(dur_text, 3, &dur_ns) && dur_ns >= 0) {
    *start = ts_ns;
    *end = ts_ns + dur_ns;  // both < 10^18: no overflow
    return true;
  }
  Int128 ts_fine = 0, dur_fine = 0;
  if (!json_scan::parse_scaled(ts_text, 3, start) || !parse_us_fine(ts_text, &ts_fine) ||
      !parse_us_fine(dur_text, &dur_fine) || dur_fine < 0 || !fine_to_ns(ts_fine + dur_fine, end)) {
    return false;
  }
  // Rounding at 1e-9 ns first can move the end of a zero-length event by a nanosecond
  // against the exactly rounded start only for 13+ decimals; never let it end first.
  *end = std::max(*end, *start);
  return true;
}

}  // namespace gpuacct::kineto
