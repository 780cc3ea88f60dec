// Self-tests of the fake CUPTI's PM sampling (sim_cupti_pmsampling.cc): planted counters come
// back per sample on the grid of whole intervals, evaluated by metric name; the decode lag, the
// hardware buffer's overflow, the chip's metric table and the refusals.
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim_cuda.h"
#include "sim_test_client.h"

namespace sim_test {
namespace {

constexpr uint64_t kMs = 1000 * kUs;
const char* kSm = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";
const char* kTensor = "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed";
const char* kHmma = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed";
const char* kDram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";

struct Pm {
#define SIM_PM_FN(name) \
  decltype(&::name) name = reinterpret_cast<decltype(&::name)>(dlsym(C().handle, #name))
  SIM_PM_FN(cuptiProfilerInitialize);
  SIM_PM_FN(cuptiDeviceGetChipName);
  SIM_PM_FN(cuptiPmSamplingGetCounterAvailability);
  SIM_PM_FN(cuptiProfilerHostInitialize);
  SIM_PM_FN(cuptiProfilerHostDeinitialize);
  SIM_PM_FN(cuptiProfilerHostConfigAddMetrics);
  SIM_PM_FN(cuptiProfilerHostGetConfigImageSize);
  SIM_PM_FN(cuptiProfilerHostGetConfigImage);
  SIM_PM_FN(cuptiProfilerHostGetNumOfPasses);
  SIM_PM_FN(cuptiProfilerHostEvaluateToGpuValues);
  SIM_PM_FN(cuptiPmSamplingEnable);
  SIM_PM_FN(cuptiPmSamplingSetConfig);
  SIM_PM_FN(cuptiPmSamplingStart);
  SIM_PM_FN(cuptiPmSamplingStop);
  SIM_PM_FN(cuptiPmSamplingGetCounterDataSize);
  SIM_PM_FN(cuptiPmSamplingCounterDataImageInitialize);
  SIM_PM_FN(cuptiPmSamplingDecodeData);
  SIM_PM_FN(cuptiPmSamplingGetCounterDataInfo);
  SIM_PM_FN(cuptiPmSamplingCounterDataGetSampleInfo);
#undef SIM_PM_FN
};

template <typename T>
T Params(size_t size) {
  T p;
  std::memset(&p, 0, sizeof p);
  p.structSize = size;
  return p;
}
#define SIM_PARAMS(type) Params<type>(type##_STRUCT_SIZE)

struct Got {
  uint64_t start, end;
  std::vector<double> values;
};

// A client of one device: host object with `metrics`, sampling set up (not started).
class PmClient {
 public:
  PmClient(int device, std::vector<const char*> metrics, size_t hw_bytes = 64 << 20,
           uint32_t max_samples = 1000,
           CUpti_PmSampling_TriggerMode mode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
           uint64_t interval = kMs)
      : metrics_(std::move(metrics)) {
    auto init = SIM_PARAMS(CUpti_Profiler_Initialize_Params);
    EXPECT_EQ(pm_.cuptiProfilerInitialize(&init), CUPTI_SUCCESS);
    auto chip = SIM_PARAMS(CUpti_Device_GetChipName_Params);
    chip.deviceIndex = static_cast<size_t>(device);
    EXPECT_EQ(pm_.cuptiDeviceGetChipName(&chip), CUPTI_SUCCESS);
    chip_ = chip.pChipName;
    auto host = SIM_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    host.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    host.pChipName = chip_.c_str();
    EXPECT_EQ(pm_.cuptiProfilerHostInitialize(&host), CUPTI_SUCCESS);
    host_ = host.pHostObject;
    auto add = SIM_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = host_;
    add.ppMetricNames = metrics_.data();
    add.numMetrics = metrics_.size();
    add_result = pm_.cuptiProfilerHostConfigAddMetrics(&add);
    if (add_result != CUPTI_SUCCESS) return;
    auto size = SIM_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    size.pHostObject = host_;
    EXPECT_EQ(pm_.cuptiProfilerHostGetConfigImageSize(&size), CUPTI_SUCCESS);
    config_.resize(size.configImageSize);
    auto image = SIM_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    image.pHostObject = host_;
    image.configImageSize = config_.size();
    image.pConfigImage = config_.data();
    EXPECT_EQ(pm_.cuptiProfilerHostGetConfigImage(&image), CUPTI_SUCCESS);
    auto en = SIM_PARAMS(CUpti_PmSampling_Enable_Params);
    en.deviceIndex = static_cast<size_t>(device);
    enable_result = pm_.cuptiPmSamplingEnable(&en);
    if (enable_result != CUPTI_SUCCESS) return;
    obj_ = en.pPmSamplingObject;
    auto sc = SIM_PARAMS(CUpti_PmSampling_SetConfig_Params);
    sc.pPmSamplingObject = obj_;
    sc.configSize = config_.size();
    sc.pConfig = config_.data();
    sc.hardwareBufferSize = hw_bytes;
    sc.samplingInterval = interval;
    sc.triggerMode = mode;
    sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
    EXPECT_EQ(pm_.cuptiPmSamplingSetConfig(&sc), CUPTI_SUCCESS);
    auto ds = SIM_PARAMS(CUpti_PmSampling_GetCounterDataSize_Params);
    ds.pPmSamplingObject = obj_;
    ds.pMetricNames = metrics_.data();
    ds.numMetrics = metrics_.size();
    ds.maxSamples = max_samples;
    EXPECT_EQ(pm_.cuptiPmSamplingGetCounterDataSize(&ds), CUPTI_SUCCESS);
    data_.resize(ds.counterDataSize);
    auto ci = SIM_PARAMS(CUpti_PmSampling_CounterDataImage_Initialize_Params);
    ci.pPmSamplingObject = obj_;
    ci.counterDataSize = data_.size();
    ci.pCounterData = data_.data();
    EXPECT_EQ(pm_.cuptiPmSamplingCounterDataImageInitialize(&ci), CUPTI_SUCCESS);
    blank_ = data_;
  }
  ~PmClient() {
    auto fin = SIM_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
    fin.pHostObject = host_;
    pm_.cuptiProfilerHostDeinitialize(&fin);
  }
  CUptiResult Start() {
    auto st = SIM_PARAMS(CUpti_PmSampling_Start_Params);
    st.pPmSamplingObject = obj_;
    return pm_.cuptiPmSamplingStart(&st);
  }
  void Stop() {
    auto st = SIM_PARAMS(CUpti_PmSampling_Stop_Params);
    st.pPmSamplingObject = obj_;
    EXPECT_EQ(pm_.cuptiPmSamplingStop(&st), CUPTI_SUCCESS);
  }
  // One decode call: its samples, evaluated.
  std::vector<Got> Decode(uint8_t* overflow = nullptr, bool* full = nullptr) {
    data_ = blank_;
    auto dec = SIM_PARAMS(CUpti_PmSampling_DecodeData_Params);
    dec.pPmSamplingObject = obj_;
    dec.pCounterDataImage = data_.data();
    dec.counterDataImageSize = data_.size();
    EXPECT_EQ(pm_.cuptiPmSamplingDecodeData(&dec), CUPTI_SUCCESS);
    if (overflow != nullptr) *overflow = dec.overflow;
    if (full != nullptr)
      *full = dec.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
    auto info = SIM_PARAMS(CUpti_PmSampling_GetCounterDataInfo_Params);
    info.pCounterDataImage = data_.data();
    info.counterDataImageSize = data_.size();
    EXPECT_EQ(pm_.cuptiPmSamplingGetCounterDataInfo(&info), CUPTI_SUCCESS);
    std::vector<Got> out;
    for (size_t i = 0; i < info.numCompletedSamples; ++i) {
      auto si = SIM_PARAMS(CUpti_PmSampling_CounterData_GetSampleInfo_Params);
      si.pPmSamplingObject = obj_;
      si.pCounterDataImage = data_.data();
      si.counterDataImageSize = data_.size();
      si.sampleIndex = i;
      EXPECT_EQ(pm_.cuptiPmSamplingCounterDataGetSampleInfo(&si), CUPTI_SUCCESS);
      Got g{si.startTimestamp, si.endTimestamp, std::vector<double>(metrics_.size())};
      auto ev = SIM_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
      ev.pHostObject = host_;
      ev.pCounterDataImage = data_.data();
      ev.counterDataImageSize = data_.size();
      ev.rangeIndex = i;
      ev.ppMetricNames = metrics_.data();
      ev.numMetrics = metrics_.size();
      ev.pMetricValues = g.values.data();
      EXPECT_EQ(pm_.cuptiProfilerHostEvaluateToGpuValues(&ev), CUPTI_SUCCESS);
      out.push_back(g);
    }
    return out;
  }
  size_t Passes() {
    auto np = SIM_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
    np.configImageSize = config_.size();
    np.pConfigImage = config_.data();
    EXPECT_EQ(pm_.cuptiProfilerHostGetNumOfPasses(&np), CUPTI_SUCCESS);
    return np.numOfPasses;
  }

  CUptiResult add_result = CUPTI_ERROR_UNKNOWN;
  CUptiResult enable_result = CUPTI_ERROR_UNKNOWN;
  std::string chip_;

 private:
  Pm pm_;
  std::vector<const char*> metrics_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_PmSampling_Object* obj_ = nullptr;
  std::vector<uint8_t> config_, data_, blank_;
};

void Plant(int device, uint64_t begin, uint64_t end, double sm, double tensor, double dram) {
  const double v[SIM_COUNTER_COUNT] = {sm, tensor, dram, 0, 0};
  simPlantCounters(device, begin, end, v);
}

// The fake's sample clock minus CUPTI's (sim_cupti_pmsampling.cc, GPUACCT_SIM_PM_CLOCK_OFFSET_NS
// unset): sample times are on a GPU timer, not the activity records' clock.
constexpr int64_t kSampleClock = -743097609;
uint64_t OnSampleClock(uint64_t cupti) {
  return static_cast<uint64_t>(static_cast<int64_t>(cupti) + kSampleClock);
}

// The clock at the next whole millisecond (the grid), plus `plus`.
void HostWorkToGrid(uint64_t plus) {
  simHostWork(kMs - simNow() % kMs + plus);
}

TEST_F(SimTest, PmSamplesThePlantedValuesOnTheIntervalGrid) {
  setenv("GPUACCT_SIM_CUPTI_CLOCK", "offset:5000", 1);
  ResetAll();
  HostWorkToGrid(250 * kUs);  // start a quarter into an interval
  const uint64_t t0 = simNow();
  const uint64_t g0 = t0 - t0 % kMs;  // its interval
  Plant(0, g0, g0 + kMs, 40, 80, 10);
  Plant(0, g0 + kMs, g0 + kMs + kMs / 2, 20, 60, 30);  // half of the second interval
  Plant(1, g0, g0 + 3 * kMs, 99, 99, 99);              // another device: never mixed in
  PmClient c(0, {kSm, kTensor, kDram});
  ASSERT_EQ(c.enable_result, CUPTI_SUCCESS);
  ASSERT_EQ(c.Start(), CUPTI_SUCCESS);
  simHostWork(kMs);  // now inside the second interval: only the first sample is complete
  std::vector<Got> got = c.Decode();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].start, OnSampleClock(t0 + 5000));  // CUPTI's clock, then the GPU timer's
  EXPECT_EQ(got[0].end, OnSampleClock(g0 + kMs + 5000));
  EXPECT_EQ(got[0].values, (std::vector<double>{40, 80, 10}));
  simHostWork(2 * kMs);
  got = c.Decode();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].start, OnSampleClock(g0 + kMs + 5000));
  EXPECT_EQ(got[0].values, (std::vector<double>{10, 30, 15}));  // half planted, half 0
  EXPECT_EQ(got[1].values, (std::vector<double>{0, 0, 0}));
  // Stopped: the last sample is cut at the stop.
  simHostWork(300 * kUs);
  c.Stop();
  got = c.Decode();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].start, OnSampleClock(g0 + 3 * kMs + 5000));
  EXPECT_EQ(got[0].end, OnSampleClock(simNow() + 5000));
  EXPECT_TRUE(c.Decode().empty());
}

TEST_F(SimTest, PmDecodeLagAndAFullImage) {
  setenv("GPUACCT_SIM_PM_DECODE_LAG_NS", "2000000", 1);
  ResetAll();
  HostWorkToGrid(0);
  PmClient c(0, {kSm}, 64 << 20, /*max_samples=*/2);
  ASSERT_EQ(c.Start(), CUPTI_SUCCESS);
  simHostWork(3 * kMs);
  EXPECT_EQ(c.Decode().size(), 1u);  // 3 complete, 2 of them within the lag
  simHostWork(4 * kMs);
  bool full = false;
  EXPECT_EQ(c.Decode(nullptr, &full).size(), 2u);
  EXPECT_TRUE(full);
  EXPECT_EQ(c.Decode(nullptr, &full).size(), 2u);
  EXPECT_FALSE(full);
}

TEST_F(SimTest, PmHardwareBufferKeepsTheLatestAndSaysItOverflowed) {
  setenv("GPUACCT_SIM_PM_RECORD_BYTES", "1048576", 1);
  ResetAll();
  HostWorkToGrid(0);
  PmClient c(0, {kSm}, /*hw_bytes=*/4 << 20);  // room for 4 samples
  ASSERT_EQ(c.Start(), CUPTI_SUCCESS);
  simHostWork(10 * kMs);
  uint8_t overflow = 0;
  const std::vector<Got> got = c.Decode(&overflow);
  EXPECT_EQ(overflow, 1);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got.back().end - got.front().start, 4 * kMs);  // the latest four
  EXPECT_EQ(got.back().end, OnSampleClock(simNow()));
}

// The trigger modes' units (cupti_pmsampling.h, samplingInterval): GPU_SYSCLK_INTERVAL counts SYS
// clock cycles (GPUACCT_SIM_PM_SYSCLK_HZ, 1.6 GHz planted), GPU_TIME_INTERVAL nanoseconds.  A
// client that gives nanoseconds to the cycle trigger gets samples 1.6x shorter.
TEST_F(SimTest, PmTriggerModesCountCyclesOrNanoseconds) {
  setenv("GPUACCT_SIM_PM_CLOCK_OFFSET_NS", "0", 1);
  ResetAll();
  HostWorkToGrid(0);
  PmClient cycles(0, {kSm}, 64 << 20, 1000, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL,
                  /*cycles=*/1'600'000);
  ASSERT_EQ(cycles.Start(), CUPTI_SUCCESS);
  PmClient ns_as_cycles(1, {kSm}, 64 << 20, 1000,
                        CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL, /*"ns"=*/kMs);
  ASSERT_EQ(ns_as_cycles.Start(), CUPTI_SUCCESS);
  simHostWork(10 * kMs);
  std::vector<Got> a = cycles.Decode();
  ASSERT_EQ(a.size(), 10u);
  EXPECT_EQ(a[0].end - a[0].start, kMs);  // 1.6 M cycles at 1.6 GHz
  std::vector<Got> b = ns_as_cycles.Decode();
  ASSERT_GE(b.size(), 15u);
  EXPECT_EQ(b[1].end - b[1].start, 625 * kUs);
  // A GPU that read the time trigger's interval in other units (the library's interval check).
  setenv("GPUACCT_SIM_PM_TIME_UNIT_NS", "4", 1);
  ResetAll();
  HostWorkToGrid(0);
  PmClient slow(0, {kSm});
  ASSERT_EQ(slow.Start(), CUPTI_SUCCESS);
  simHostWork(12 * kMs);
  std::vector<Got> c = slow.Decode();  // the first may be cut: the 4 ms grid is not the 1 ms one
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[1].end - c[1].start, 4 * kMs);
}

// GPUACCT_SIM_PM_FIRST_SAMPLE_FROM=enable: the first sample is open since an enable that began
// GPUACCT_SIM_PM_ENABLE_NS before it returned, its counts from the start only (diluted).
TEST_F(SimTest, PmFirstSampleOpenSinceTheEnable) {
  setenv("GPUACCT_SIM_PM_CLOCK_OFFSET_NS", "0", 1);
  setenv("GPUACCT_SIM_PM_FIRST_SAMPLE_FROM", "enable", 1);
  setenv("GPUACCT_SIM_PM_ENABLE_NS", "3000000", 1);
  ResetAll();
  HostWorkToGrid(0);
  const uint64_t t0 = simNow();
  Plant(0, t0, t0 + 10 * kMs, 80, 80, 80);
  PmClient c(0, {kSm});
  ASSERT_EQ(c.Start(), CUPTI_SUCCESS);
  simHostWork(2 * kMs);
  std::vector<Got> got = c.Decode();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].start, t0 - 3 * kMs);
  EXPECT_EQ(got[0].end, t0 + kMs);
  EXPECT_EQ(got[0].values[0], 20);  // 1 ms counted over 4
  EXPECT_EQ(got[1].values[0], 80);
}

TEST_F(SimTest, PmMetricTablePerChipAndPasses) {
  PmClient gh(0, {kSm, kHmma});  // gh100 (default): no hmma metric
  EXPECT_EQ(gh.add_result, CUPTI_ERROR_INVALID_METRIC_NAME);
  setenv("GPUACCT_SIM_PM_CHIP", "ga102", 1);
  ResetAll();
  PmClient ga(0, {kSm, kHmma});
  EXPECT_EQ(ga.chip_, "ga102");
  EXPECT_EQ(ga.add_result, CUPTI_SUCCESS);
  EXPECT_EQ(ga.Passes(), 1u);
  PmClient not_ga(1, {kTensor});
  EXPECT_EQ(not_ga.add_result, CUPTI_ERROR_INVALID_METRIC_NAME);
}

TEST_F(SimTest, PmRefusalsByKnob) {
  setenv("GPUACCT_SIM_PM_REFUSE", "privileges", 1);
  ResetAll();
  EXPECT_EQ(PmClient(0, {kSm}).enable_result, CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
  setenv("GPUACCT_SIM_PM_REFUSE", "busy:1", 1);
  ResetAll();
  PmClient d0(0, {kSm});
  EXPECT_EQ(d0.Start(), CUPTI_SUCCESS);  // only device 1 is held
  PmClient d1(1, {kSm});
  EXPECT_EQ(d1.Start(), CUPTI_ERROR_HARDWARE_BUSY);
  setenv("GPUACCT_SIM_PM_REFUSE", "unsupported", 1);
  ResetAll();
  Pm pm;
  auto init = SIM_PARAMS(CUpti_Profiler_Initialize_Params);
  EXPECT_EQ(pm.cuptiProfilerInitialize(&init), CUPTI_SUCCESS);
  auto avail = SIM_PARAMS(CUpti_PmSampling_GetCounterAvailability_Params);
  EXPECT_EQ(pm.cuptiPmSamplingGetCounterAvailability(&avail), CUPTI_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(PmClient(0, {kSm}).chip_, "tu102");
}

// The target calls need cuptiProfilerInitialize first (as NVIDIA's pm_sampling sample does).
TEST_F(SimTest, PmTargetCallsNeedTheProfilerInitialized) {
  Pm pm;
  auto chip = SIM_PARAMS(CUpti_Device_GetChipName_Params);
  EXPECT_EQ(pm.cuptiDeviceGetChipName(&chip), CUPTI_ERROR_NOT_INITIALIZED);
  auto avail = SIM_PARAMS(CUpti_PmSampling_GetCounterAvailability_Params);
  EXPECT_EQ(pm.cuptiPmSamplingGetCounterAvailability(&avail), CUPTI_ERROR_NOT_INITIALIZED);
  auto en = SIM_PARAMS(CUpti_PmSampling_Enable_Params);
  EXPECT_EQ(pm.cuptiPmSamplingEnable(&en), CUPTI_ERROR_NOT_INITIALIZED);
  auto init = SIM_PARAMS(CUpti_Profiler_Initialize_Params);
  EXPECT_EQ(pm.cuptiProfilerInitialize(&init), CUPTI_SUCCESS);
  EXPECT_EQ(pm.cuptiDeviceGetChipName(&chip), CUPTI_SUCCESS);
  EXPECT_EQ(pm.cuptiPmSamplingEnable(&en), CUPTI_SUCCESS);
}

}  // namespace
}  // namespace sim_test
