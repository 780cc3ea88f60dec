// CounterSampler against a scripted CUPTI table (no library): which metrics it chooses, how a
// sample's five values are made (speed of light as a max, clamping), what is counted lost, and
// which line each refusal gives.  The end-to-end path is tests/e2e/counters_e2e.py.
#include "cupti_hooks/counter_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cupti_hooks/cupti_api.h"

namespace gpuacct::cupti {
namespace {

constexpr uint64_t kMs = 1'000'000;

// What the scripted CUPTI knows and does.
struct Script {
  std::set<std::string> known;              // metric names the chip accepts
  size_t max_per_pass = 8;                  // more metrics than this: two passes
  std::map<std::string, CUptiResult> fail;  // function name -> result
  struct Sample {
    uint64_t start, end;
    std::map<std::string, double> values;
  };
  std::vector<Sample> pending;  // in the hardware buffer
  std::vector<Sample> image;    // decoded into the counter data image
  size_t image_room = 1000;
  uint8_t overflow = 0;
  int decodes = 0;
  int host_objects = 0;  // cuptiProfilerHostInitialize calls
  uint64_t now = 0;
};
Script g;

CUptiResult failed(const char* fn) {
  auto it = g.fail.find(fn);
  return it == g.fail.end() ? CUPTI_SUCCESS : it->second;
}

struct Host {
  std::vector<std::string> names;
};

CuptiApi scripted_api() {
  CuptiApi api;
  api.cuptiGetTimestamp = [](uint64_t* t) {
    *t = g.now;
    return CUPTI_SUCCESS;
  };
  api.cuptiProfilerInitialize = [](CUpti_Profiler_Initialize_Params*) {
    return failed("cuptiProfilerInitialize");
  };
  api.cuptiDeviceGetChipName = [](CUpti_Device_GetChipName_Params* p) {
    p->pChipName = "gh100";
    return failed("cuptiDeviceGetChipName");
  };
  api.cuptiPmSamplingGetCounterAvailability =
      [](CUpti_PmSampling_GetCounterAvailability_Params* p) {
        if (p->pCounterAvailabilityImage == nullptr) p->counterAvailabilityImageSize = 4;
        return failed("cuptiPmSamplingGetCounterAvailability");
      };
  api.cuptiProfilerHostInitialize = [](CUpti_Profiler_Host_Initialize_Params* p) {
    ++g.host_objects;
    p->pHostObject = reinterpret_cast<CUpti_Profiler_Host_Object*>(new Host());
    return CUPTI_SUCCESS;
  };
  api.cuptiProfilerHostDeinitialize = [](CUpti_Profiler_Host_Deinitialize_Params* p) {
    delete reinterpret_cast<Host*>(p->pHostObject);
    return CUPTI_SUCCESS;
  };
  api.cuptiProfilerHostConfigAddMetrics = [](CUpti_Profiler_Host_ConfigAddMetrics_Params* p) {
    auto* h = reinterpret_cast<Host*>(p->pHostObject);
    for (size_t i = 0; i < p->numMetrics; ++i) {
      if (g.known.count(p->ppMetricNames[i]) == 0) return CUPTI_ERROR_INVALID_METRIC_NAME;
      h->names.emplace_back(p->ppMetricNames[i]);
    }
    return failed("cuptiProfilerHostConfigAddMetrics");
  };
  api.cuptiProfilerHostGetConfigImageSize = [](CUpti_Profiler_Host_GetConfigImageSize_Params* p) {
    p->configImageSize = 1 + reinterpret_cast<Host*>(p->pHostObject)->names.size();
    return CUPTI_SUCCESS;
  };
  api.cuptiProfilerHostGetConfigImage = [](CUpti_Profiler_Host_GetConfigImage_Params* p) {
    p->pConfigImage[0] = static_cast<uint8_t>(p->configImageSize - 1);  // the metric count
    return CUPTI_SUCCESS;
  };
  api.cuptiProfilerHostGetNumOfPasses = [](CUpti_Profiler_Host_GetNumOfPasses_Params* p) {
    p->numOfPasses = p->pConfigImage[0] > g.max_per_pass ? 2 : 1;
    return CUPTI_SUCCESS;
  };
  api.cuptiProfilerHostEvaluateToGpuValues = [](CUpti_Profiler_Host_EvaluateToGpuValues_Params* p) {
    if (CUptiResult r = failed("cuptiProfilerHostEvaluateToGpuValues"); r != CUPTI_SUCCESS)
      return r;
    const Script::Sample& s = g.image.at(p->rangeIndex);
    for (size_t i = 0; i < p->numMetrics; ++i) {
      auto it = s.values.find(p->ppMetricNames[i]);
      p->pMetricValues[i] = it == s.values.end() ? 0.0 : it->second;
    }
    return CUPTI_SUCCESS;
  };
  api.cuptiPmSamplingEnable = [](CUpti_PmSampling_Enable_Params* p) {
    p->pPmSamplingObject = reinterpret_cast<CUpti_PmSampling_Object*>(&g);
    return failed("cuptiPmSamplingEnable");
  };
  api.cuptiPmSamplingSetConfig = [](CUpti_PmSampling_SetConfig_Params* p) {
    EXPECT_EQ(p->triggerMode, CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL);
    EXPECT_EQ(p->hwBufferAppendMode, CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST);
    EXPECT_EQ(p->samplingInterval, kMs);
    return failed("cuptiPmSamplingSetConfig");
  };
  api.cuptiPmSamplingStart = [](CUpti_PmSampling_Start_Params*) {
    return failed("cuptiPmSamplingStart");
  };
  api.cuptiPmSamplingStop = [](CUpti_PmSampling_Stop_Params*) { return CUPTI_SUCCESS; };
  api.cuptiPmSamplingGetCounterDataSize = [](CUpti_PmSampling_GetCounterDataSize_Params* p) {
    p->counterDataSize = 64;
    return CUPTI_SUCCESS;
  };
  api.cuptiPmSamplingCounterDataImageInitialize =
      [](CUpti_PmSampling_CounterDataImage_Initialize_Params*) { return CUPTI_SUCCESS; };
  api.cuptiPmSamplingDecodeData = [](CUpti_PmSampling_DecodeData_Params* p) {
    ++g.decodes;
    if (CUptiResult r = failed("cuptiPmSamplingDecodeData"); r != CUPTI_SUCCESS) return r;
    g.image.clear();
    while (!g.pending.empty() && g.image.size() < g.image_room) {
      g.image.push_back(g.pending.front());
      g.pending.erase(g.pending.begin());
    }
    p->overflow = g.overflow;
    g.overflow = 0;
    p->decodeStopReason = g.pending.empty()
                              ? CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS
                              : CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
    return CUPTI_SUCCESS;
  };
  api.cuptiPmSamplingGetCounterDataInfo = [](CUpti_PmSampling_GetCounterDataInfo_Params* p) {
    p->numCompletedSamples = g.image.size();
    return CUPTI_SUCCESS;
  };
  api.cuptiPmSamplingCounterDataGetSampleInfo =
      [](CUpti_PmSampling_CounterData_GetSampleInfo_Params* p) {
        p->startTimestamp = g.image.at(p->sampleIndex).start;
        p->endTimestamp = g.image.at(p->sampleIndex).end;
        return CUPTI_SUCCESS;
      };
  return api;
}

const char* kSm = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed";
const char* kTensorRealtime =
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed";
const char* kTensorHmma = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed";
const char* kDram = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
const char* kSmThroughput = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
const char* kMemThroughput = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";

class CounterSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g = Script{};
    g.known = {kSm, kTensorRealtime, kDram, kSmThroughput, kMemThroughput};
    g.now = 10 * kMs;
  }
  CuptiApi api = scripted_api();
  CounterOptions options;
};

double pct(const CounterSample& s, CounterMetric m) {
  return s.pct[static_cast<int>(m)];
}

TEST_F(CounterSamplerTest, ChoosesOnePassMetricsAndMakesTheFiveValues) {
  g.known = {kSm, kTensorHmma, kDram, kSmThroughput};  // GA10x-like: no realtime tensor metric
  CounterSampler sampler(api, options);
  EXPECT_EQ(sampler.enable(0), "");
  ASSERT_TRUE(sampler.any_active());
  const auto status = sampler.status();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].chip, "gh100");
  const std::vector<std::string> chosen = {
      std::string("sm_active=") + kSm, std::string("tensor_active=") + kTensorHmma,
      std::string("dram=") + kDram, std::string("compute_throughput=") + kSmThroughput};
  EXPECT_EQ(status[0].metrics, chosen);

  g.pending = {
      {10 * kMs, 11 * kMs, {{kSm, 50}, {kTensorHmma, 70}, {kDram, 30}, {kSmThroughput, 60}}},
      {11 * kMs, 12 * kMs, {{kSm, 100.4}, {kTensorHmma, -1}, {kDram, 30}, {kSmThroughput, 20}}}};
  g.now = 12 * kMs;  // a decode returns samples that ended before it (cupti_pmsampling.h)
  std::vector<CounterSample> out;
  Stats stats;
  sampler.decode(/*clock_offset_ns=*/4 * kMs, out, stats);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].start, static_cast<int64_t>(6 * kMs));  // onto the host clock
  EXPECT_EQ(out[0].end, static_cast<int64_t>(7 * kMs));
  EXPECT_EQ(pct(out[0], CounterMetric::kSmActive), 50);
  EXPECT_EQ(pct(out[0], CounterMetric::kTensorActive), 70);
  EXPECT_EQ(pct(out[0], CounterMetric::kDram), 30);
  EXPECT_EQ(pct(out[0], CounterMetric::kComputeSol), 70);  // max(sm throughput 60, tensor 70)
  EXPECT_EQ(pct(out[0], CounterMetric::kMemorySol), 30);   // dram alone (no memory metric)
  EXPECT_EQ(pct(out[1], CounterMetric::kSmActive), 100);   // 100.4 clamped
  EXPECT_TRUE(std::isnan(pct(out[1], CounterMetric::kTensorActive)));  // negative: not a value
  EXPECT_EQ(pct(out[1], CounterMetric::kComputeSol), 20);  // the NaN left out of the max
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 0);
  EXPECT_EQ(sampler.decoded_until(4 * kMs), static_cast<int64_t>(8 * kMs));
  EXPECT_EQ(sampler.status()[0].clock, "activity");  // on CUPTI's clock: not moved
  EXPECT_EQ(sampler.status()[0].clock_offset_ns, int64_t{0});
}

// A chip that takes only the metrics documented as PM-sampled on H100 (Nsight Systems' GPU
// metrics, Nsight Compute's PmSampling section): every role still gets one.
TEST_F(CounterSamplerTest, FallsBackToTheDocumentedPmSamplingMetrics) {
  const char* dramc = "dramc__throughput.avg.pct_of_peak_sustained_elapsed";
  const char* issue = "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed";
  const char* lts = "lts__throughput.avg.pct_of_peak_sustained_elapsed";
  g.known = {kSm, kTensorRealtime, dramc, issue, lts};
  CounterSampler sampler(api, options);
  EXPECT_EQ(sampler.enable(0), "");
  const std::vector<std::string> chosen = {
      std::string("sm_active=") + kSm, std::string("tensor_active=") + kTensorRealtime,
      std::string("dram=") + dramc, std::string("compute_throughput=") + issue,
      std::string("memory_throughput=") + lts};
  EXPECT_EQ(sampler.status()[0].metrics, chosen);
}

// The choice is made once per chip: the second device of a chip takes the first one's set with
// one host object; a set its counters do not allow makes it choose on its own.
TEST_F(CounterSamplerTest, ChoosesOncePerChip) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");
  const int first = g.host_objects;
  EXPECT_GE(first, 6);  // a trial per role, then its config
  ASSERT_EQ(sampler.enable(1), "");
  EXPECT_EQ(g.host_objects, first + 1);
  EXPECT_EQ(sampler.status()[1].metrics, sampler.status()[0].metrics);
  g.known.erase(kMemThroughput);  // device 2 lacks a counter the set needs
  ASSERT_EQ(sampler.enable(2), "");
  EXPECT_GT(g.host_objects, first + 2);
  EXPECT_EQ(sampler.status()[2].metrics.size(), 4u);
  EXPECT_EQ(sampler.status()[0].metrics.size(), 5u);
}

TEST_F(CounterSamplerTest, DropsAMetricThatWouldNeedASecondPass) {
  g.max_per_pass = 3;
  CounterSampler sampler(api, options);
  EXPECT_EQ(sampler.enable(0), "");
  EXPECT_EQ(sampler.status()[0].metrics.size(), 3u);
}

TEST_F(CounterSamplerTest, CountsLostSamplesFromGapsOverflowAndFailures) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");
  std::vector<CounterSample> out;
  Stats stats;
  // The first sample may start a little after the start: not a loss without the overflow flag.
  g.pending = {{12 * kMs, 13 * kMs, {}}, {13 * kMs, 14 * kMs, {}}, {17 * kMs, 18 * kMs, {}}};
  g.now = 18 * kMs;
  sampler.decode(0, out, stats);
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 3);  // [14, 17) missing
  // The flag without a hole: one.
  g.pending = {{18 * kMs, 19 * kMs, {}}};
  g.now = 19 * kMs;
  g.overflow = 1;
  sampler.decode(0, out, stats);
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 4);
  // A sample that cannot be evaluated.
  g.fail["cuptiProfilerHostEvaluateToGpuValues"] = CUPTI_ERROR_UNKNOWN;
  g.pending = {{19 * kMs, 20 * kMs, {}}};
  g.now = 20 * kMs;
  sampler.decode(0, out, stats);
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 5);
  EXPECT_EQ(out.size(), 4u);
  g.fail.clear();
  // A decode that fails once: what KEEP_LATEST overwrote meanwhile is the next hole, counted
  // once (not also per failed call).
  g.fail["cuptiPmSamplingDecodeData"] = CUPTI_ERROR_OUT_OF_MEMORY;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 5);
  g.fail.clear();
  g.pending = {{22 * kMs, 23 * kMs, {}}};
  g.now = 23 * kMs;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 7);  // [20, 22) missing
  EXPECT_TRUE(sampler.any_active());
}

TEST_F(CounterSamplerTest, ADecodeThatKeepsFailingGivesTheDeviceUp) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");  // sampling starts at 10 ms
  std::vector<CounterSample> out;
  Stats stats;
  g.pending = {{10 * kMs, 11 * kMs, {}}, {11 * kMs, 12 * kMs, {}}};
  g.now = 12 * kMs;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());  // emptied at 12 ms
  g.fail["cuptiPmSamplingDecodeData"] = CUPTI_ERROR_OUT_OF_MEMORY;
  for (int i = 1; i < CounterSampler::kDecodeFailuresToGiveUp; ++i) {
    g.now += 100 * kMs;
    EXPECT_TRUE(sampler.decode(0, out, stats).empty()) << i;
  }
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 0);
  EXPECT_EQ(sampler.decoded_until(0), static_cast<int64_t>(12 * kMs));  // holding back
  g.now += 100 * kMs;
  const std::vector<std::string> lines = sampler.decode(0, out, stats);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("hardware counters off on device 0 (gh100)"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("cuptiPmSamplingDecodeData failed 10 times in a row"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("; fix: "), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find('\n'), std::string::npos);
  // Every interval since the last complete decode: (12 ms + 10 * 100 ms - 12 ms) / 1 ms.
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 1000);
  EXPECT_FALSE(sampler.any_active());
  EXPECT_EQ(sampler.status()[0].state, CounterState::kFailed);
  EXPECT_EQ(sampler.status()[0].line, lines[0]);
  // No longer holds the watermark, never decoded again, said once.
  EXPECT_EQ(sampler.decoded_until(0), CounterSampler::kNothingDecoded);
  const int decodes = g.decodes;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());
  EXPECT_EQ(g.decodes, decodes);
  sampler.stop();
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 1000);
}

// A tick that hit its round limit decoded past its last complete decode: those are not lost.
TEST_F(CounterSamplerTest, AGiveUpAfterARoundLimitedTickCountsFromTheLastSample) {
  g.image_room = 1;  // 16 rounds a tick: 16 samples
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");  // started (and emptied) at 10 ms
  for (uint64_t k = 10; k < 40; ++k) g.pending.push_back({k * kMs, (k + 1) * kMs, {}});
  g.now = 40 * kMs;
  std::vector<CounterSample> out;
  Stats stats;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());
  ASSERT_EQ(out.size(), 16u);  // up to 26 ms
  g.fail["cuptiPmSamplingDecodeData"] = CUPTI_ERROR_UNKNOWN;
  for (int i = 0; i < CounterSampler::kDecodeFailuresToGiveUp; ++i) sampler.decode(0, out, stats);
  EXPECT_FALSE(sampler.any_active());
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 40 - 26);  // [26, 40) ms, not [10, 40)
}

TEST_F(CounterSamplerTest, AFailingLastDecodeCountsWhatTheStopLeft) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");
  std::vector<CounterSample> out;
  Stats stats;
  g.now = 15 * kMs;
  g.pending = {{10 * kMs, 15 * kMs, {}}};
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());  // emptied at 15 ms
  g.now = 19 * kMs;
  sampler.stop();  // stopped at 19 ms
  g.fail["cuptiPmSamplingDecodeData"] = CUPTI_ERROR_UNKNOWN;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 4);
  EXPECT_EQ(sampler.decoded_until(0), CounterSampler::kNothingDecoded);  // drained
}

TEST_F(CounterSamplerTest, DecodesUntilTheBufferIsEmptyThenStops) {
  g.image_room = 2;
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");
  for (uint64_t k = 10; k < 15; ++k) g.pending.push_back({k * kMs, (k + 1) * kMs, {}});
  g.now = 15 * kMs;
  std::vector<CounterSample> out;
  Stats stats;
  sampler.decode(0, out, stats);
  EXPECT_EQ(out.size(), 5u);  // three rounds of an image holding two
  EXPECT_EQ(g.decodes, 3);
  sampler.stop();
  EXPECT_EQ(sampler.decoded_until(0), static_cast<int64_t>(15 * kMs));  // not drained yet
  sampler.decode(0, out, stats);
  EXPECT_EQ(sampler.decoded_until(0), CounterSampler::kNothingDecoded);  // stopped and drained
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 0);
}

// Sample times on another clock than cuptiGetTimestamp's (the header does not rule it out; the
// H200 run's first sample was 743 ms off): the bracket [end - decode, first end - start] does
// not hold 0, so the samples are moved -- by the first sample's distance from the start, which
// fits the bracket -- onto CUPTI's clock exactly.  Nothing is said: it is handled.
TEST_F(CounterSamplerTest, SamplesOnAnotherClockAreMovedOntoCuptis) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");  // started at 10 ms
  std::vector<CounterSample> out;
  Stats stats;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());
  EXPECT_FALSE(sampler.status()[0].first_sample_lag_ns.has_value());
  const int64_t planted = -743'097'609;
  auto raw = [&](uint64_t t) { return static_cast<uint64_t>(static_cast<int64_t>(t) + planted); };
  g.pending = {{raw(10 * kMs), raw(11 * kMs), {}}, {raw(11 * kMs), raw(12 * kMs), {}}};
  g.now = 12 * kMs + 300'000;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].start, static_cast<int64_t>(10 * kMs));
  EXPECT_EQ(out[1].end, static_cast<int64_t>(12 * kMs));
  const CounterDeviceStatus st = sampler.status()[0];
  EXPECT_EQ(st.clock, "mapped");
  EXPECT_EQ(st.clock_offset_ns, planted);
  EXPECT_EQ(st.first_sample_lag_ns, planted);
  EXPECT_EQ(sampler.decoded_until(0), static_cast<int64_t>(12 * kMs));
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 0);
  // Holes are still holes on the samples' own clock.
  g.pending = {{raw(14 * kMs), raw(15 * kMs), {}}};
  g.now = 15 * kMs;
  sampler.decode(0, out, stats);
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 2);
  EXPECT_EQ(out.back().start, static_cast<int64_t>(14 * kMs));
}

// Another clock, and a first sample that does not begin at the start (it was open since an
// earlier call): moved by the middle of the bracket, within half an interval; the first
// sample itself began before the start and is dropped, counted in samples_before_start.
TEST_F(CounterSamplerTest, AFirstSampleOpenBeforeTheStartIsDropped) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");  // started at 10 ms
  const int64_t planted = 5'000'000'000;
  auto raw = [&](uint64_t t) { return static_cast<uint64_t>(static_cast<int64_t>(t) + planted); };
  g.pending = {{raw(2 * kMs), raw(10 * kMs + 400'000), {}},
               {raw(10 * kMs + 400'000), raw(11 * kMs + 400'000), {}},
               {raw(11 * kMs + 400'000), raw(12 * kMs + 400'000), {}}};
  g.now = 12 * kMs + 400'000;
  std::vector<CounterSample> out;
  Stats stats;
  sampler.decode(0, out, stats);
  ASSERT_EQ(out.size(), 2u);
  const CounterDeviceStatus st = sampler.status()[0];
  EXPECT_EQ(st.samples_before_start, 1);
  EXPECT_EQ(st.clock, "mapped");
  EXPECT_LE(std::abs(*st.clock_offset_ns - planted), 500'000);
  EXPECT_LE(std::abs(out[0].start - static_cast<int64_t>(10 * kMs + 400'000)), 500'000);
  EXPECT_EQ(stats.get(Stat::counter_samples_lost), 0);
}

// The same on CUPTI's own clock (a first sample open since the enable): the bracket holds 0,
// nothing is moved, the early sample is dropped.
TEST_F(CounterSamplerTest, OnTheActivityClockAnEarlyFirstSampleIsDroppedToo) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");
  g.pending = {{3 * kMs, 11 * kMs, {}}, {11 * kMs, 12 * kMs, {}}, {12 * kMs, 13 * kMs, {}}};
  g.now = 13 * kMs;
  std::vector<CounterSample> out;
  Stats stats;
  sampler.decode(0, out, stats);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].start, static_cast<int64_t>(11 * kMs));
  EXPECT_EQ(sampler.status()[0].clock, "activity");
  EXPECT_EQ(sampler.status()[0].samples_before_start, 1);
  EXPECT_EQ(sampler.status()[0].first_sample_lag_ns, -7 * static_cast<int64_t>(kMs));
}

TEST_F(CounterSamplerTest, AFirstSampleAtTheStartIsOnTheClock) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");
  g.pending = {{10 * kMs + 300'000, 11 * kMs, {}}};
  g.now = 11 * kMs;
  std::vector<CounterSample> out;
  Stats stats;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());
  EXPECT_EQ(sampler.status()[0].first_sample_lag_ns, int64_t{300'000});
  EXPECT_EQ(sampler.status()[0].clock, "activity");
}

// Samples the hardware makes 4x the interval set (a trigger or unit read otherwise than the
// header says): one line, and the length seen in the report.
TEST_F(CounterSamplerTest, SamplesOfAnotherLengthThanTheIntervalAreSaidOnce) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");
  for (uint64_t k = 0; k < 8; ++k) {
    g.pending.push_back({10 * kMs + 4 * k * kMs, 10 * kMs + 4 * (k + 1) * kMs, {}});
  }
  g.now = 42 * kMs;
  std::vector<CounterSample> out;
  Stats stats;
  const std::vector<std::string> lines = sampler.decode(0, out, stats);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("samples are 4000 us long where the GPU time-interval trigger was set to "
                          "1000000 ns"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(sampler.status()[0].interval_seen_ns, 4 * static_cast<int64_t>(kMs));
  g.pending = {{42 * kMs, 46 * kMs, {}}};
  g.now = 46 * kMs;
  EXPECT_TRUE(sampler.decode(0, out, stats).empty());  // said once
}

// GPUACCT_COUNTERS_DEBUG: the raw view -- what was set, when each set-up call ran, the first
// five samples' raw times against the decode call and their raw (unclamped) values, the
// samples due; without it, no debug object.
TEST_F(CounterSamplerTest, DebugKeepsTheRawView) {
  options.debug = true;
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");
  for (uint64_t k = 10; k < 17; ++k) {
    g.pending.push_back({k * kMs, (k + 1) * kMs, {{kSm, 100.5 + static_cast<double>(k)}}});
  }
  g.now = 17 * kMs;
  std::vector<CounterSample> out;
  Stats stats;
  sampler.decode(0, out, stats);
  g.now = 20 * kMs;
  sampler.stop();
  const CounterDeviceStatus st = sampler.status()[0];
  ASSERT_TRUE(st.debug.has_value());
  const CounterDebug& d = *st.debug;
  EXPECT_STREQ(d.trigger_mode, "gpu_time_interval");
  EXPECT_EQ(d.sampling_interval, kMs);
  EXPECT_STREQ(d.interval_unit, "ns");
  EXPECT_EQ(d.start_before, 10 * kMs);
  EXPECT_EQ(d.stop_at, 20 * kMs);
  ASSERT_EQ(d.first_samples.size(), 5u);
  EXPECT_EQ(d.first_samples[0].start, 10 * kMs);
  EXPECT_EQ(d.first_samples[0].decode_after, 17 * kMs);
  ASSERT_EQ(d.first_samples[0].values.size(), d.metric_names.size());
  EXPECT_EQ(d.first_samples[0].values[0], 110.5);  // raw: not clamped to 100
  EXPECT_EQ(d.metric_names[0], kSm);
  EXPECT_EQ(d.decodes, 1);
  EXPECT_EQ(st.samples_due, 10);  // [10, 20) ms at 1 ms
  EXPECT_EQ(st.samples, 7);
  CounterOptions plain;
  CounterSampler quiet(api, plain);
  ASSERT_EQ(quiet.enable(1), "");
  EXPECT_FALSE(quiet.status()[0].debug.has_value());
}

TEST_F(CounterSamplerTest, NothingIsSetUpAfterTheStop) {
  CounterSampler sampler(api, options);
  ASSERT_EQ(sampler.enable(0), "");
  sampler.stop();
  g.fail["cuptiPmSamplingStart"] = CUPTI_ERROR_UNKNOWN;  // would be a refusal line if tried
  EXPECT_EQ(sampler.enable(1), "");
  ASSERT_EQ(sampler.status().size(), 1u);
  EXPECT_EQ(sampler.status()[0].device, 0);
}

TEST_F(CounterSamplerTest, EachRefusalNamesItsCauseAndFix) {
  struct Case {
    const char* fn;
    CUptiResult r;
    CounterState state;
    const char* needle;
  };
  const Case cases[] = {
      {"cuptiPmSamplingEnable", CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
       CounterState::kInsufficientPrivileges, "NVreg_RestrictProfilingToAdminUsers=0"},
      {"cuptiPmSamplingStart", CUPTI_ERROR_HARDWARE_BUSY, CounterState::kBusy,
       "dcgmi profile --pause"},
      {"cuptiPmSamplingGetCounterAvailability", CUPTI_ERROR_NOT_SUPPORTED,
       CounterState::kUnsupported, "compute capability 8.6 or newer"},
      {"cuptiPmSamplingSetConfig", CUPTI_ERROR_UNKNOWN, CounterState::kFailed,
       "cuptiPmSamplingSetConfig"},
  };
  for (const Case& c : cases) {
    SetUp();
    g.fail[c.fn] = c.r;
    CounterSampler sampler(api, options);
    const std::string line = sampler.enable(1);
    EXPECT_NE(line.find("hardware counters off on device 1"), std::string::npos) << line;
    EXPECT_NE(line.find(c.needle), std::string::npos) << line;
    EXPECT_NE(line.find("; fix: "), std::string::npos) << line;
    EXPECT_NE(line.find("tracing continues without counters"), std::string::npos) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos);
    EXPECT_FALSE(sampler.any_active());
    EXPECT_EQ(sampler.status()[0].state, c.state);
    EXPECT_EQ(sampler.enable(1), "");  // tried once
    EXPECT_EQ(sampler.decoded_until(0), CounterSampler::kNothingDecoded);
  }
}

TEST_F(CounterSamplerTest, ACuptiWithoutPmSamplingIsUnsupported) {
  api.cuptiPmSamplingDecodeData = nullptr;
  CounterSampler sampler(api, options);
  const std::string line = sampler.enable(0);
  EXPECT_NE(line.find("lacks cuptiPmSamplingDecodeData"), std::string::npos) << line;
  EXPECT_EQ(sampler.status()[0].state, CounterState::kUnsupported);
}

TEST_F(CounterSamplerTest, NoMetricAcceptedIsUnsupported) {
  g.known.clear();
  CounterSampler sampler(api, options);
  const std::string line = sampler.enable(0);
  EXPECT_NE(line.find("none of the metrics"), std::string::npos) << line;
  EXPECT_EQ(sampler.status()[0].state, CounterState::kUnsupported);
}

}  // namespace
}  // namespace gpuacct::cupti
