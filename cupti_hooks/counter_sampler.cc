#include "cupti_hooks/counter_sampler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "cupti_hooks/cupti_api.h"

namespace gpuacct::cupti {

namespace {

// What a hardware metric feeds (docs/counters.md, "Metrics").
enum class Role : uint8_t {
  kSmActive,
  kTensorActive,
  kDram,
  kComputeThroughput,
  kMemoryThroughput
};

struct RoleCandidates {
  Role role;
  const char* key;  // for the report
  // Tried in order; the first the chip accepts in a one-pass set is used.  Names from Nsight
  // Compute's PM sampling metrics (the `realtime` tensor metric is Hopper / Blackwell's; the
  // hmma one GA10x / Ada's); none confirmed on a GPU here (docs/counters.md).  PM sampling
  // takes a subset of the range profiler's metrics: the documented sampled ones (Nsight
  // Systems' GPU metrics, Nsight Compute's PmSampling section on H100: dramc__*,
  // sm__inst_executed_realtime, lts__throughput) stand behind each role's first choice.
  std::vector<const char*> names;
};

// Never destroyed: the report is written by an exit handler, after static destructors ran.
const std::vector<RoleCandidates>& candidates() {
  static const auto* table = new std::vector<RoleCandidates>{
      {Role::kSmActive, "sm_active", {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed"}},
      {Role::kTensorActive,
       "tensor_active",
       {"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"}},
      {Role::kDram,
       "dram",
       {"dramc__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes.avg.pct_of_peak_sustained_elapsed"}},
      {Role::kComputeThroughput,
       "compute_throughput",
       {"sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed"}},
      {Role::kMemoryThroughput,
       "memory_throughput",
       {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed"}},
  };
  return *table;
}

CounterState classify(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return CounterState::kInsufficientPrivileges;
    case CUPTI_ERROR_HARDWARE_BUSY:
      return CounterState::kBusy;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_API_NOT_IMPLEMENTED:
      return CounterState::kUnsupported;
    default:
      return CounterState::kFailed;
  }
}

// A percentage as the attribution takes it: NaN stays NaN (not given), a value a little over
// 100 (rounding of a ratio of counters) is 100, a negative or infinite one is not a value.
double clamp_pct(double v) {
  if (std::isnan(v) || std::isinf(v) || v < 0) return std::nan("");
  return std::min(v, 100.0);
}

double max_of(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::max(a, b);
}

// A sample's five values from its chosen metrics' evaluated values (docs/counters.md,
// "Hardware metrics and formulas"): the speeds of light as the max of their side.
void set_values(const std::vector<Role>& roles, const std::vector<double>& values,
                CounterSample& s) {
  for (double& v : s.pct) v = std::nan("");
  double compute = std::nan("");
  double memory = std::nan("");
  for (size_t m = 0; m < roles.size(); ++m) {
    const double v = clamp_pct(values[m]);
    switch (roles[m]) {
      case Role::kSmActive:
        s.pct[static_cast<int>(CounterMetric::kSmActive)] = v;
        break;
      case Role::kTensorActive:
        s.pct[static_cast<int>(CounterMetric::kTensorActive)] = v;
        compute = max_of(compute, v);
        break;
      case Role::kDram:
        s.pct[static_cast<int>(CounterMetric::kDram)] = v;
        memory = max_of(memory, v);
        break;
      case Role::kComputeThroughput:
        compute = max_of(compute, v);
        break;
      case Role::kMemoryThroughput:
        memory = max_of(memory, v);
        break;
    }
  }
  s.pct[static_cast<int>(CounterMetric::kComputeSol)] = compute;
  s.pct[static_cast<int>(CounterMetric::kMemorySol)] = memory;
}

}  // namespace

const char* to_string(CounterState s) {
  switch (s) {
    case CounterState::kActive:
      return "active";
    case CounterState::kUnsupported:
      return "unsupported";
    case CounterState::kInsufficientPrivileges:
      return "insufficient_privileges";
    case CounterState::kBusy:
      return "busy";
    case CounterState::kFailed:
      return "failed";
  }
  return "failed";
}

std::string counter_refusal_line(CounterState state, uint16_t device, const std::string& chip,
                                 const std::string& detail) {
  std::string where = "hardware counters off on device " + std::to_string(device);
  if (!chip.empty()) where += " (" + chip + ")";
  std::string cause;
  std::string fix;
  switch (state) {
    case CounterState::kInsufficientPrivileges:
      cause =
          "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: the driver lets only admin users read GPU "
          "performance counters (NVreg_RestrictProfilingToAdminUsers=1)";
      fix =
          "run as root (or with CAP_SYS_ADMIN), or load the nvidia module with "
          "NVreg_RestrictProfilingToAdminUsers=0";
      break;
    case CounterState::kBusy:
      cause =
          "CUPTI_ERROR_HARDWARE_BUSY: another client holds the performance counters (DCGM "
          "profiling, e.g. dcgm-exporter's DCP metrics, a profiler, or another process of "
          "this job that also runs work on this GPU)";
      fix =
          "pause DCGM profiling while the job runs (dcgmi profile --pause / --resume); give "
          "each rank only its own GPU (CUDA_VISIBLE_DEVICES)";
      break;
    case CounterState::kUnsupported:
      cause = "PM sampling is not supported here (" + detail + ")";
      fix =
          "a GPU of compute capability 8.6 or newer (GA10x, Ada, Hopper, Blackwell; not vGPU "
          "or MIG) and a CUPTI from CUDA 12.6 or newer, or unset GPUACCT_COUNTERS";
      break;
    case CounterState::kActive:
    case CounterState::kFailed:
      cause = detail;
      fix = "unset GPUACCT_COUNTERS, or report this line with the CUDA version";
      break;
  }
  return where + ": " + cause + "; fix: " + fix + "; tracing continues without counters";
}

struct CounterSampler::Device {
  uint16_t index = 0;
  CounterState state = CounterState::kFailed;
  std::string chip;
  std::string line;
  std::vector<Role> roles;           // of each chosen metric
  std::vector<std::string> names;    // chosen metrics
  std::vector<const char*> c_names;  // into `names`
  CUpti_Profiler_Host_Object* host = nullptr;
  CUpti_PmSampling_Object* sampler = nullptr;
  std::vector<uint8_t> counter_availability;
  std::vector<uint8_t> config;
  std::vector<uint8_t> image;
  std::vector<uint8_t> blank_image;  // the initialised image, copied back after each decode
  // The samples' own clock (raw): the end of the last sample decoded; 0 before the first.
  uint64_t last_end = 0;
  // cuptiGetTimestamp when a decode last emptied the hardware buffer (or sampling started),
  // and at the stop: what a decode that keeps failing loses lies between them and now.
  uint64_t emptied_at = 0;
  uint64_t stopped_at = 0;
  uint64_t started_at = 0;      // cuptiGetTimestamp just before cuptiPmSamplingStart
  uint64_t start_returned = 0;  // ... and just after it
  uint64_t last_decode_at = 0;
  std::optional<int64_t> first_sample_lag_ns;
  // The bracket of (sample clock - CUPTI clock): docs/counters.md, "Clock".
  std::optional<int64_t> offset_low, offset_high;
  bool high_open = false;  // the first decode overflowed: no upper end
  const char* clock = "";
  std::vector<std::string> to_say;  // lines the decode that found them says
  std::vector<int64_t> durations;   // of the first samples after the first (interval seen)
  bool interval_checked = false;
  int64_t before_start = 0;   // samples dropped for beginning before the start
  CounterDebug dbg;           // GPUACCT_COUNTERS_DEBUG
  size_t dbg_last_index = 0;  // the image index of dbg.first_samples.back()
  int decode_failures = 0;    // in a row
  bool timed = false;       // a sample's time was read (its holes are losses from then on)
  bool stopped = false;
  bool drained = false;  // stopped and decoded to the end of the records
  int64_t samples = 0;
  std::vector<double> values;
};

CounterSampler::CounterSampler(CuptiApi& api, const CounterOptions& options)
    : api_(api), options_(options) {}

CounterSampler::~CounterSampler() = default;

namespace {

#define GPUACCT_PARAMS(type, name)    \
  type name;                          \
  std::memset(&name, 0, sizeof name); \
  name.structSize = type##_STRUCT_SIZE

void drop_host(CuptiApi& api, CUpti_Profiler_Host_Object** host) {
  if (*host == nullptr) return;
  GPUACCT_PARAMS(CUpti_Profiler_Host_Deinitialize_Params, fin);
  fin.pHostObject = *host;
  api.cuptiProfilerHostDeinitialize(&fin);
  *host = nullptr;
}

// A host object with `names` added and its config image; the CUPTI error when it fails, and
// the passes the set needs.
CUptiResult make_config(CuptiApi& api, const char* chip, const std::vector<uint8_t>& availability,
                        const std::vector<const char*>& names, CUpti_Profiler_Host_Object** host,
                        std::vector<uint8_t>* config, size_t* passes) {
  GPUACCT_PARAMS(CUpti_Profiler_Host_Initialize_Params, init);
  init.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
  init.pChipName = chip;
  init.pCounterAvailabilityImage = availability.data();
  CUptiResult r = api.cuptiProfilerHostInitialize(&init);
  if (r != CUPTI_SUCCESS) return r;
  *host = init.pHostObject;
  GPUACCT_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params, add);
  add.pHostObject = *host;
  add.ppMetricNames = const_cast<const char**>(names.data());
  add.numMetrics = names.size();
  r = api.cuptiProfilerHostConfigAddMetrics(&add);
  if (r == CUPTI_SUCCESS) {
    GPUACCT_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params, size);
    size.pHostObject = *host;
    r = api.cuptiProfilerHostGetConfigImageSize(&size);
    if (r == CUPTI_SUCCESS) {
      config->assign(size.configImageSize, 0);
      GPUACCT_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params, image);
      image.pHostObject = *host;
      image.configImageSize = config->size();
      image.pConfigImage = config->data();
      r = api.cuptiProfilerHostGetConfigImage(&image);
    }
    if (r == CUPTI_SUCCESS) {
      GPUACCT_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params, np);
      np.configImageSize = config->size();
      np.pConfigImage = config->data();
      r = api.cuptiProfilerHostGetNumOfPasses(&np);
      *passes = np.numOfPasses;
    }
  }
  if (r != CUPTI_SUCCESS) drop_host(api, host);
  return r;
}

// Greedy: each role's first candidate that keeps the set valid and one pass.  CUPTI_SUCCESS
// (with no metric chosen when the chip has none), or the refusal a set-up call gave
// (privileges, busy).
CUptiResult choose_metrics(CuptiApi& api, const std::string& chip,
                           const std::vector<uint8_t>& availability, std::vector<Role>* roles,
                           std::vector<std::string>* names) {
  for (const RoleCandidates& rc : candidates()) {
    for (const char* name : rc.names) {
      std::vector<const char*> trial;
      for (const std::string& n : *names) trial.push_back(n.c_str());
      trial.push_back(name);
      CUpti_Profiler_Host_Object* host = nullptr;
      std::vector<uint8_t> config;
      size_t passes = 0;
      const CUptiResult r =
          make_config(api, chip.c_str(), availability, trial, &host, &config, &passes);
      drop_host(api, &host);
      if (r == CUPTI_SUCCESS && passes == 1) {
        roles->push_back(rc.role);
        names->emplace_back(name);
        break;
      }
      const CounterState why = classify(r);
      if (r != CUPTI_SUCCESS && why != CounterState::kFailed && why != CounterState::kUnsupported) {
        return r;
      }
    }
  }
  return CUPTI_SUCCESS;
}

}  // namespace

std::string CounterSampler::enable(uint16_t device) {
  // The final drain (Pipeline::finish) stops sampling before its last collect: a device first
  // seen then would cost a set-up at exit and sample on, never stopped.
  if (stopped_) return "";
  for (const auto& d : devices_) {
    if (d->index == device) return "";
  }
  devices_.push_back(std::make_unique<Device>());
  Device& d = *devices_.back();
  d.index = device;
  d.line = set_up(d);
  if (d.state != CounterState::kActive) drop_host(api_, &d.host);
  return d.line;
}

// The metric choice and d's config image.  The choice is made once per chip: a device of a chip
// already set up takes its set, checked by its own config image (one host object instead of
// one per candidate tried -- a dozen, each loading the chip's metric tables, on the worker);
// should that set not fit this device's counter availability, it chooses on its own.  `call`:
// the call a failure is named after.  No metric chosen (d.names empty) is CUPTI_SUCCESS.  (A
// CUptiResult as int: the header stays CUPTI-free.)
int CounterSampler::configure(Device& d, const char** call) {
  auto set_names = [&d](const std::vector<Role>& roles, const std::vector<std::string>& names) {
    d.roles = roles;
    d.names = names;
    d.c_names.clear();
    for (const std::string& n : d.names) d.c_names.push_back(n.c_str());
  };
  size_t passes = 0;
  for (const auto& other : devices_) {
    if (other.get() == &d || other->chip != d.chip || other->state != CounterState::kActive) {
      continue;
    }
    set_names(other->roles, other->names);
    if (make_config(api_, d.chip.c_str(), d.counter_availability, d.c_names, &d.host, &d.config,
                    &passes) == CUPTI_SUCCESS &&
        passes == 1) {
      return CUPTI_SUCCESS;
    }
    drop_host(api_, &d.host);
    break;
  }
  std::vector<Role> roles;
  std::vector<std::string> names;
  *call = "cuptiProfilerHostConfigAddMetrics";
  const CUptiResult r = choose_metrics(api_, d.chip, d.counter_availability, &roles, &names);
  set_names(roles, names);
  if (r != CUPTI_SUCCESS || d.names.empty()) return r;
  *call = "cuptiProfilerHostGetConfigImage";
  return make_config(api_, d.chip.c_str(), d.counter_availability, d.c_names, &d.host, &d.config,
                     &passes);
}

// The set-up sequence of cupti_pmsampling.h / cupti_profiler_host.h; the refusal line, or
// empty with d.state kActive.
std::string CounterSampler::set_up(Device& d) {
  d.dbg.setup_began = cupti_now();
  auto refuse = [&](CUptiResult r, const std::string& what) {
    d.state = classify(r);
    return counter_refusal_line(
        d.state, d.index, d.chip,
        what + ": " + api_.result_string(r) + " (" + std::to_string(static_cast<int>(r)) + ")");
  };
  if (const char* missing = api_.missing_counter_function(); missing != nullptr) {
    d.state = CounterState::kUnsupported;
    return counter_refusal_line(
        d.state, d.index, "",
        "CUPTI API version " + std::to_string(api_.version) + " lacks " + missing);
  }
  if (!profiler_initialized_) {
    GPUACCT_PARAMS(CUpti_Profiler_Initialize_Params, init);
    const CUptiResult r = api_.cuptiProfilerInitialize(&init);
    if (r != CUPTI_SUCCESS) return refuse(r, "cuptiProfilerInitialize");
    profiler_initialized_ = true;
  }
  GPUACCT_PARAMS(CUpti_Device_GetChipName_Params, chip);
  chip.deviceIndex = d.index;
  CUptiResult r = api_.cuptiDeviceGetChipName(&chip);
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiDeviceGetChipName");
  d.chip = chip.pChipName != nullptr ? chip.pChipName : "";
  GPUACCT_PARAMS(CUpti_PmSampling_GetCounterAvailability_Params, avail);
  avail.deviceIndex = d.index;
  r = api_.cuptiPmSamplingGetCounterAvailability(&avail);
  if (r == CUPTI_SUCCESS) {
    d.counter_availability.assign(avail.counterAvailabilityImageSize, 0);
    avail.pCounterAvailabilityImage = d.counter_availability.data();
    r = api_.cuptiPmSamplingGetCounterAvailability(&avail);
  }
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiPmSamplingGetCounterAvailability");

  const char* call = "";
  r = static_cast<CUptiResult>(configure(d, &call));
  if (r != CUPTI_SUCCESS) return refuse(r, call);
  if (d.names.empty()) {
    d.state = CounterState::kUnsupported;
    return counter_refusal_line(d.state, d.index, d.chip,
                                "the chip has none of the metrics gpuacct reads in one pass");
  }

  GPUACCT_PARAMS(CUpti_PmSampling_Enable_Params, en);
  en.deviceIndex = d.index;
  d.dbg.enable_before = cupti_now();
  r = api_.cuptiPmSamplingEnable(&en);
  d.dbg.enable_after = cupti_now();
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiPmSamplingEnable");
  d.sampler = en.pPmSamplingObject;

  GPUACCT_PARAMS(CUpti_PmSampling_SetConfig_Params, sc);
  sc.pPmSamplingObject = d.sampler;
  sc.configSize = d.config.size();
  sc.pConfig = d.config.data();
  sc.hardwareBufferSize = options_.hardware_buffer_bytes;
  // cupti_pmsampling.h, CUpti_PmSampling_SetConfig_Params::samplingInterval: "For the trigger
  // mode CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, sampling interval is in
  // nanoseconds" (GPU_SYSCLK_INTERVAL counts SYS clock cycles, "by default variable": not a
  // time).  The time trigger is "supported on Ampere GA10x and later".
  sc.samplingInterval = uint64_t{options_.interval_us} * 1000;
  sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  d.dbg.trigger_mode = "gpu_time_interval";
  d.dbg.sampling_interval = sc.samplingInterval;
  d.dbg.interval_unit = "ns";
  d.dbg.hardware_buffer_bytes = sc.hardwareBufferSize;
  // Keep the latest: a buffer that fills (a stalled worker) loses its oldest samples, which the
  // gap in the sample times then counts, and sampling never stops in a days-long run.
  sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
  r = api_.cuptiPmSamplingSetConfig(&sc);
  d.dbg.set_config_after = cupti_now();
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiPmSamplingSetConfig");

  // Room for 4 decode periods of samples per decode call (more are decoded in a loop).
  const uint64_t per_period =
      uint64_t{options_.decode_period_ms} * 1000 / std::max<uint32_t>(1, options_.interval_us);
  GPUACCT_PARAMS(CUpti_PmSampling_GetCounterDataSize_Params, ds);
  ds.pPmSamplingObject = d.sampler;
  ds.pMetricNames = d.c_names.data();
  ds.numMetrics = d.c_names.size();
  ds.maxSamples = static_cast<uint32_t>(std::clamp<uint64_t>(4 * per_period, 256, 100000));
  d.dbg.max_samples_per_decode = ds.maxSamples;
  r = api_.cuptiPmSamplingGetCounterDataSize(&ds);
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiPmSamplingGetCounterDataSize");
  d.image.assign(ds.counterDataSize, 0);
  GPUACCT_PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params, ci);
  ci.pPmSamplingObject = d.sampler;
  ci.counterDataSize = d.image.size();
  ci.pCounterData = d.image.data();
  r = api_.cuptiPmSamplingCounterDataImageInitialize(&ci);
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiPmSamplingCounterDataImageInitialize");
  d.blank_image = d.image;

  const uint64_t now = cupti_now();
  GPUACCT_PARAMS(CUpti_PmSampling_Start_Params, st);
  st.pPmSamplingObject = d.sampler;
  r = api_.cuptiPmSamplingStart(&st);
  d.start_returned = cupti_now();
  d.dbg.start_before = now;
  d.dbg.start_after = d.start_returned;
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiPmSamplingStart");
  d.emptied_at = now;  // nothing before the start is owed
  d.started_at = now;
  d.last_decode_at = now;
  d.dbg.metric_names = d.names;
  d.values.assign(d.names.size(), 0.0);
  d.state = CounterState::kActive;
  return "";
}

// The header says only "Start time of the sample" (cupti_pmsampling.h,
// CUpti_PmSampling_CounterData_GetSampleInfo_Params): not that it is on the activity records'
// clock, which CUPTI promises for GPU activity timestamps alone (cupti_activity.h,
// cuptiActivityRegisterTimestampCallback: "CUPTI performs a linear interpolation to convert GPU
// timestamps into CPU timestamps" for kernels, copies, memsets).  So the clock is measured, from
// two things the header does say:
//   - a sample is in the hardware buffer only once complete, and cuptiPmSamplingDecodeData
//     returns only what the buffer held (numCompletedSamples): every sample it returns ended
//     before it returned -> offset >= end - (cuptiGetTimestamp after the decode);
//   - "cuptiPmSamplingStart: ... The GPU will start collecting the metrics data periodically":
//     the first sample ends after the start, within one interval of it (the trigger fires every
//     interval from then on) -> offset <= first end - (cuptiGetTimestamp before the start).
// When 0 lies in that bracket the samples are on the activity clock and are not moved; when it
// does not, they are moved by the middle of what is left of it (within half an interval).
// `overflowed`: the decode said the hardware buffer overflowed -- its first sample need not
// be the first after the start, so it bounds nothing from above (the bracket stays open there).
void CounterSampler::bound_clock(Device& d, uint64_t end, uint64_t decoded_by, bool overflowed) {
  const int64_t low = static_cast<int64_t>(end) - static_cast<int64_t>(decoded_by);
  if (!d.offset_low || low > *d.offset_low) d.offset_low = low;
  if (!d.offset_high && !d.high_open) {
    if (overflowed) {
      d.high_open = true;
    } else {
      d.offset_high = static_cast<int64_t>(end) - static_cast<int64_t>(d.started_at);
    }
  }
}

int64_t CounterSampler::clock_offset(const Device& d) const {
  if (!d.offset_low) return 0;
  const int64_t low = *d.offset_low;
  // Open above (the first decode overflowed): 0 when the bracket holds it, else its end.
  if (!d.offset_high) return low <= 0 ? 0 : low;
  const int64_t high = *d.offset_high;
  if (low <= 0 && 0 <= high) return 0;
  if (low > high) return low;  // not as the header has it: the freshest evidence
  const auto interval_ns = static_cast<int64_t>(uint64_t{options_.interval_us} * 1000);
  const int64_t from = std::max(low, high - interval_ns);
  // The first sample beginning at the start (within the start call) fixes the offset exactly
  // when that fits the bracket; a first sample that began earlier does not, and then the
  // middle of the bracket is within half an interval.
  if (d.first_sample_lag_ns) {
    const int64_t width = static_cast<int64_t>(d.start_returned - d.started_at);
    if (*d.first_sample_lag_ns >= from - width && *d.first_sample_lag_ns <= high) {
      return *d.first_sample_lag_ns;
    }
  }
  return from + (high - from) / 2;
}

void CounterSampler::note_first_sample(Device& d, uint64_t start) {
  d.first_sample_lag_ns = static_cast<int64_t>(start) - static_cast<int64_t>(d.started_at);
}

// The length the hardware gives a sample, against the interval set: a trigger or unit other
// than the header's reading shows here (samples 1000x longer, or a cycle count taken as
// nanoseconds), and the counters would land on the wrong time grid: said once.
void CounterSampler::note_duration(Device& d, uint64_t start, uint64_t end) {
  constexpr size_t kLengthsKept = 33;
  if (end <= start) return;
  const auto length = static_cast<int64_t>(end - start);
  d.dbg.duration_min_ns = d.durations.empty() ? length : std::min(d.dbg.duration_min_ns, length);
  d.dbg.duration_max_ns = std::max(d.dbg.duration_max_ns, length);
  if (d.durations.size() < kLengthsKept) d.durations.push_back(length);
  if (d.interval_checked || d.durations.size() < 5) return;
  std::vector<int64_t> sorted = d.durations;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2),
                   sorted.end());
  const int64_t median = sorted[sorted.size() / 2];
  const auto interval_ns = static_cast<int64_t>(uint64_t{options_.interval_us} * 1000);
  if (d.durations.size() < kLengthsKept && median >= interval_ns * 3 / 4 &&
      median <= interval_ns * 5 / 4) {
    return;  // as set so far; look again with more
  }
  d.interval_checked = true;
  if (median >= interval_ns * 3 / 4 && median <= interval_ns * 5 / 4) return;
  d.to_say.push_back("hardware counters on device " + std::to_string(d.index) + ": samples are " +
                     std::to_string(median / 1000) +
                     " us long where the GPU time-interval trigger was set to " +
                     std::to_string(interval_ns) +
                     " ns (cupti_pmsampling.h: its interval is in nanoseconds); counters land "
                     "on another grid than the steps assume; report this line with the CUDA "
                     "version");
}

uint64_t CounterSampler::cupti_now() const {
  uint64_t now = 0;
  if (api_.cuptiGetTimestamp != nullptr) api_.cuptiGetTimestamp(&now);
  return now;
}

std::vector<std::string> CounterSampler::decode(int64_t clock_offset_ns,
                                                std::vector<CounterSample>& out, Stats& stats) {
  std::vector<std::string> to_say;
  for (const auto& d : devices_) {
    if (d->state == CounterState::kActive && !d->drained) {
      decode_device(*d, clock_offset_ns, out, stats);
      for (std::string& line : d->to_say) to_say.push_back(std::move(line));
      d->to_say.clear();
      if (d->state != CounterState::kActive) to_say.push_back(d->line);
    }
  }
  return to_say;
}

// A decode that fails once may work at the next tick (what KEEP_LATEST overwrote meanwhile is
// then a hole in the sample times, counted there); one that keeps failing (e.g. the
// CUPTI_ERROR_OUT_OF_MEMORY of a buffer that overflowed, after which NVIDIA's samples restart
// the session) would otherwise hold the watermark kCounterLagLimitNs back for the rest of the
// run and lose every later sample without a word.  Both clocks here are cuptiGetTimestamp's,
// so the count does not depend on the clock of the sample timestamps.
void CounterSampler::decode_failed(Device& d, const std::string& why, Stats& stats) {
  ++d.decode_failures;
  if (!d.stopped && d.decode_failures < kDecodeFailuresToGiveUp) return;
  const uint64_t until = d.stopped ? d.stopped_at : cupti_now();
  const uint64_t interval_ns = uint64_t{options_.interval_us} * 1000;
  // What was decoded after the last complete decode (a tick that hit its round limit) is not
  // lost: the last sample's end, on CUPTI's clock, says where decoding stopped.
  uint64_t from = d.emptied_at;
  if (d.timed) {
    const int64_t last = static_cast<int64_t>(d.last_end) - clock_offset(d);
    if (last > 0) from = std::max(from, static_cast<uint64_t>(last));
  }
  if (until > from) {
    stats.add(Stat::counter_samples_lost, static_cast<int64_t>((until - from) / interval_ns));
  }
  d.emptied_at = std::max(d.emptied_at, until);
  if (d.stopped) {
    d.drained = true;
    return;
  }
  GPUACCT_PARAMS(CUpti_PmSampling_Stop_Params, st);
  st.pPmSamplingObject = d.sampler;
  api_.cuptiPmSamplingStop(&st);  // best effort: the counters are released for others
  d.stopped = true;
  d.drained = true;
  d.state = CounterState::kFailed;
  d.line = counter_refusal_line(d.state, d.index, d.chip,
                                "cuptiPmSamplingDecodeData failed " +
                                    std::to_string(d.decode_failures) + " times in a row (" + why +
                                    "); its samples from then on are lost (counter_samples_lost)");
}

void CounterSampler::decode_device(Device& d, int64_t clock_offset_ns,
                                   std::vector<CounterSample>& out, Stats& stats) {
  const uint64_t interval_ns = uint64_t{options_.interval_us} * 1000;
  const uint64_t decode_began = cupti_now();  // what the buffer held by then is decoded below
  // Bounded: a decode call takes at most the image's room; a worker that fell far behind
  // catches up over a few ticks rather than holding the pipeline here.
  struct Info {
    bool ok = false;
    uint64_t start = 0, end = 0;
  };
  std::vector<Info> infos;
  for (int round = 0; round < 16; ++round) {
    GPUACCT_PARAMS(CUpti_PmSampling_DecodeData_Params, dec);
    dec.pPmSamplingObject = d.sampler;
    dec.pCounterDataImage = d.image.data();
    dec.counterDataImageSize = d.image.size();
    const uint64_t before = cupti_now();
    // CUPTI_ERROR_OUT_OF_MEMORY: the hardware buffer overflowed (KEEP_OLDEST semantics).
    const CUptiResult r = GPUACCT_CUPTI_CALL(api_, cuptiPmSamplingDecodeData, &dec);
    const uint64_t after = cupti_now();
    if (r != CUPTI_SUCCESS) {
      decode_failed(
          d, std::string(api_.result_string(r)) + " (" + std::to_string(static_cast<int>(r)) + ")",
          stats);
      return;
    }
    d.decode_failures = 0;
    d.last_decode_at = after;
    ++d.dbg.decodes;
    if (dec.overflow != 0) ++d.dbg.overflows;
    GPUACCT_PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params, info);
    info.pCounterDataImage = d.image.data();
    info.counterDataImageSize = d.image.size();
    size_t completed = 0;
    if (api_.cuptiPmSamplingGetCounterDataInfo(&info) == CUPTI_SUCCESS) {
      // Only completed samples are evaluated (NVIDIA's pm_sampling sample does the same); one
      // populated but not complete is counted here, for the GPU check to show.
      completed = info.numCompletedSamples;
      if (info.numPopulatedSamples > completed) {
        d.dbg.populated_not_completed += static_cast<int64_t>(info.numPopulatedSamples - completed);
      }
    }
    if (completed > 0) {
      ++d.dbg.decodes_with_samples;
      if (d.dbg.first_sample_decoded_at == 0) d.dbg.first_sample_decoded_at = after;
    }
    // First the times of this decode's samples: they bound the clock the samples are on.
    infos.assign(completed, Info{});
    for (size_t i = 0; i < completed; ++i) {
      GPUACCT_PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params, si);
      si.pPmSamplingObject = d.sampler;
      si.pCounterDataImage = d.image.data();
      si.counterDataImageSize = d.image.size();
      si.sampleIndex = i;
      if (api_.cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS ||
          si.endTimestamp <= si.startTimestamp) {
        continue;
      }
      infos[i] = {true, si.startTimestamp, si.endTimestamp};
      if (!d.first_sample_lag_ns) note_first_sample(d, si.startTimestamp);
      bound_clock(d, si.endTimestamp, after, dec.overflow != 0);
    }
    const int64_t offset = clock_offset(d);
    d.clock = !d.offset_low                                     ? ""
              : offset == 0                                     ? "activity"
              : d.offset_high && *d.offset_low > *d.offset_high ? "inconsistent"
                                                                : "mapped";
    // The start, moved onto the samples' clock: a sample beginning before it (beyond the
    // bracket's width) holds time when the counters were not collecting (a sample open since
    // the enable, say): its values are not those of its interval.
    const int64_t start_raw = static_cast<int64_t>(d.started_at) + offset;
    const int64_t before_start_slack =
        static_cast<int64_t>(interval_ns) + static_cast<int64_t>(d.start_returned - d.started_at);
    int64_t gap_lost = 0;
    for (size_t i = 0; i < completed; ++i) {
      const Info& si = infos[i];
      // A sample that cannot be used is lost once: its time moves last_end on (taken to be
      // the next interval when unknown), so the next sample does not count it again as a hole.
      if (!si.ok) {
        stats.add(Stat::counter_samples_lost, 1);
        if (d.timed) d.last_end += interval_ns;
        continue;
      }
      // Samples follow one another; a hole of whole intervals is samples the buffer lost.
      // Before the first sample nothing is owed (it may begin a little after the start),
      // unless CUPTI says the buffer overflowed: then the hole from the start counts.
      if (d.timed && si.start > d.last_end + interval_ns / 2) {
        gap_lost += static_cast<int64_t>((si.start - d.last_end + interval_ns / 2) / interval_ns);
      } else if (!d.timed && dec.overflow != 0 &&
                 static_cast<int64_t>(si.start) >
                     start_raw + static_cast<int64_t>(interval_ns / 2)) {
        gap_lost +=
            (static_cast<int64_t>(si.start) - start_raw + static_cast<int64_t>(interval_ns / 2)) /
            static_cast<int64_t>(interval_ns);
      }
      if (d.timed) note_duration(d, si.start, si.end);
      d.last_end = std::max(d.last_end, si.end);
      d.timed = true;
      keep_debug_sample(d, i, si.start, si.end, before, after);
      if (static_cast<int64_t>(si.start) < start_raw - before_start_slack) {
        if (options_.debug) evaluate(d, i);  // its raw values, for the GPU check to show
        ++d.before_start;
        continue;
      }
      if (!evaluate(d, i)) {
        stats.add(Stat::counter_samples_lost, 1);
        continue;
      }
      CounterSample s;
      s.device = d.index;
      s.start = static_cast<int64_t>(si.start) - offset - clock_offset_ns;
      s.end = static_cast<int64_t>(si.end) - offset - clock_offset_ns;
      set_values(d.roles, d.values, s);
      out.push_back(s);
      ++d.samples;
    }
    if (dec.overflow != 0 && gap_lost == 0) gap_lost = 1;
    stats.add(Stat::counter_samples_lost, gap_lost);
    std::copy(d.blank_image.begin(), d.blank_image.end(), d.image.begin());
    if (dec.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) {
      d.emptied_at = std::max(d.emptied_at, decode_began);
      if (d.stopped) d.drained = true;
      return;
    }
  }
}

// cuptiProfilerHostEvaluateToGpuValues of sample `i` of the image into d.values.
bool CounterSampler::evaluate(Device& d, size_t i) {
  GPUACCT_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params, ev);
  ev.pHostObject = d.host;
  ev.pCounterDataImage = d.image.data();
  ev.counterDataImageSize = d.image.size();
  ev.rangeIndex = i;
  ev.ppMetricNames = d.c_names.data();
  ev.numMetrics = d.c_names.size();
  ev.pMetricValues = d.values.data();
  const bool ok =
      GPUACCT_CUPTI_CALL(api_, cuptiProfilerHostEvaluateToGpuValues, &ev) == CUPTI_SUCCESS;
  // GPUACCT_COUNTERS_DEBUG: the first samples' raw values, before any clamping.
  if (ok && options_.debug && !d.dbg.first_samples.empty() &&
      d.dbg.first_samples.back().values.empty() && d.dbg.first_samples.size() <= kDebugSamples &&
      d.dbg_last_index == i) {
    d.dbg.first_samples.back().values = d.values;
  }
  return ok;
}

// GPUACCT_COUNTERS_DEBUG: the first samples' raw times, with the decode call's time.
void CounterSampler::keep_debug_sample(Device& d, size_t i, uint64_t start, uint64_t end,
                                       uint64_t decode_before, uint64_t decode_after) {
  if (!options_.debug || d.dbg.first_samples.size() >= kDebugSamples) return;
  CounterDebug::Sample s;
  s.start = start;
  s.end = end;
  s.decode_before = decode_before;
  s.decode_after = decode_after;
  d.dbg.first_samples.push_back(std::move(s));
  d.dbg_last_index = i;
}

void CounterSampler::stop() {
  stopped_ = true;
  for (const auto& d : devices_) {
    if (d->state != CounterState::kActive || d->stopped) continue;
    GPUACCT_PARAMS(CUpti_PmSampling_Stop_Params, st);
    st.pPmSamplingObject = d->sampler;
    GPUACCT_CUPTI_CALL(api_, cuptiPmSamplingStop, &st);
    d->stopped = true;
    d->stopped_at = cupti_now();
    d->dbg.stop_at = d->stopped_at;
  }
  // No cuptiPmSamplingDisable / host deinitialisation: the process is ending, and disabling
  // has been seen to tear more of CUPTI down than the sampler (docs/counters.md).
}

int64_t CounterSampler::decoded_until(int64_t clock_offset_ns) const {
  int64_t until = kNothingDecoded;
  for (const auto& d : devices_) {
    if (d->state != CounterState::kActive || d->drained) continue;
    // On CUPTI's clock: the last decoded sample's end, or the start before any sample.
    const int64_t cupti_until = d->timed ? static_cast<int64_t>(d->last_end) - clock_offset(*d)
                                         : static_cast<int64_t>(d->started_at);
    until = std::min(until, cupti_until - clock_offset_ns);
  }
  return until;
}

bool CounterSampler::any_active() const {
  for (const auto& d : devices_) {
    if (d->state == CounterState::kActive) return true;
  }
  return false;
}

std::vector<CounterDeviceStatus> CounterSampler::status() const {
  std::vector<CounterDeviceStatus> all;
  for (const auto& d : devices_) {
    CounterDeviceStatus s;
    s.device = d->index;
    s.state = d->state;
    s.chip = d->chip;
    s.line = d->line;
    s.samples = d->samples;
    s.first_sample_lag_ns = d->first_sample_lag_ns;
    if (d->state == CounterState::kActive || d->stopped) {
      const uint64_t interval_ns = uint64_t{options_.interval_us} * 1000;
      const uint64_t until = d->stopped ? d->stopped_at : d->last_decode_at;
      s.samples_due =
          until > d->started_at ? static_cast<int64_t>((until - d->started_at) / interval_ns) : 0;
      s.samples_before_start = d->before_start;
      s.trigger = d->dbg.trigger_mode;
      s.interval_set = d->dbg.sampling_interval;
    }
    if (d->clock[0] != '\0') {
      s.clock = d->clock;
      s.clock_offset_ns = clock_offset(*d);
    }
    if (d->durations.size() >= 3) {
      std::vector<int64_t> sorted = d->durations;
      std::sort(sorted.begin(), sorted.end());
      s.interval_seen_ns = sorted[sorted.size() / 2];
    }
    if (options_.debug && d->started_at != 0) {
      s.debug = d->dbg;
      s.debug->offset_low = d->offset_low;
      s.debug->offset_high = d->offset_high;
    }
    for (size_t m = 0; m < d->names.size(); ++m) {
      for (const RoleCandidates& rc : candidates()) {
        if (rc.role == d->roles[m]) s.metrics.push_back(std::string(rc.key) + "=" + d->names[m]);
      }
    }
    all.push_back(std::move(s));
  }
  return all;
}

}  // namespace gpuacct::cupti
