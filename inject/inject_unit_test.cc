// Unit tests of the CUDA-free parts of the injected library: configuration parsing, name
// patterns, the SPSC ring, host-record processing.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "inject/config.h"
#include "inject/log.h"
#include "inject/recording/host_events.h"
#include "inject/recording/host_ring.h"
#include "inject/recording/name_patterns.h"
#include "inject/recording/recorder.h"

namespace gpuacct::inject {
namespace {

std::map<std::string, std::string>* g_env = nullptr;
const char* fake_env(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

TEST(Config, DefaultsWithEmptyEnvironment) {
  std::map<std::string, std::string> env;
  g_env = &env;
  std::vector<std::string> warnings;
  Config c = parse_config(fake_env, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.flush_ms, 100);
  EXPECT_EQ(c.buffer_mb, 4);
  EXPECT_EQ(c.buffer_count, 8);
  EXPECT_EQ(c.warmup_steps, 2);
  EXPECT_EQ(c.rank, -1);
  EXPECT_EQ(c.step_patterns, Config::default_step_patterns());
}

TEST(Config, BadValuesWarnOnceEachAndKeepDefaults) {
  std::map<std::string, std::string> env = {
      {"GPUACCT_FLUSH_MS", "abc"},   {"GPUACCT_BUFFER_MB", "-3"},      {"GPUACCT_ENABLE", "maybe"},
      {"GPUACCT_WARMUP_STEPS", "5"}, {"GPUACCT_STEP_PATTERNS", " , "}, {"RANK", "3"}};
  g_env = &env;
  std::vector<std::string> warnings;
  Config c = parse_config(fake_env, &warnings);
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_NE(warnings[0].find("GPUACCT_ENABLE='maybe'"), std::string::npos);
  EXPECT_NE(warnings[1].find("GPUACCT_STEP_PATTERNS"), std::string::npos);
  EXPECT_NE(warnings[2].find("GPUACCT_FLUSH_MS='abc'"), std::string::npos);
  EXPECT_NE(warnings[2].find("using 100"), std::string::npos);
  EXPECT_NE(warnings[3].find("GPUACCT_BUFFER_MB='-3'"), std::string::npos);
  EXPECT_EQ(c.flush_ms, 100);
  EXPECT_EQ(c.buffer_mb, 4);
  EXPECT_TRUE(c.enable);
  EXPECT_EQ(c.warmup_steps, 5);
  EXPECT_EQ(c.rank, 3);
}

TEST(Config, HardwareCountersOffByDefaultAndTheirInterval) {
  std::map<std::string, std::string> env;
  g_env = &env;
  std::vector<std::string> warnings;
  Config c = parse_config(fake_env, &warnings);
  EXPECT_FALSE(c.counters);
  EXPECT_FALSE(c.counters_debug);
  EXPECT_EQ(c.counters_interval_us, 1000);
  // Asked for alone, the counters are held back with one line (the H200 run: 0 % and a crash
  // inside libnvperf_host).
  env = {{"GPUACCT_COUNTERS", "1"}};
  c = parse_config(fake_env, &warnings);
  EXPECT_FALSE(c.counters);
  EXPECT_TRUE(c.counters_held_back);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("held back"), std::string::npos);
  warnings.clear();
  env = {{"GPUACCT_COUNTERS", "1"},
         {"GPUACCT_COUNTERS_EXPERIMENTAL", "1"},
         {"GPUACCT_COUNTERS_INTERVAL_US", "250"},
         {"GPUACCT_COUNTERS_DEBUG", "1"}};
  c = parse_config(fake_env, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_FALSE(c.counters_held_back);
  EXPECT_TRUE(c.counters);
  EXPECT_TRUE(c.counters_debug);
  EXPECT_EQ(c.counters_interval_us, 250);
  env = {{"GPUACCT_COUNTERS", "1"},
         {"GPUACCT_COUNTERS_EXPERIMENTAL", "1"},
         {"GPUACCT_COUNTERS_INTERVAL_US", "5"}};
  c = parse_config(fake_env, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("GPUACCT_COUNTERS_INTERVAL_US='5'"), std::string::npos);
  EXPECT_NE(warnings[0].find("using 1000"), std::string::npos);
  EXPECT_EQ(c.counters_interval_us, 1000);
}

// What is asked of CUPTI: the design unless a GPUACCT_CUPTI_* experiment setting changes a
// choice (marking the run a measuring one); a bad value keeps the design's with one warning.
TEST(Config, CuptiPlanIsTheDesignUnlessAnExperimentSettingIsGiven) {
  std::map<std::string, std::string> env;
  g_env = &env;
  std::vector<std::string> warnings;
  Config c = parse_config(fake_env, &warnings);
  EXPECT_FALSE(c.cupti_plan.experiment);
  EXPECT_EQ(c.cupti_plan.kinds, cupti::kDesignKinds);
  EXPECT_FALSE(c.graph_nodes);
  env = {{"GPUACCT_GRAPH_NODES", "1"}};
  c = parse_config(fake_env, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(c.cupti_plan.kinds & cupti::kKindGraph, 0u) << "node by node: no GRAPH_TRACE";
  EXPECT_FALSE(c.cupti_plan.experiment) << "a user setting, not an experiment";
  env = {{"GPUACCT_CUPTI_KINDS", "kernel,sync"}, {"GPUACCT_CUPTI_CALLBACKS", "both"},
         {"GPUACCT_CUPTI_TIMESTAMPS", "callback"}, {"GPUACCT_CUPTI_API_RECORDS", "0"},
         {"GPUACCT_CUPTI_SAMPLE_SWITCH", "activity"}, {"GPUACCT_CUPTI_RESET_CALLBACK", "off"}};
  c = parse_config(fake_env, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(c.cupti_plan.experiment);
  EXPECT_EQ(c.cupti_plan.kinds, cupti::kKindKernel | cupti::kKindSync);
  EXPECT_EQ(c.cupti_plan.callbacks, cupti::CallbackDomains::kBoth);
  EXPECT_EQ(c.cupti_plan.timestamps, cupti::TimestampSource::kCallback);
  EXPECT_EQ(c.cupti_plan.sample_switch, cupti::SampleSwitch::kActivity);
  EXPECT_FALSE(c.cupti_plan.api_records);
  EXPECT_FALSE(c.cupti_plan.reset_callback);
  env = {{"GPUACCT_CUPTI_KINDS", "kernels"}, {"GPUACCT_CUPTI_CALLBACKS", "all"}};
  c = parse_config(fake_env, &warnings);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("GPUACCT_CUPTI_KINDS='kernels' is not one of its values"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("using kernel,copy,memset,graph"), std::string::npos);
  EXPECT_EQ(c.cupti_plan.kinds, cupti::kDesignKinds);
  EXPECT_EQ(c.cupti_plan.callbacks, cupti::CallbackDomains::kDesign);
  EXPECT_FALSE(c.cupti_plan.experiment);
}

// GPUACCT_CUPTI_API: where the calls' spans come from -- a user choice, not an experiment; a
// bad value keeps the callbacks with one warning.
TEST(Config, ApiSourceIsCallbacksUnlessRecordsAreAskedFor) {
  std::map<std::string, std::string> env;
  g_env = &env;
  std::vector<std::string> warnings;
  Config c = parse_config(fake_env, &warnings);
  EXPECT_EQ(c.cupti_plan.api_source, cupti::ApiSource::kCallbacks);
  EXPECT_FALSE(c.ring_records_set);
  env = {{"GPUACCT_CUPTI_API", "records"}, {"GPUACCT_RING_RECORDS", "1024"}};
  c = parse_config(fake_env, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(c.cupti_plan.api_source, cupti::ApiSource::kRecords);
  EXPECT_FALSE(c.cupti_plan.experiment) << "both sources keep the walls exact";
  EXPECT_TRUE(c.ring_records_set);
  env = {{"GPUACCT_CUPTI_API", "cupti"}};
  c = parse_config(fake_env, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("GPUACCT_CUPTI_API='cupti' is not one of its values"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("using callbacks"), std::string::npos) << warnings[0];
  EXPECT_EQ(c.cupti_plan.api_source, cupti::ApiSource::kCallbacks);
}

TEST(Config, GpuHourPrice) {
  std::map<std::string, std::string> env = {{"GPUACCT_GPU_HOUR_PRICE", " 2.5 "}};
  g_env = &env;
  std::vector<std::string> warnings;
  EXPECT_DOUBLE_EQ(parse_config(fake_env, &warnings).cost.gpu_hour_price, 2.5);
  EXPECT_TRUE(warnings.empty());
  for (const char* bad : {"cheap", "-1", "nan", "inf", "3$", "1e7"}) {
    env["GPUACCT_GPU_HOUR_PRICE"] = bad;
    warnings.clear();
    EXPECT_EQ(parse_config(fake_env, &warnings).cost.gpu_hour_price, 0.0) << bad;
    ASSERT_EQ(warnings.size(), 1u) << bad;
    EXPECT_NE(warnings[0].find("is not a number in [0, 1000000]; using 0"), std::string::npos)
        << warnings[0];
  }
}

// The owned-GPU model from the environment; an incomplete one is dropped whole (one warning),
// the price kept.
TEST(Config, OwnedGpuCostModel) {
  std::map<std::string, std::string> env = {{"GPUACCT_GPU_HOUR_PRICE", "3"},
                                            {"GPUACCT_GPU_HARDWARE_COST", "21915"},
                                            {"GPUACCT_AMORTIZATION_MONTHS", "30"},
                                            {"GPUACCT_FACILITY_PER_MONTH", "730.5"},
                                            {"GPUACCT_POWER_PER_GPU_HOUR", "0.5"},
                                            {"GPUACCT_TOKENS_PER_STEP", "262144"},
                                            {"GPUACCT_SAMPLES_PER_STEP", "512"}};
  g_env = &env;
  std::vector<std::string> warnings;
  Config c = parse_config(fake_env, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_DOUBLE_EQ(c.cost.hardware_cost, 21915);
  EXPECT_DOUBLE_EQ(c.cost.amortization_months, 30);
  EXPECT_DOUBLE_EQ(c.cost.facility_per_month, 730.5);
  EXPECT_DOUBLE_EQ(c.cost.power_per_gpu_hour, 0.5);
  EXPECT_DOUBLE_EQ(c.cost.tokens_per_step, 262144);
  EXPECT_DOUBLE_EQ(c.cost.samples_per_step, 512);
  env.erase("GPUACCT_AMORTIZATION_MONTHS");
  c = parse_config(fake_env, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("owned-GPU cost model is incomplete"), std::string::npos);
  EXPECT_DOUBLE_EQ(c.cost.gpu_hour_price, 3);
  EXPECT_FALSE(c.cost.owned());
  EXPECT_EQ(c.cost.power_per_gpu_hour, 0);
  EXPECT_DOUBLE_EQ(c.cost.tokens_per_step, 262144);  // the work is kept with the price
}

TEST(Config, OutputBaseSubstitutesHostPidRank) {
  Config c;
  c.output_dir = "/tmp/out";
  c.output_pattern = "x_{host}_{pid}_r{rank}";
  c.host = "node1";
  c.pid = 42;
  c.rank = 7;
  EXPECT_EQ(c.output_base(), "/tmp/out/x_node1_42_r7");
}

// A warning is one line of bounded length whatever the value holds: quoted, control and
// non-ASCII bytes escaped, long values cut (the raw value split lines / made 100 KB lines).
TEST(Config, WarningsQuoteAndCutTheValue) {
  std::map<std::string, std::string> env = {{"GPUACCT_FLUSH_MS", "12\nfake: line\x01\xff'"},
                                            {"GPUACCT_BUFFER_MB", std::string(100000, '7')}};
  g_env = &env;
  std::vector<std::string> warnings;
  parse_config(fake_env, &warnings);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("GPUACCT_FLUSH_MS='12\\nfake: line\\x01\\xff\\''"), std::string::npos)
      << warnings[0];
  for (const std::string& w : warnings) {
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
    EXPECT_LT(w.size(), 200u) << w.substr(0, 200);
  }
  EXPECT_NE(warnings[1].find("(100000 bytes)"), std::string::npos) << warnings[1].substr(0, 200);
  EXPECT_NE(warnings[1].find("using 4"), std::string::npos);
}

// A pattern whose file name would not fit (NAME_MAX, with the longest suffix the library adds)
// falls back to the default with a warning; it was kept and the report was lost.
TEST(Config, OverLongOutputPatternFallsBackToTheDefault) {
  const std::string default_pattern = Config{}.output_pattern;
  for (const std::string& pattern :
       {std::string(300, 'x'), std::string(60, 'y') + "{pid}" + std::string(200, 'z')}) {
    std::map<std::string, std::string> env = {{"GPUACCT_OUTPUT_PATTERN", pattern}};
    g_env = &env;
    std::vector<std::string> warnings;
    const Config c = parse_config(fake_env, &warnings);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("GPUACCT_OUTPUT_PATTERN="), std::string::npos);
    EXPECT_NE(warnings[0].find("too long"), std::string::npos) << warnings[0];
    EXPECT_EQ(c.output_pattern, default_pattern);
  }
  std::map<std::string, std::string> env = {{"GPUACCT_OUTPUT_PATTERN", std::string(200, 'k')}};
  g_env = &env;
  std::vector<std::string> warnings;
  EXPECT_EQ(parse_config(fake_env, &warnings).output_pattern, std::string(200, 'k'));
  EXPECT_TRUE(warnings.empty());
}

// Every message of the library is one line: prefixed, control bytes escaped (a file name or
// a CUPTI string holding "\n" cannot forge a second line), bounded, UTF-8 kept legible.
TEST(Log, OneEscapedBoundedLine) {
  EXPECT_EQ(format_log_line("report written to /tmp/x.json"),
            "gpuacct: report written to /tmp/x.json");
  EXPECT_EQ(format_log_line("cannot write /tmp/a\nb\tc\x01 (\xc3\xa9)"),
            "gpuacct: cannot write /tmp/a\\nb\\tc\\x01 (\xc3\xa9)");
  const std::string long_line = format_log_line(std::string(100000, 'p'));
  EXPECT_EQ(long_line.find('\n'), std::string::npos);
  EXPECT_LT(long_line.size(), kMaxLogLineBytes + 64);
  EXPECT_NE(long_line.find("... (100000 bytes)"), std::string::npos);
  EXPECT_EQ(format_log_line(std::string(kMaxLogLineBytes, 'q')).size(),
            std::string("gpuacct: ").size() + kMaxLogLineBytes);
}

TEST(NamePatterns, GlobAndTrailingNumbers) {
  NamePatterns p(Config::default_step_patterns());
  int64_t n = -2;
  EXPECT_TRUE(p.match("ProfilerStep#17", &n));
  EXPECT_EQ(n, 17);
  EXPECT_TRUE(p.match("train_step", &n));
  EXPECT_EQ(n, -1);
  EXPECT_TRUE(p.match("step 12", &n));
  EXPECT_EQ(n, 12);
  EXPECT_TRUE(p.match("iteration_3", &n));
  EXPECT_FALSE(p.match("stepper", &n));
  EXPECT_FALSE(p.match("ProfilerStep#", &n));
  NamePatterns d(Config::default_data_patterns());
  EXPECT_TRUE(d.match("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", &n));
  EXPECT_TRUE(d.match("data_loading", &n));
  EXPECT_TRUE(d.match("DataLoader", &n));
  EXPECT_FALSE(d.match("metadata", &n));
  EXPECT_TRUE(glob_match("a*b?c", "axxxbyc"));
  EXPECT_FALSE(glob_match("a*b?c", "axxxbc"));
}

TEST(HostRing, FifoDropWhenFullAndWrap) {
  HostRing ring(4);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i) {
      const int64_t idx = ring.try_reserve(1);
      ASSERT_GE(idx, 0);
      ring.slot(static_cast<uint64_t>(idx)).value = round * 10 + i;
      ring.publish(1);
    }
    EXPECT_LT(ring.try_reserve(1), 0);
    std::vector<int64_t> got;
    ring.drain([&](const HostRecord& r, uint64_t, HostRing&) { got.push_back(r.value); });
    ASSERT_EQ(got.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], round * 10 + i);
  }
  EXPECT_EQ(ring.dropped(), 3u);
}

// A thread's CUPTI identity is logged at its first call (before CUPTI can record one of its
// calls); when a gone thread's pthread id comes back, its exit is logged before the new
// thread's start, so the worker never maps the old thread's late records to the new one.
// Launch callbacks counted per domain (issue 17 §2, docs/overhead.md): a driver launch counts
// as nested only inside a traced runtime call, whatever that call is; not alone, not inside a
// driver call.  Copies are not launches.
TEST(Recorder, LaunchCallbacksCountedPerDomainAndNestedOnlyInARuntimeCall) {
  using cupti::ApiDomain;
  // On this thread (a thread that exits would log its exit into the Registry test's events);
  // the counts are differences, as the worker takes them.
  const int mode_before = g_mode.exchange(kModeRecording);
  const bool stacks_before = g_hot.stacks;
  g_hot.stacks = false;
  ThreadState* s = current_thread();
  ASSERT_NE(s, nullptr);
  const uint64_t runtime0 = s->runtime_launch_callbacks.load();
  const uint64_t driver0 = s->driver_launch_callbacks.load();
  const uint64_t nested0 = s->driver_launch_callbacks_nested.load();
  uint64_t scratch = 0;
  auto call = [&](HostApiKind kind, ApiDomain domain, auto&& inside) {
    hook_api_enter(kind, domain, &scratch);
    inside();
    hook_api_exit(kind, &scratch, cupti::ApiCallExit{});
  };
  auto nothing = [] {};
  auto driver_launch = [&] { call(HostApiKind::kLaunch, ApiDomain::kDriver, nothing); };
  call(HostApiKind::kLaunch, ApiDomain::kRuntime, driver_launch);  // cudaLaunchKernel
  call(HostApiKind::kLaunch, ApiDomain::kRuntime, nothing);        // without its driver call
  driver_launch();                                                   // Triton, NCCL
  call(HostApiKind::kSync, ApiDomain::kDriver, driver_launch);      // inside a driver call
  call(HostApiKind::kSync, ApiDomain::kRuntime, driver_launch);     // inside a runtime call
  call(HostApiKind::kCopy, ApiDomain::kRuntime, nothing);           // not a launch
  g_hot.stacks = stacks_before;
  g_mode.store(mode_before);
  EXPECT_EQ(s->runtime_launch_callbacks.load() - runtime0, 2u);
  EXPECT_EQ(s->driver_launch_callbacks.load() - driver0, 4u);
  EXPECT_EQ(s->driver_launch_callbacks_nested.load() - nested0, 2u);
  EXPECT_EQ(s->api_depth, 0);
}

// ApiSource::kCallbacks: the outermost traced call of a thread is written once, with the
// correlation id its own exit callback gave (a runtime launch's nested driver call adds nothing),
// its span from the enter and exit callbacks, 0 for a failed call; copies are written too; a
// runtime call entered while a call's exit was never seen starts afresh.
TEST(Recorder, CallsTimedByCallbacksWriteOneRecordPerOutermostCall) {
  using cupti::ApiDomain;
  const int mode_before = g_mode.exchange(kModeRecording);
  const bool stacks_before = g_hot.stacks, api_before = g_hot.api_calls;
  g_hot.stacks = false;
  g_hot.api_calls = true;
  ThreadState* s = current_thread();
  ASSERT_NE(s, nullptr);
  s->ring.drain([](const HostRecord&, uint64_t, HostRing&) {});
  auto exit_of = [](uint32_t correlation, uint16_t index, bool failed, ApiDomain domain) {
    cupti::ApiCallExit e;
    e.correlation_id = correlation;
    e.traced_index = index;
    e.failed = failed;
    e.domain = domain;
    return e;
  };
  uint64_t rt = 0, drv = 0;
  // cudaLaunchKernel (runtime id 7) around its cuLaunchKernel (driver id 8).
  hook_api_enter(HostApiKind::kLaunch, ApiDomain::kRuntime, &rt);
  hook_api_enter(HostApiKind::kLaunch, ApiDomain::kDriver, &drv);
  hook_api_exit(HostApiKind::kLaunch, &drv, exit_of(8, 40, false, ApiDomain::kDriver));
  hook_api_exit(HostApiKind::kLaunch, &rt, exit_of(7, 1, false, ApiDomain::kRuntime));
  // A driver launch alone (NCCL, Triton).
  hook_api_enter(HostApiKind::kLaunch, ApiDomain::kDriver, &drv);
  hook_api_exit(HostApiKind::kLaunch, &drv, exit_of(9, 40, false, ApiDomain::kDriver));
  // A failed launch, a copy.
  hook_api_enter(HostApiKind::kLaunch, ApiDomain::kRuntime, &rt);
  hook_api_exit(HostApiKind::kLaunch, &rt, exit_of(10, 1, true, ApiDomain::kRuntime));
  hook_api_enter(HostApiKind::kCopy, ApiDomain::kRuntime, &rt);
  hook_api_exit(HostApiKind::kCopy, &rt, exit_of(11, 3, false, ApiDomain::kRuntime));
  // A call whose exit was switched off, then a runtime launch: the launch is written.
  hook_api_enter(HostApiKind::kSync, ApiDomain::kRuntime, &drv);
  hook_api_enter(HostApiKind::kLaunch, ApiDomain::kRuntime, &rt);
  hook_api_exit(HostApiKind::kLaunch, &rt, exit_of(12, 1, false, ApiDomain::kRuntime));
  g_hot.stacks = stacks_before;
  g_hot.api_calls = api_before;
  g_mode.store(mode_before);
  struct Seen {
    int64_t start, end;
    uint32_t correlation;
    uint16_t index;
    HostApiKind kind;
    uint16_t nested_index;
    uint32_t nested_id;
    int64_t nested_start, nested_end;
  };
  std::vector<Seen> seen;
  s->ring.drain([&](const HostRecord& r, uint64_t, HostRing&) {
    if (r.type != HostRecType::kApiCall) return;
    Seen x{r.ts, r.value, r.aux, 0, static_cast<HostApiKind>(r.kind), 0, 0, 0, 0};
    if ((r.flags & kApiCallNested) != 0) {
      std::memcpy(&x.nested_start, r.name + kApiCallNestedStartAt, sizeof x.nested_start);
      std::memcpy(&x.nested_end, r.name + kApiCallNestedEndAt, sizeof x.nested_end);
    }
    std::memcpy(&x.index, r.name + kApiCallIndexAt, sizeof x.index);
    std::memcpy(&x.nested_index, r.name + kApiCallNestedIndexAt, sizeof x.nested_index);
    std::memcpy(&x.nested_id, r.name + kApiCallNestedIdAt, sizeof x.nested_id);
    seen.push_back(x);
  });
  ASSERT_EQ(seen.size(), 5u);
  const uint32_t want_ids[] = {7, 9, 0, 11, 12};
  const uint16_t want_index[] = {1, 40, 1, 3, 1};
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].correlation, want_ids[i]) << i;
    EXPECT_EQ(seen[i].index, want_index[i]) << i;
    EXPECT_GT(seen[i].start, 0) << i;
    EXPECT_GE(seen[i].end, seen[i].start) << i;
    if (i > 0) {
      EXPECT_GE(seen[i].start, seen[i - 1].end) << i;
    }
  }
  EXPECT_EQ(seen[3].kind, HostApiKind::kCopy);
  // The runtime launch's driver call: its id (8), index and span inside the launch's; no
  // other call had one.
  EXPECT_EQ(seen[0].nested_id, 8u);
  EXPECT_EQ(seen[0].nested_index, 40u);
  EXPECT_GE(seen[0].nested_start, seen[0].start);
  EXPECT_GE(seen[0].nested_end, seen[0].nested_start);
  EXPECT_LE(seen[0].nested_end, seen[0].end);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_EQ(seen[i].nested_start, 0) << i;
  EXPECT_EQ(s->api_depth, 0);
}

TEST(Registry, LogsEachThreadsStartAndAReusedIdsExitInOrder) {
  std::vector<ThreadIdEvent> events;
  Registry::get().take_thread_events(events);  // whatever earlier tests left
  struct Seen {
    uint32_t pthread_low = 0, tid = 0;
  };
  auto one_thread = [] {
    Seen seen;
    std::thread t([&] {
      seen.pthread_low = static_cast<uint32_t>(pthread_self());
      seen.tid = static_cast<uint32_t>(syscall(SYS_gettid));
      emit_at(1, HostRecType::kStepMark, 0, nullptr, 0, 0);  // the thread's first call
    });
    t.join();
    return seen;
  };
  const Seen a = one_thread();
  const Seen b = one_thread();
  // The C library reuses a joined thread's stack, hence its pthread_t: the case under test.
  ASSERT_EQ(a.pthread_low, b.pthread_low) << "the second thread got a new pthread id";
  ASSERT_NE(a.tid, b.tid);
  Registry::get().take_thread_events(events);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_FALSE(events[0].exited);
  EXPECT_EQ(events[0].tid, a.tid);
  EXPECT_EQ(events[0].pthread_low, a.pthread_low);
  EXPECT_TRUE(events[1].exited) << "a's exit, learnt when its id came back";
  EXPECT_EQ(events[1].tid, a.tid);
  EXPECT_FALSE(events[2].exited);
  EXPECT_EQ(events[2].tid, b.tid);
  EXPECT_LE(events[0].ns, events[1].ns);
  EXPECT_LE(events[1].ns, events[2].ns) << "a exited before b started";

  // Leave no state behind for the pipeline tests: drain and recycle the two orphans.
  std::vector<ThreadState*> states;
  Registry::get().snapshot(states);
  for (ThreadState* st : states) {
    if (!st->orphaned.load() || (st->tid != a.tid && st->tid != b.tid)) continue;
    st->ring.drain([](const HostRecord&, uint64_t, HostRing&) {});
    Registry::get().recycle(st);
  }
}

TimedRecord rec(HostRecType type, int64_t ts, const char* name = nullptr, int64_t value = 0,
                uint32_t tid = 1) {
  TimedRecord t;
  t.rec.type = type;
  t.rec.ts = ts;
  t.rec.value = value;
  t.tid = tid;
  if (name != nullptr) {
    t.rec.len = static_cast<uint8_t>(std::strlen(name));
    std::memcpy(t.rec.name, name, t.rec.len);
  }
  return t;
}

TEST(HostEvents, CapiStepsDataRangesAndFlops) {
  NameTable names;
  HostEventProcessor p(names, NamePatterns(Config::default_step_patterns()),
                       NamePatterns(Config::default_data_patterns()));
  std::vector<TimedRecord> r = {
      rec(HostRecType::kStepBegin, 100, nullptr, -1),
      rec(HostRecType::kDataPush, 110, "dataloader"),
      rec(HostRecType::kDataPop, 150),
      rec(HostRecType::kStepFlops, 160, nullptr, std::bit_cast<int64_t>(2.5e12)),
      rec(HostRecType::kStepBegin, 200, nullptr, -1),  // ends the open step
      rec(HostRecType::kStepEnd, 300),
  };
  EventBatch out;
  Stats stats;
  p.process(r, out, nullptr, stats);
  ASSERT_EQ(out.ranges.size(), 3u);
  EXPECT_EQ(out.ranges[0].kind, RangeKind::kData);
  EXPECT_EQ(out.ranges[0].start, 110);
  EXPECT_EQ(out.ranges[0].end, 150);
  EXPECT_EQ(out.ranges[1].kind, RangeKind::kStep);
  EXPECT_EQ(out.ranges[1].start, 100);
  EXPECT_EQ(out.ranges[1].end, 200);
  EXPECT_EQ(out.ranges[1].number, 0);
  EXPECT_EQ(out.ranges[2].number, 1);
  ASSERT_EQ(out.markers.size(), 1u);
  EXPECT_DOUBLE_EQ(out.markers[0].value, 2.5e12);
  EXPECT_TRUE(p.explicit_steps());
  EXPECT_STREQ(p.step_source(), "capi");
}

// gpuacct_set_step_work's records: one marker per record, its unit from the record's kind, its
// value the double the bits carry (the accountant adds them up per step).
TEST(HostEvents, StepWorkRecordsBecomeTokenAndSampleMarkers) {
  NameTable names;
  HostEventProcessor p(names, NamePatterns(Config::default_step_patterns()),
                       NamePatterns(Config::default_data_patterns()));
  auto work = [](int64_t ts, WorkUnit unit, double v) {
    TimedRecord t = rec(HostRecType::kStepWork, ts, nullptr, std::bit_cast<int64_t>(v));
    t.rec.kind = static_cast<uint8_t>(unit);
    return t;
  };
  std::vector<TimedRecord> r = {
      rec(HostRecType::kStepMark, 100, nullptr, -1),
      work(130, WorkUnit::kSamples, 8),
      work(120, WorkUnit::kTokens, 4096.5),  // sorted by time before processing
  };
  EventBatch out;
  Stats stats;
  p.process(r, out, nullptr, stats);
  ASSERT_EQ(out.markers.size(), 3u);
  EXPECT_EQ(out.markers[0].kind, MarkerKind::kStepBoundary);
  EXPECT_EQ(out.markers[1].kind, MarkerKind::kStepTokens);
  EXPECT_EQ(out.markers[1].ts, 120);
  EXPECT_DOUBLE_EQ(out.markers[1].value, 4096.5);
  EXPECT_EQ(out.markers[2].kind, MarkerKind::kStepSamples);
  EXPECT_DOUBLE_EQ(out.markers[2].value, 8);
}

TEST(HostEvents, NvtxRangesClassifiedPerThreadAndDomain) {
  NameTable names;
  HostEventProcessor p(names, NamePatterns(Config::default_step_patterns()),
                       NamePatterns(Config::default_data_patterns()));
  std::vector<TimedRecord> r = {
      rec(HostRecType::kNvtxPush, 10, "ProfilerStep#5", 0, 1),
      rec(HostRecType::kNvtxPush, 11, "aten::mm", 0, 1),  // not kept
      rec(HostRecType::kNvtxPush, 12, "dataloader", 0, 2),
      rec(HostRecType::kNvtxPop, 13, nullptr, 0, 1),
      rec(HostRecType::kNvtxPop, 14, nullptr, 0, 2),
      rec(HostRecType::kNvtxPop, 20, nullptr, 0, 1),
  };
  EventBatch out;
  Stats stats;
  p.process(r, out, nullptr, stats);
  ASSERT_EQ(out.ranges.size(), 2u);
  EXPECT_EQ(out.ranges[0].kind, RangeKind::kData);
  EXPECT_EQ(out.ranges[0].thread, 2u);
  EXPECT_EQ(out.ranges[1].kind, RangeKind::kStep);
  EXPECT_EQ(out.ranges[1].number, 5);
  EXPECT_EQ(out.ranges[1].start, 10);
  EXPECT_EQ(out.ranges[1].end, 20);
  EXPECT_STREQ(p.step_source(), "nvtx");
}

TEST(HostEvents, TruncatedNamesOnlyMatchPrefixPatterns) {
  NameTable names;
  HostEventProcessor p(names, NamePatterns({"step"}), NamePatterns({"enumerate(DataLoader)*"}));
  TimedRecord a =
      rec(HostRecType::kNvtxPush, 1, "enumerate(DataLoader)#_MultiProcessingDa");  // 40 bytes
  a.rec.flags = kNameTruncated;
  TimedRecord b = rec(HostRecType::kNvtxPop, 2);
  std::vector<TimedRecord> r = {a, b};
  EventBatch out;
  Stats stats;
  p.process(r, out, nullptr, stats);
  ASSERT_EQ(out.ranges.size(), 1u);
  EXPECT_EQ(out.ranges[0].kind, RangeKind::kData);
}

// A non-ASCII name cut to the ring's size inside a character keeps its whole characters only.
TEST(HostEvents, ANameCutInsideACharacterStaysText) {
  NameTable names;
  HostEventProcessor p(names, NamePatterns({"step"}), NamePatterns({"donn*"}));
  // "donn" + 18 x U+00E9 (2 bytes each), cut at 39 bytes: inside the 18th character.
  std::string name = "donn";
  for (int i = 0; i < 18; ++i) name += "\xC3\xA9";
  TimedRecord a = rec(HostRecType::kNvtxPush, 1, name.substr(0, 39).c_str());
  a.rec.flags = kNameTruncated;
  std::vector<TimedRecord> r = {a, rec(HostRecType::kNvtxPop, 2)};
  EventBatch out;
  Stats stats;
  p.process(r, out, nullptr, stats);
  ASSERT_EQ(out.ranges.size(), 1u);
  EXPECT_EQ(names.text(out.ranges[0].name), name.substr(0, 38));  // 17 whole characters
}

// Every cap on what the processor keeps open is counted (data loss when a kept range is lost),
// and a push dropped at the cap does not make its pop close the range around it.
TEST(HostEvents, RangesDroppedAtTheNestingCapsAreCountedAndPopsStayPaired) {
  NameTable names;
  HostEventProcessor p(names, NamePatterns(Config::default_step_patterns()),
                       NamePatterns(Config::default_data_patterns()));
  const int depth = static_cast<int>(HostEventProcessor::kMaxNestedRanges) + 44;
  std::vector<TimedRecord> r;
  int64_t t = 0;
  for (int i = 0; i < depth; ++i) r.push_back(rec(HostRecType::kDataPush, ++t, "decode"));
  for (int i = 0; i < depth; ++i) r.push_back(rec(HostRecType::kDataPop, ++t));
  EventBatch out;
  Stats stats;
  p.process(r, out, nullptr, stats);
  EXPECT_EQ(stats.get(Stat::host_ranges_dropped), 44);
  EXPECT_EQ(stat_info(Stat::host_ranges_dropped).severity, StatSeverity::kDataLoss);
  ASSERT_EQ(out.ranges.size(), HostEventProcessor::kMaxNestedRanges);
  // The outermost range ends at the last pop, the innermost kept one at the 45th pop.
  EXPECT_EQ(out.ranges.back().start, 1);
  EXPECT_EQ(out.ranges.back().end, t);
  EXPECT_EQ(out.ranges.front().start, static_cast<int64_t>(HostEventProcessor::kMaxNestedRanges));
  EXPECT_EQ(out.ranges.front().end, depth + 45);

  // NVTX: only ranges that would have been kept (step / data patterns) are lost data.
  r.clear();
  out.clear();
  stats = Stats();
  const int nvtx_depth = static_cast<int>(HostEventProcessor::kMaxNvtxNesting) + 10;
  for (int i = 0; i < nvtx_depth; ++i) {
    r.push_back(rec(HostRecType::kNvtxPush, ++t, i % 2 == 0 ? "DataLoader" : "aten::mm", 0, 1));
  }
  for (int i = 0; i < nvtx_depth; ++i) r.push_back(rec(HostRecType::kNvtxPop, ++t, nullptr, 0, 1));
  p.process(r, out, nullptr, stats);
  EXPECT_EQ(stats.get(Stat::host_ranges_dropped), 5);
  EXPECT_EQ(out.ranges.size(), HostEventProcessor::kMaxNvtxNesting / 2);
  EXPECT_EQ(out.ranges.back().end, t);  // the outermost DataLoader range, paired

  // nvtxRangeStart ranges open at once.
  r.clear();
  out.clear();
  stats = Stats();
  const int open = static_cast<int>(HostEventProcessor::kMaxStartedRanges) + 7;
  for (int i = 0; i < open; ++i) {
    TimedRecord s = rec(HostRecType::kNvtxStart, ++t, "DataLoader", i + 1);
    r.push_back(s);
  }
  p.process(r, out, nullptr, stats);
  EXPECT_EQ(stats.get(Stat::host_ranges_dropped), 7);
}

// A site table at its cap counts what it leaves out (call-site samples, not step data: info).
TEST(NativeSites, SamplesBeyondTheSiteCapAreCounted) {
  SiteTable sites;
  int dropped = 0;
  for (uint64_t i = 0; i < SiteTable::kMaxSites + 5; ++i) {
    const uint64_t frames[] = {0x1000 + 16 * i};
    if (!sites.add(SiteKind::kSync, frames, 1, 10)) ++dropped;
  }
  EXPECT_EQ(dropped, 5);
  EXPECT_EQ(sites.size(), SiteTable::kMaxSites);
  const uint64_t known[] = {0x1000};
  EXPECT_TRUE(sites.add(SiteKind::kSync, known, 1, 10));  // a known site is still counted

  NameTable names;
  HostEventProcessor p(names, NamePatterns(std::vector<std::string>{}),
                       NamePatterns(std::vector<std::string>{}));
  TimedRecord st = rec(HostRecType::kStack, 1, nullptr, 100);
  st.frames[0] = 0xdead0;
  st.nframes = 1;
  std::vector<TimedRecord> r = {st};
  EventBatch out;
  Stats stats;
  p.process(r, out, &sites, stats);
  EXPECT_EQ(stats.get(Stat::native_sites_dropped), 1);
  EXPECT_EQ(stat_info(Stat::native_sites_dropped).severity, StatSeverity::kInfo);
}

}  // namespace
}  // namespace gpuacct::inject
