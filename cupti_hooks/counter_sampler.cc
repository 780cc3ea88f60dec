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
  uint64_t last_end = 0;             // CUPTI clock: the end of the last sample decoded
  // cuptiGetTimestamp when a decode last emptied the hardware buffer (or sampling started),
  // and at the stop: what a decode that keeps failing loses lies between them and now.
  uint64_t emptied_at = 0;
  uint64_t stopped_at = 0;
  uint64_t started_at = 0;  // cuptiGetTimestamp at the start
  std::optional<int64_t> first_sample_lag_ns;
  std::string clock_warning;  // to be said by the decode that found it
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
  r = api_.cuptiPmSamplingEnable(&en);
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiPmSamplingEnable");
  d.sampler = en.pPmSamplingObject;

  GPUACCT_PARAMS(CUpti_PmSampling_SetConfig_Params, sc);
  sc.pPmSamplingObject = d.sampler;
  sc.configSize = d.config.size();
  sc.pConfig = d.config.data();
  sc.hardwareBufferSize = options_.hardware_buffer_bytes;
  sc.samplingInterval = uint64_t{options_.interval_us} * 1000;
  sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  // Keep the latest: a buffer that fills (a stalled worker) loses its oldest samples, which the
  // gap in the sample times then counts, and sampling never stops in a days-long run.
  sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
  r = api_.cuptiPmSamplingSetConfig(&sc);
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiPmSamplingSetConfig");

  // Room for 4 decode periods of samples per decode call (more are decoded in a loop).
  const uint64_t per_period =
      uint64_t{options_.decode_period_ms} * 1000 / std::max<uint32_t>(1, options_.interval_us);
  GPUACCT_PARAMS(CUpti_PmSampling_GetCounterDataSize_Params, ds);
  ds.pPmSamplingObject = d.sampler;
  ds.pMetricNames = d.c_names.data();
  ds.numMetrics = d.c_names.size();
  ds.maxSamples = static_cast<uint32_t>(std::clamp<uint64_t>(4 * per_period, 256, 100000));
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
  if (r != CUPTI_SUCCESS) return refuse(r, "cuptiPmSamplingStart");
  d.last_end = now;  // nothing before the start is owed
  d.emptied_at = now;
  d.started_at = now;
  d.values.assign(d.names.size(), 0.0);
  d.state = CounterState::kActive;
  return "";
}

// The attribution moves sample times by the activity records' offset, which is right only if
// they are on CUPTI's clock -- not documented (docs/counters.md).  The first sample begins at
// the start, so its distance from cuptiGetTimestamp then shows which clock it is on.
void CounterSampler::note_first_sample(Device& d, uint64_t start) {
  const int64_t lag = static_cast<int64_t>(start) - static_cast<int64_t>(d.started_at);
  d.first_sample_lag_ns = lag;
  if (lag > -kClockMismatchNs && lag < kClockMismatchNs) return;
  // The numbers before the colon: the pipeline says one line per text after it.
  d.clock_warning = "hardware counters on device " + std::to_string(d.index) + " (first sample " +
                    std::to_string(lag / 1'000'000) +
                    " ms from cuptiGetTimestamp at the start): sample times are not on CUPTI's "
                    "activity clock, so counters land beside their steps; report this line "
                    "with the CUDA version";
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
      if (!d->clock_warning.empty()) to_say.push_back(std::move(d->clock_warning));
      d->clock_warning.clear();
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
  // lost: the last sample's end says where decoding stopped, once its clock is known to be
  // cuptiGetTimestamp's.
  uint64_t from = d.emptied_at;
  if (d.first_sample_lag_ns && *d.first_sample_lag_ns > -kClockMismatchNs &&
      *d.first_sample_lag_ns < kClockMismatchNs) {
    from = std::max(from, d.last_end);
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
  for (int round = 0; round < 16; ++round) {
    GPUACCT_PARAMS(CUpti_PmSampling_DecodeData_Params, dec);
    dec.pPmSamplingObject = d.sampler;
    dec.pCounterDataImage = d.image.data();
    dec.counterDataImageSize = d.image.size();
    // CUPTI_ERROR_OUT_OF_MEMORY: the hardware buffer overflowed (KEEP_OLDEST semantics).
    const CUptiResult r = GPUACCT_CUPTI_CALL(api_, cuptiPmSamplingDecodeData, &dec);
    if (r != CUPTI_SUCCESS) {
      decode_failed(
          d, std::string(api_.result_string(r)) + " (" + std::to_string(static_cast<int>(r)) + ")",
          stats);
      return;
    }
    d.decode_failures = 0;
    GPUACCT_PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params, info);
    info.pCounterDataImage = d.image.data();
    info.counterDataImageSize = d.image.size();
    size_t completed = 0;
    if (api_.cuptiPmSamplingGetCounterDataInfo(&info) == CUPTI_SUCCESS) {
      completed = info.numCompletedSamples;
    }
    int64_t gap_lost = 0;
    for (size_t i = 0; i < completed; ++i) {
      GPUACCT_PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params, si);
      si.pPmSamplingObject = d.sampler;
      si.pCounterDataImage = d.image.data();
      si.counterDataImageSize = d.image.size();
      si.sampleIndex = i;
      GPUACCT_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params, ev);
      ev.pHostObject = d.host;
      ev.pCounterDataImage = d.image.data();
      ev.counterDataImageSize = d.image.size();
      ev.rangeIndex = i;
      ev.ppMetricNames = d.c_names.data();
      ev.numMetrics = d.c_names.size();
      ev.pMetricValues = d.values.data();
      // A sample that cannot be used is lost once: its time moves last_end on (taken to be
      // the next interval when unknown), so the next sample does not count it again as a hole.
      if (api_.cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS ||
          si.endTimestamp <= si.startTimestamp) {
        stats.add(Stat::counter_samples_lost, 1);
        d.last_end += interval_ns;
        d.timed = true;
        continue;
      }
      // Samples follow one another; a hole of whole intervals is samples the buffer lost.  The
      // first sample may begin a little after the start: a hole before it counts only when
      // CUPTI says the buffer overflowed.
      if (si.startTimestamp > d.last_end + interval_ns / 2 && (d.timed || dec.overflow)) {
        gap_lost +=
            static_cast<int64_t>((si.startTimestamp - d.last_end + interval_ns / 2) / interval_ns);
      }
      if (!d.timed) note_first_sample(d, si.startTimestamp);
      d.last_end = std::max(d.last_end, si.endTimestamp);
      d.timed = true;
      if (GPUACCT_CUPTI_CALL(api_, cuptiProfilerHostEvaluateToGpuValues, &ev) != CUPTI_SUCCESS) {
        stats.add(Stat::counter_samples_lost, 1);
        continue;
      }
      CounterSample s;
      s.device = d.index;
      s.start = static_cast<int64_t>(si.startTimestamp) - clock_offset_ns;
      s.end = static_cast<int64_t>(si.endTimestamp) - clock_offset_ns;
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

void CounterSampler::stop() {
  stopped_ = true;
  for (const auto& d : devices_) {
    if (d->state != CounterState::kActive || d->stopped) continue;
    GPUACCT_PARAMS(CUpti_PmSampling_Stop_Params, st);
    st.pPmSamplingObject = d->sampler;
    GPUACCT_CUPTI_CALL(api_, cuptiPmSamplingStop, &st);
    d->stopped = true;
    d->stopped_at = cupti_now();
  }
  // No cuptiPmSamplingDisable / host deinitialisation: the process is ending, and disabling
  // has been seen to tear more of CUPTI down than the sampler (docs/counters.md).
}

int64_t CounterSampler::decoded_until(int64_t clock_offset_ns) const {
  int64_t until = kNothingDecoded;
  for (const auto& d : devices_) {
    if (d->state != CounterState::kActive || d->drained) continue;
    until = std::min(until, static_cast<int64_t>(d->last_end) - clock_offset_ns);
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
