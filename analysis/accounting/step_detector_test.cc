// StepDetector: exact step counts and boundaries on planted loops.
#include "analysis/accounting/step_detector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace gpuacct {
namespace {

struct Loop {
  std::vector<DetectorToken> tokens;
  std::vector<TimeNs> step_begin;  // planted
  uint64_t corr = 1;
  TimeNs t = 1'000'000;

  void host(TimeNs ns) { t += ns; }
  void op(NameId name, uint32_t thread = 1) {
    tokens.push_back({t, t + 4'000, corr++, name, thread, false});
    t += 4'000;
  }
  void sync(NameId name, TimeNs wait) {
    tokens.push_back({t, t + wait, corr++, name, 1, true});
    t += wait;
  }
};

std::vector<Marker> run(const std::vector<DetectorToken>& tokens, size_t chunks, bool shuffle) {
  std::vector<DetectorToken> v = tokens;
  if (shuffle) {
    std::mt19937 rng(7);
    std::shuffle(v.begin(), v.end(), rng);
  }
  StepDetector d;
  std::vector<Marker> out;
  const size_t per = (v.size() + chunks - 1) / chunks;
  TimeNs last_end = 0;
  for (const auto& t : tokens) last_end = std::max(last_end, t.end);
  for (size_t c = 0; c < chunks; ++c) {
    const size_t b = c * per, e = std::min(v.size(), b + per);
    for (size_t i = b; i < e; ++i) d.add(v[i]);
    // Watermark: the earliest end among what has not been added yet (shuffled input).
    TimeNs w = last_end + 1;
    for (size_t i = e; i < v.size(); ++i) w = std::min(w, v[i].end);
    auto m = d.poll(w, false);
    out.insert(out.end(), m.begin(), m.end());
  }
  auto m = d.poll(0, true);
  out.insert(out.end(), m.begin(), m.end());
  return out;
}

TEST(StepDetector, SameKernelRepeatedWithOneSyncPerStep) {
  // launch_bound-like: K identical kernels then a stream sync; no host work.
  Loop l;
  const NameId k = 1, sync = 2;
  for (int s = 0; s < 20; ++s) {
    l.step_begin.push_back(l.t);
    for (int i = 0; i < 50; ++i) l.op(k);
    l.sync(sync, 10'000);
  }
  for (size_t chunks : {1u, 7u}) {
    auto m = run(l.tokens, chunks, false);
    ASSERT_EQ(m.size(), 21u) << chunks;  // 20 steps
    for (size_t i = 0; i < 20; ++i) EXPECT_EQ(m[i].ts, l.step_begin[i]) << i;
    EXPECT_EQ(m[20].ts, l.t);
  }
}

TEST(StepDetector, DataWaitAtTopOfStepStaysInTheStep) {
  Loop l;
  const NameId gemm = 1, relu = 2, copy = 3, sync = 4;
  l.op(9);  // init kernel before the loop
  l.host(5'000'000);
  for (int s = 0; s < 12; ++s) {
    l.step_begin.push_back(l.t);
    l.host(30'000'000);  // data loading
    l.op(copy);
    for (int i = 0; i < 5; ++i) {
      l.op(gemm);
      l.op(relu);
    }
    l.sync(sync, 2'000'000);
  }
  auto m = run(l.tokens, 5, true);
  ASSERT_EQ(m.size(), 13u);
  // Step 0 starts one typical host pause before its first op: exactly the planted begin.
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(m[i].ts, l.step_begin[i]) << i;
}

TEST(StepDetector, InterleavedThreadsStillLock) {
  // Two worker threads launch in a different interleaving every step; one device sync.
  Loop l;
  std::mt19937 rng(3);
  for (int s = 0; s < 10; ++s) {
    l.step_begin.push_back(l.t);
    std::vector<int> order = {1, 1, 1, 2, 2, 2};
    std::shuffle(order.begin(), order.end(), rng);
    for (int o : order) l.op(static_cast<NameId>(10 + o), static_cast<uint32_t>(o + 1));
    l.sync(99, 50'000);
  }
  auto m = run(l.tokens, 3, false);
  ASSERT_EQ(m.size(), 11u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(m[i].ts, l.step_begin[i]) << i;
}

// Issue 8, item 4: sync calls without a correlation id (order 0) used to sort before every
// launch, and once locked every later sync was "older" than the last one consumed: fed live,
// in chunks, every step after the lock was lost.  They take their place by host time.
TEST(StepDetector, UncorrelatedSyncsEndEveryStepLive) {
  Loop l;
  const NameId k = 1, sync = 2;
  for (int s = 0; s < 20; ++s) {
    l.step_begin.push_back(l.t);
    for (int i = 0; i < 5; ++i) l.op(k + static_cast<NameId>(i) * 10);
    l.sync(sync, 10'000);
    l.tokens.back().order = 0;  // the source could not correlate the sync call
    l.host(200'000);
  }
  for (size_t chunks : {1u, 7u}) {
    auto m = run(l.tokens, chunks, false);
    ASSERT_EQ(m.size(), 21u) << chunks;  // 20 steps
    for (size_t i = 1; i < 20; ++i) EXPECT_EQ(m[i].ts, l.step_begin[i] - 200'000) << i;
  }
}

TEST(StepDetector, NoRepetitionGivesUp) {
  Loop l;
  for (int i = 0; i < 200; ++i) l.op(static_cast<NameId>(i + 1));
  auto m = run(l.tokens, 1, false);
  EXPECT_TRUE(m.empty());
}

}  // namespace
}  // namespace gpuacct
