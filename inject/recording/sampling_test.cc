// The sampling window (inject/recording/sampling.h): which steps are traced and when CUPTI is
// switched, and GPUACCT_SAMPLE's parsing (bad values: one warning, every step traced).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "inject/config.h"
#include "inject/recording/host_events.h"
#include "inject/recording/sampling.h"

namespace gpuacct::inject {
namespace {

TEST(StepSampler, EveryStepTracedWithoutSampling) {
  for (int every : {-3, 0, 1}) {
    StepSampler s(every);
    for (int i = 0; i < 10; ++i) {
      const StepSampler::Decision d = s.next_step();
      EXPECT_TRUE(d.traced);
      EXPECT_FALSE(d.switch_on);
      EXPECT_FALSE(d.switch_off);
    }
    EXPECT_EQ(s.every(), 1);
  }
}

TEST(StepSampler, OneInNAndSwitchesOnlyAtWindowEdges) {
  for (int every : {2, 3, 5, 10}) {
    StepSampler s(every);
    int switches_on = 0, switches_off = 0;
    bool on = true;  // CUPTI starts on
    for (int i = 0; i < 50; ++i) {
      const StepSampler::Decision d = s.next_step();
      EXPECT_EQ(d.traced, i % every == every - 1) << "every " << every << " step " << i;
      EXPECT_FALSE(d.switch_on && d.switch_off);
      if (d.switch_on) {
        EXPECT_FALSE(on);
        on = true;
        ++switches_on;
      }
      if (d.switch_off) {
        EXPECT_TRUE(on);
        on = false;
        ++switches_off;
      }
      EXPECT_EQ(on, d.traced) << "CUPTI must be on exactly in traced steps";
    }
    // One switch on per traced step; off after each, plus the first (CUPTI starts on).
    EXPECT_EQ(switches_on, 50 / every);
    EXPECT_EQ(switches_off, 50 / every + (50 % every == 0 ? 0 : 1));
  }
}

const std::map<std::string, std::string>* g_env = nullptr;
const char* lookup(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

// An empty value means unset, as for every variable (no warning).
TEST(StepSampler, BadValuesWarnOnceAndTraceEveryStep) {
  for (const char* bad : {"0", "-5", "ten", "2.5", "1e9"}) {
    const std::map<std::string, std::string> env = {{"GPUACCT_SAMPLE", bad}};
    g_env = &env;
    std::vector<std::string> warnings;
    const Config c = parse_config(lookup, &warnings);
    EXPECT_EQ(c.sample_every, 1) << bad;
    ASSERT_EQ(warnings.size(), 1u) << bad;
    EXPECT_NE(warnings[0].find("GPUACCT_SAMPLE"), std::string::npos) << warnings[0];
  }
  const std::map<std::string, std::string> env = {{"GPUACCT_SAMPLE", "10"}};
  g_env = &env;
  std::vector<std::string> warnings;
  EXPECT_EQ(parse_config(lookup, &warnings).sample_every, 10);
  EXPECT_TRUE(warnings.empty());
}

// A C API step begun (or marked) with CUPTI off carries kStepUntracedKind: its range (or
// boundary marker) is flagged untraced; the others are not.
TEST(StepSampler, UntracedStepRecordsFlagTheirRangeAndMarker) {
  auto rec = [](HostRecType type, int64_t ts, uint8_t kind) {
    TimedRecord t;
    t.rec.type = type;
    t.rec.ts = ts;
    t.rec.value = -1;
    t.rec.kind = kind;
    t.tid = 1;
    return t;
  };
  NameTable names;
  HostEventProcessor p(names, NamePatterns(Config::default_step_patterns()),
                       NamePatterns(Config::default_data_patterns()));
  std::vector<TimedRecord> r = {
      rec(HostRecType::kStepBegin, 100, kStepUntracedKind),
      rec(HostRecType::kStepBegin, 200, 0),
      rec(HostRecType::kStepEnd, 300, 0),
      rec(HostRecType::kStepMark, 400, kStepUntracedKind),
      rec(HostRecType::kStepMark, 500, 0),
  };
  EventBatch out;
  Stats stats;
  p.process(r, out, nullptr, stats);
  ASSERT_EQ(out.ranges.size(), 2u);
  EXPECT_TRUE(step_untraced(out.ranges[0]));
  EXPECT_FALSE(step_untraced(out.ranges[1]));
  ASSERT_EQ(out.markers.size(), 2u);
  EXPECT_TRUE(step_untraced(out.markers[0]));
  EXPECT_FALSE(step_untraced(out.markers[1]));
}

}  // namespace
}  // namespace gpuacct::inject
