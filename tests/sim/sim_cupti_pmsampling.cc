// Fake CUPTI PM sampling (cupti_pmsampling.h, cupti_profiler_host.h, cupti_profiler_target.h,
// cupti_target.h): the calls a PM sampling client makes, with the sim's planted counters
// (simPlantCounters) as what the hardware measured.  README.md, "Hardware counters".
//
// The model: a started device takes one sample per interval of the sim clock, on a grid of
// whole intervals (sample k covers [k*I, (k+1)*I), the first from the start, the last to the
// stop); each sample holds the planted quantities' time-weighted means over it.  A sample is
// in the hardware buffer once the sim clock passed its end (plus GPUACCT_SIM_PM_DECODE_LAG_NS);
// the buffer holds hardwareBufferSize / GPUACCT_SIM_PM_RECORD_BYTES samples and, in
// KEEP_LATEST mode, loses its oldest beyond that (overflow = 1).  Metric names are evaluated
// by this file's own table (not the library's): each name reads one planted quantity.
//
// From the headers (cupti_pmsampling.h, cupti_profiler_host.h) and NVIDIA's pm_sampling sample:
// the call order (cuptiProfilerInitialize before the target calls), Enable twice is
// INVALID_OPERATION, a multi-pass config is NOT_SUPPORTED at SetConfig, KEEP_OLDEST overflow is
// CUPTI_ERROR_OUT_OF_MEMORY at decode, COUNTER_DATA_FULL / END_OF_RECORDS, the trigger modes'
// units (GPU_TIME_INTERVAL: samplingInterval in nanoseconds; GPU_SYSCLK_INTERVAL: in SYS clock
// cycles), and no promise about the clock of the sample timestamps ("Start time of the sample"
// only; CUPTI converts GPU timestamps onto its own clock for activity records alone).  So by
// default the samples here are NOT on the activity records' clock: they are on a GPU timer
// GPUACCT_SIM_PM_CLOCK_OFFSET_NS off it (default -743097609: what the H200's first sample
// showed against cuptiGetTimestamp on 2026-12-04), and a client must measure the offset as a
// real one must.  Assumed beyond the headers (docs/counters.md, "What only a GPU can
// confirm"): overflow = 1 under KEEP_LATEST (the header documents the flag for KEEP_OLDEST),
// samples back to back on a grid while the GPU idles, every populated sample completed at a
// decode (numPopulatedSamples == numCompletedSamples), no limit on hardwareBufferSize, and
// which metric names a chip takes for PM sampling.
//
// Knobs (read at cuptiPmSamplingEnable / SetConfig / cuptiDeviceGetChipName):
//   GPUACCT_SIM_PM_CHIP          chip name (default gh100; ga102 has the hmma tensor metric
//                                instead of the realtime one)
//   GPUACCT_SIM_PM_REFUSE        unsupported | privileges | busy, optionally :DEVICE (only
//                                that device refuses)
//   GPUACCT_SIM_PM_DECODE_LAG_NS samples reach the buffer this long after their end
//   GPUACCT_SIM_PM_RECORD_BYTES  hardware buffer bytes per sample (default 1024)
//   GPUACCT_SIM_PM_CLOCK_OFFSET_NS  the samples' clock minus CUPTI's (signed; default
//                                -743097609; 0: the activity records' clock)
//   GPUACCT_SIM_PM_SYSCLK_HZ     the SYS clock the GPU_SYSCLK_INTERVAL trigger counts (default
//                                1600000000, planted: the header says only that it varies)
//   GPUACCT_SIM_PM_TIME_UNIT_NS  what one unit of the time trigger's interval lasts (default 1,
//                                the header's nanosecond; another value models a GPU that reads
//                                it otherwise, for the library's interval check)
//   GPUACCT_SIM_PM_ENABLE_NS     how long before its return cuptiPmSamplingEnable began
//                                (default 0; the sim clock is not moved)
//   GPUACCT_SIM_PM_FIRST_SAMPLE_FROM  start (default: the first sample begins at
//                                cuptiPmSamplingStart) or enable (it begins at
//                                cuptiPmSamplingEnable and holds counts from the start only, its
//                                values diluted over its whole length)
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sim_cupti_state.h"

using namespace sim_cupti;  // NOLINT(build/namespaces): this library's own internals

namespace {

constexpr uint32_t kImageMagic = 0x53504d31;  // "SPM1"
constexpr char kConfigMagic[] = "SIMPMCFG";

// The fake's metric table: name -> planted quantity, per chip family.
int QuantityOf(const std::string& chip, const std::string& name) {
  const bool ampere = chip.rfind("ga", 0) == 0 || chip.rfind("ad", 0) == 0;
  if (name == "sm__cycles_active.avg.pct_of_peak_sustained_elapsed") return SIM_COUNTER_SM_ACTIVE;
  if (!ampere && name == "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed")
    return SIM_COUNTER_TENSOR_ACTIVE;
  if (ampere && name == "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed")
    return SIM_COUNTER_TENSOR_ACTIVE;
  // The DRAM controller metric Nsight Compute samples on H100 (HBM); GA10x / Ada have the
  // dram__ one only here, so the library's fallback is exercised with GPUACCT_SIM_PM_CHIP=ga102.
  if (!ampere && name == "dramc__throughput.avg.pct_of_peak_sustained_elapsed")
    return SIM_COUNTER_DRAM;
  if (name == "dram__throughput.avg.pct_of_peak_sustained_elapsed") return SIM_COUNTER_DRAM;
  if (name == "sm__throughput.avg.pct_of_peak_sustained_elapsed") return SIM_COUNTER_SM_THROUGHPUT;
  if (name == "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    return SIM_COUNTER_MEMORY_THROUGHPUT;
  // Documented PM sampling metrics (Nsight Systems' GPU metrics), the library's second choices.
  if (name == "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed")
    return SIM_COUNTER_SM_THROUGHPUT;
  if (name == "lts__throughput.avg.pct_of_peak_sustained_elapsed")
    return SIM_COUNTER_MEMORY_THROUGHPUT;
  return -1;
}

constexpr size_t kMaxMetricsPerPass = 6;

struct HostObject {
  std::string chip;
  std::vector<std::string> metrics;
};

struct Sample {
  uint64_t start;
  uint64_t end;
  double q[SIM_COUNTER_COUNT];
};

struct ImageHeader {
  uint32_t magic;
  uint32_t max_samples;
  uint32_t count;
  uint32_t device;
};

struct Device {
  int index = 0;
  std::string chip;
  std::vector<std::string> metrics;
  uint64_t interval = 0;
  size_t capacity = 0;  // samples the hardware buffer holds
  bool keep_latest = true;
  bool started = false;
  bool stopped = false;
  uint64_t next_begin = 0;  // sim time: the start of the next sample not yet decoded
  uint64_t stop_at = 0;
  uint64_t enabled_at = 0;  // sim time of cuptiPmSamplingEnable
  uint64_t started_at = 0;  // ... of cuptiPmSamplingStart
  bool first_from_enable = false;
  bool first_decoded = false;
};

struct PmState {
  std::mutex mu;
  std::map<int, Device> devices;
  // cuptiProfilerInitialize was called: NVIDIA's pm_sampling sample calls it before any target
  // call, and XLA's PM sampler names it required before them; the target calls here refuse
  // without it (CUPTI_ERROR_NOT_INITIALIZED), so a client that skips it fails in the sim too.
  std::atomic<bool> profiler_initialized{false};
  std::atomic<uint64_t> settled{0};  // devices a client started or was refused on (a bit each)
};

PmState& PM() {
  static PmState* s = new PmState();
  return *s;
}

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}

// GPUACCT_SIM_PM_REFUSE for `device`: "" when it does not refuse.
std::string Refusal(int device) {
  const char* v = std::getenv("GPUACCT_SIM_PM_REFUSE");
  if (v == nullptr || *v == '\0') return "";
  std::string spec(v);
  const size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    if (std::atoi(spec.c_str() + colon + 1) != device) return "";
    spec.resize(colon);
  }
  return spec;
}

std::string Chip(int device) {
  if (Refusal(device) == "unsupported") return "tu102";
  const char* v = std::getenv("GPUACCT_SIM_PM_CHIP");
  return v != nullptr && *v != '\0' ? v : "gh100";
}

uint64_t CuptiTime(uint64_t sim_ns) {
  return static_cast<uint64_t>(static_cast<int64_t>(sim_ns) + CuptiClockShift(S()));
}

int64_t EnvI64(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoll(v, nullptr, 10);
}

// A sample timestamp: on the GPU timer, GPUACCT_SIM_PM_CLOCK_OFFSET_NS off CUPTI's clock.
constexpr int64_t kH200FirstSampleLagNs = -743097609;
uint64_t SampleTime(uint64_t sim_ns) {
  return static_cast<uint64_t>(static_cast<int64_t>(CuptiTime(sim_ns)) +
                               EnvI64("GPUACCT_SIM_PM_CLOCK_OFFSET_NS", kH200FirstSampleLagNs));
}

Device* Find(CUpti_PmSampling_Object* obj) {
  auto& devs = PM().devices;
  for (auto& [index, d] : devs) {
    if (reinterpret_cast<CUpti_PmSampling_Object*>(&d) == obj) return &d;
  }
  return nullptr;
}

size_t ImageBytes(size_t max_samples) {
  return sizeof(ImageHeader) + max_samples * sizeof(Sample);
}

// A refusal or a start on `device`: the client's set-up is over there.
CUptiResult Settle(int device, CUptiResult r) {
  if (device >= 0 && device < 64) PM().settled.fetch_or(uint64_t{1} << device);
  return r;
}

}  // namespace

void sim_cupti::ResetPmSampling() {
  std::lock_guard<std::mutex> lock(PM().mu);
  PM().devices.clear();
  PM().settled.store(0);
  PM().profiler_initialized.store(false);
}

// For scenario programs (dlsym): 1 once a client started PM sampling on `device` or was
// refused there, so a scenario can wait for its profiler's set-up before its first step.
CUPTI_EXPORT int simPmSamplingSettled(int device) {
  return device >= 0 && device < 64 && (PM().settled.load() >> device & 1) != 0 ? 1 : 0;
}

CUPTI_EXPORT CUptiResult cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  PM().profiler_initialized.store(true);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params* p) {
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  PM().profiler_initialized.store(false);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr || static_cast<int>(p->deviceIndex) >= simNumDevices()) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (!PM().profiler_initialized.load()) return CUPTI_ERROR_NOT_INITIALIZED;
  static std::mutex mu;
  static std::map<size_t, std::string>* names = new std::map<size_t, std::string>();
  std::lock_guard<std::mutex> lock(mu);
  (*names)[p->deviceIndex] = Chip(static_cast<int>(p->deviceIndex));
  p->pChipName = (*names)[p->deviceIndex].c_str();
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr || static_cast<int>(p->deviceIndex) >= simNumDevices()) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (!PM().profiler_initialized.load()) return CUPTI_ERROR_NOT_INITIALIZED;
  if (Refusal(static_cast<int>(p->deviceIndex)) == "unsupported") {
    return Settle(static_cast<int>(p->deviceIndex), CUPTI_ERROR_NOT_SUPPORTED);
  }
  if (p->pCounterAvailabilityImage == nullptr) {
    p->counterAvailabilityImageSize = 16;
    return CUPTI_SUCCESS;
  }
  if (p->counterAvailabilityImageSize < 16) return CUPTI_ERROR_INVALID_PARAMETER;
  std::memcpy(p->pCounterAvailabilityImage, "SIMAVAILABLE....", 16);
  return CUPTI_SUCCESS;
}

// ---- host side --------------------------------------------------------------------------------

CUPTI_EXPORT CUptiResult cuptiProfilerHostInitialize(CUpti_Profiler_Host_Initialize_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr || p->pChipName == nullptr ||
      p->profilerType != CUPTI_PROFILER_TYPE_PM_SAMPLING) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  auto* h = new HostObject();
  h->chip = p->pChipName;
  p->pHostObject = reinterpret_cast<CUpti_Profiler_Host_Object*>(h);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiProfilerHostDeinitialize(CUpti_Profiler_Host_Deinitialize_Params* p) {
  if (p == nullptr || p->pHostObject == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  delete reinterpret_cast<HostObject*>(p->pHostObject);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiProfilerHostConfigAddMetrics(CUpti_Profiler_Host_ConfigAddMetrics_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr || p->pHostObject == nullptr || p->ppMetricNames == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  auto* h = reinterpret_cast<HostObject*>(p->pHostObject);
  for (size_t i = 0; i < p->numMetrics; ++i) {
    if (QuantityOf(h->chip, p->ppMetricNames[i]) < 0) return CUPTI_ERROR_INVALID_METRIC_NAME;
  }
  for (size_t i = 0; i < p->numMetrics; ++i) h->metrics.emplace_back(p->ppMetricNames[i]);
  return CUPTI_SUCCESS;
}

namespace {
std::string ConfigText(const HostObject& h) {
  std::string t(kConfigMagic, sizeof kConfigMagic);
  for (const std::string& m : h.metrics) t += m + '\0';
  return t;
}
}  // namespace

CUPTI_EXPORT CUptiResult
cuptiProfilerHostGetConfigImageSize(CUpti_Profiler_Host_GetConfigImageSize_Params* p) {
  if (p == nullptr || p->pHostObject == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  p->configImageSize = ConfigText(*reinterpret_cast<HostObject*>(p->pHostObject)).size();
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiProfilerHostGetConfigImage(CUpti_Profiler_Host_GetConfigImage_Params* p) {
  if (p == nullptr || p->pHostObject == nullptr || p->pConfigImage == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  const std::string t = ConfigText(*reinterpret_cast<HostObject*>(p->pHostObject));
  if (p->configImageSize < t.size()) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
  std::memcpy(p->pConfigImage, t.data(), t.size());
  return CUPTI_SUCCESS;
}

namespace {
// The metric names of a config image; false when it is not one of ours.
bool ParseConfig(const uint8_t* image, size_t size, std::vector<std::string>* names) {
  if (image == nullptr || size < sizeof kConfigMagic ||
      std::memcmp(image, kConfigMagic, sizeof kConfigMagic) != 0) {
    return false;
  }
  names->clear();
  size_t at = sizeof kConfigMagic;
  while (at < size) {
    const char* s = reinterpret_cast<const char*>(image + at);
    const size_t n = strnlen(s, size - at);
    names->emplace_back(s, n);
    at += n + 1;
  }
  return true;
}
}  // namespace

CUPTI_EXPORT CUptiResult
cuptiProfilerHostGetNumOfPasses(CUpti_Profiler_Host_GetNumOfPasses_Params* p) {
  std::vector<std::string> names;
  if (p == nullptr || !ParseConfig(p->pConfigImage, p->configImageSize, &names)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  p->numOfPasses = names.empty() ? 0 : (names.size() + kMaxMetricsPerPass - 1) / kMaxMetricsPerPass;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiProfilerHostEvaluateToGpuValues(CUpti_Profiler_Host_EvaluateToGpuValues_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr || p->pHostObject == nullptr || p->pCounterDataImage == nullptr ||
      p->pMetricValues == nullptr || p->counterDataImageSize < sizeof(ImageHeader)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  ImageHeader hdr;
  std::memcpy(&hdr, p->pCounterDataImage, sizeof hdr);
  if (hdr.magic != kImageMagic || p->rangeIndex >= hdr.count) return CUPTI_ERROR_INVALID_PARAMETER;
  Sample s;
  std::memcpy(&s, p->pCounterDataImage + sizeof hdr + p->rangeIndex * sizeof(Sample), sizeof s);
  const auto* h = reinterpret_cast<const HostObject*>(p->pHostObject);
  for (size_t i = 0; i < p->numMetrics; ++i) {
    const int q = QuantityOf(h->chip, p->ppMetricNames[i]);
    if (q < 0) return CUPTI_ERROR_INVALID_METRIC_NAME;
    p->pMetricValues[i] = s.q[q];
  }
  return CUPTI_SUCCESS;
}

// ---- target side ------------------------------------------------------------------------------

CUPTI_EXPORT CUptiResult cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr || static_cast<int>(p->deviceIndex) >= simNumDevices()) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (!PM().profiler_initialized.load()) return CUPTI_ERROR_NOT_INITIALIZED;
  const int index = static_cast<int>(p->deviceIndex);
  const std::string refuse = Refusal(index);
  if (refuse == "unsupported") return Settle(index, CUPTI_ERROR_NOT_SUPPORTED);
  if (refuse == "privileges") return Settle(index, CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
  std::lock_guard<std::mutex> lock(PM().mu);
  if (PM().devices.count(index) != 0) return CUPTI_ERROR_INVALID_OPERATION;  // enabled twice
  // The call began GPUACCT_SIM_PM_ENABLE_NS before it returned (the sim clock does not move
  // for the library's worker; moving it would move the program's steps).
  const uint64_t returned = simNow();
  const uint64_t takes = std::min(returned, EnvU64("GPUACCT_SIM_PM_ENABLE_NS", 0));
  Device& d = PM().devices[index];
  d.index = index;
  d.chip = Chip(index);
  d.enabled_at = returned - takes;
  const char* from = std::getenv("GPUACCT_SIM_PM_FIRST_SAMPLE_FROM");
  d.first_from_enable = from != nullptr && std::strcmp(from, "enable") == 0;
  p->pPmSamplingObject = reinterpret_cast<CUpti_PmSampling_Object*>(&d);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiPmSamplingDisable(CUpti_PmSampling_Disable_Params* p) {
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(PM().mu);
  Device* d = Find(p->pPmSamplingObject);
  if (d == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  PM().devices.erase(d->index);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiPmSamplingSetConfig(CUpti_PmSampling_SetConfig_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(PM().mu);
  Device* d = Find(p->pPmSamplingObject);
  std::vector<std::string> names;
  if (d == nullptr || d->started || !ParseConfig(p->pConfig, p->configSize, &names) ||
      names.empty() || p->samplingInterval == 0 ||
      (p->triggerMode != CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL &&
       p->triggerMode != CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  // cupti_pmsampling.h: NOT_SUPPORTED "for config image which require multiple passes".
  if (names.size() > kMaxMetricsPerPass) return CUPTI_ERROR_NOT_SUPPORTED;
  d->metrics = names;
  // The interval's unit by trigger mode (cupti_pmsampling.h, samplingInterval): SYS clock
  // cycles, or nanoseconds (times GPUACCT_SIM_PM_TIME_UNIT_NS, 1 as the header says).
  if (p->triggerMode == CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL) {
    const double hz = static_cast<double>(EnvU64("GPUACCT_SIM_PM_SYSCLK_HZ", 1600000000));
    d->interval =
        static_cast<uint64_t>(static_cast<double>(p->samplingInterval) * 1e9 / std::max(1.0, hz));
  } else {
    d->interval =
        p->samplingInterval * std::max<uint64_t>(1, EnvU64("GPUACCT_SIM_PM_TIME_UNIT_NS", 1));
  }
  if (d->interval == 0) d->interval = 1;
  d->capacity =
      p->hardwareBufferSize / std::max<uint64_t>(1, EnvU64("GPUACCT_SIM_PM_RECORD_BYTES", 1024));
  d->keep_latest =
      p->hwBufferAppendMode == CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiPmSamplingStart(CUpti_PmSampling_Start_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(PM().mu);
  Device* d = Find(p->pPmSamplingObject);
  if (d == nullptr || d->interval == 0 || d->started) return CUPTI_ERROR_INVALID_OPERATION;
  if (Refusal(d->index) == "busy") return Settle(d->index, CUPTI_ERROR_HARDWARE_BUSY);
  d->started = true;
  d->started_at = simNow();
  d->next_begin = d->started_at;
  return Settle(d->index, CUPTI_SUCCESS);
}

CUPTI_EXPORT CUptiResult cuptiPmSamplingStop(CUpti_PmSampling_Stop_Params* p) {
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(PM().mu);
  Device* d = Find(p->pPmSamplingObject);
  if (d == nullptr || !d->started || d->stopped) return CUPTI_ERROR_INVALID_OPERATION;
  d->stopped = true;
  d->stop_at = simNow();
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiPmSamplingGetCounterDataSize(CUpti_PmSampling_GetCounterDataSize_Params* p) {
  if (p == nullptr || p->maxSamples == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(PM().mu);
  if (Find(p->pPmSamplingObject) == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  p->counterDataSize = ImageBytes(p->maxSamples);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiPmSamplingCounterDataImageInitialize(CUpti_PmSampling_CounterDataImage_Initialize_Params* p) {
  if (p == nullptr || p->pCounterData == nullptr || p->counterDataSize < ImageBytes(1)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  std::lock_guard<std::mutex> lock(PM().mu);
  Device* d = Find(p->pPmSamplingObject);
  if (d == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const ImageHeader hdr{
      kImageMagic,
      static_cast<uint32_t>((p->counterDataSize - sizeof(ImageHeader)) / sizeof(Sample)), 0,
      static_cast<uint32_t>(d->index)};
  std::memset(p->pCounterData, 0, p->counterDataSize);
  std::memcpy(p->pCounterData, &hdr, sizeof hdr);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiPmSamplingDecodeData(CUpti_PmSampling_DecodeData_Params* p) {
  SIM_FAULT_POINT();
  if (p == nullptr || p->pCounterDataImage == nullptr ||
      p->counterDataImageSize < sizeof(ImageHeader)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  std::lock_guard<std::mutex> lock(PM().mu);
  Device* d = Find(p->pPmSamplingObject);
  ImageHeader hdr;
  std::memcpy(&hdr, p->pCounterDataImage, sizeof hdr);
  if (d == nullptr || !d->started || hdr.magic != kImageMagic) return CUPTI_ERROR_INVALID_OPERATION;
  // Complete samples: ended (by the lag) before now, or cut by the stop.
  const uint64_t lag = EnvU64("GPUACCT_SIM_PM_DECODE_LAG_NS", 0);
  const uint64_t now = simNow();
  const uint64_t horizon = d->stopped ? d->stop_at : (now > lag ? now - lag : 0);
  auto sample_end = [&](uint64_t begin) {
    const uint64_t grid_end = (begin / d->interval + 1) * d->interval;
    return d->stopped ? std::min(grid_end, d->stop_at) : grid_end;
  };
  // The hardware buffer: what is complete and not decoded; beyond its capacity the oldest are
  // gone (KEEP_LATEST) -- skipped here, so the client sees a gap.
  p->overflow = 0;
  size_t waiting = 0;
  for (uint64_t b = d->next_begin; b < horizon && sample_end(b) <= horizon; b = sample_end(b)) {
    ++waiting;
  }
  while (d->capacity > 0 && waiting > d->capacity) {
    d->next_begin = sample_end(d->next_begin);
    --waiting;
    p->overflow = 1;
  }
  if (p->overflow != 0 && !d->keep_latest) return CUPTI_ERROR_OUT_OF_MEMORY;
  while (hdr.count < hdr.max_samples && d->next_begin < horizon &&
         sample_end(d->next_begin) <= horizon) {
    Sample s;
    const uint64_t begin = d->next_begin;
    const uint64_t end = sample_end(begin);
    simCounterMean(d->index, begin, end, s.q);
    s.start = SampleTime(begin);
    s.end = SampleTime(end);
    if (!d->first_decoded && d->first_from_enable && d->enabled_at < begin) {
      // Open since the enable: counted from the start only, over its whole length.
      const double counted = static_cast<double>(end - begin);
      const double whole = static_cast<double>(end - d->enabled_at);
      for (double& q : s.q) q *= counted / whole;
      s.start = SampleTime(d->enabled_at);
    }
    d->first_decoded = true;
    std::memcpy(p->pCounterDataImage + sizeof hdr + hdr.count * sizeof(Sample), &s, sizeof s);
    ++hdr.count;
    d->next_begin = end;
  }
  const bool more = d->next_begin < horizon && sample_end(d->next_begin) <= horizon;
  p->decodeStopReason = more ? CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL
                             : CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
  std::memcpy(p->pCounterDataImage, &hdr, sizeof hdr);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiPmSamplingGetCounterDataInfo(CUpti_PmSampling_GetCounterDataInfo_Params* p) {
  if (p == nullptr || p->pCounterDataImage == nullptr ||
      p->counterDataImageSize < sizeof(ImageHeader)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  ImageHeader hdr;
  std::memcpy(&hdr, p->pCounterDataImage, sizeof hdr);
  if (hdr.magic != kImageMagic) return CUPTI_ERROR_INVALID_PARAMETER;
  p->numTotalSamples = hdr.max_samples;
  p->numPopulatedSamples = hdr.count;
  p->numCompletedSamples = hdr.count;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiPmSamplingCounterDataGetSampleInfo(CUpti_PmSampling_CounterData_GetSampleInfo_Params* p) {
  if (p == nullptr || p->pCounterDataImage == nullptr ||
      p->counterDataImageSize < sizeof(ImageHeader)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  ImageHeader hdr;
  std::memcpy(&hdr, p->pCounterDataImage, sizeof hdr);
  if (hdr.magic != kImageMagic || p->sampleIndex >= hdr.count) return CUPTI_ERROR_INVALID_PARAMETER;
  Sample s;
  std::memcpy(&s, p->pCounterDataImage + sizeof hdr + p->sampleIndex * sizeof(Sample), sizeof s);
  p->startTimestamp = s.start;
  p->endTimestamp = s.end;
  return CUPTI_SUCCESS;
}
