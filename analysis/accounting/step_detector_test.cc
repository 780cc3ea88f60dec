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

// ---- Issue 27: set-up is not a step, steps end after the optimizer ----------------------------

// A generated PyTorch-like program: set-up (parameters copied in one by one, each with a sync;
// init kernels), then `iters` iterations of [input copy] forward backward, `syncs` x (D2H copy,
// sync), [a clipping run], the optimizer's run of multi-tensor kernels, then host time at the
// loop top.  Returns the planted end of every iteration (the end of its last optimizer kernel's
// launch call).
struct Program {
  std::vector<DetectorToken> tokens;
  std::vector<TimeNs> iter_end;
};

Program generate(std::mt19937_64& rng, int iters, int syncs, bool input_copy, bool clip) {
  Program p;
  uint64_t corr = 1;
  TimeNs t = 1'000'000;
  auto u = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto op = [&](NameId name, bool copy, bool optimizer) {
    DetectorToken k;
    k.start = t;
    k.end = t + u(3'000, 9'000);
    k.order = corr++;
    k.name = name;
    k.thread = 1;
    k.is_copy = copy;
    k.is_optimizer = optimizer;
    p.tokens.push_back(k);
    t = k.end + u(0, 20'000);  // framework overhead between launches
  };
  auto sync = [&](TimeNs wait) {
    DetectorToken k;
    k.start = t;
    k.end = t + wait;
    k.order = corr++;
    k.name = 900;
    k.thread = 1;
    k.is_sync = true;
    p.tokens.push_back(k);
    t = k.end + u(1'000, 30'000);
  };
  const NameId h2d = 800, d2h = 801, gemm = 10, relu = 11, gemm_bwd = 12, relu_bwd = 13,
               loss = 14, clip_norm = 700, clip_mul = 701, opt_a = 710, opt_b = 711;
  // Set-up: many parameters copied in, each with a sync; a few init kernels once each.
  const int params = static_cast<int>(u(20, 400));
  for (int i = 0; i < params; ++i) {
    op(h2d, true, false);
    sync(u(5'000, 50'000));
  }
  for (int i = 0; i < 5; ++i) op(static_cast<NameId>(500 + i), false, false);
  t += u(1'000'000'000, 6'000'000'000);  // context, cuBLAS, autotuning
  const int layers = static_cast<int>(u(3, 30));
  const int chunks = static_cast<int>(u(4, 9));  // the optimizer's launches: the same each step
  for (int it = 0; it < iters; ++it) {
    if (input_copy) op(h2d, true, false);
    for (int l = 0; l < layers; ++l) {
      op(gemm, false, false);
      op(relu, false, false);
    }
    op(loss, false, false);
    for (int l = 0; l < layers; ++l) {
      op(relu_bwd, false, false);
      op(gemm_bwd, false, false);
    }
    for (int s = 0; s < syncs; ++s) {
      op(d2h, true, false);
      sync(u(100'000, 2'000'000));
    }
    if (clip) {
      op(clip_norm, false, true);
      op(relu, false, false);  // a non-optimizer kernel between the clipping and the step
      op(clip_mul, false, true);
    }
    for (int c = 0; c < chunks; ++c) op(opt_a, false, true);
    for (int c = 0; c < 3; ++c) op(opt_b, false, true);
    p.iter_end.push_back(p.tokens.back().end);
    t += u(200'000, 300'000'000);  // loop top: data loading, logging
  }
  return p;
}

// Fed in random chunks, the watermark trailing what was fed: every boundary after the first is
// the planted end of an iteration, one per iteration, whatever the set-up, the number of syncs
// per iteration or the clipping.  The first step is iteration 0 or 1 (where it begins depends
// on the typical pause); none comes from set-up.
TEST(StepDetector, GeneratedLoopsEndAfterTheOptimizerWhateverSetUpAndSyncs) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    const int iters = static_cast<int>(std::uniform_int_distribution<int>(8, 30)(rng));
    const int syncs = seed % 3 == 0 ? 10 : 1;
    const Program p = generate(rng, iters, syncs, seed % 2 == 0, seed % 5 == 0);
    const size_t chunks = 1 + seed % 9;
    const auto m = run(p.tokens, chunks, /*shuffle=*/seed % 4 == 1);
    ASSERT_GE(m.size(), static_cast<size_t>(iters)) << "seed " << seed;
    ASSERT_LE(m.size(), static_cast<size_t>(iters) + 1) << "seed " << seed;
    // The boundaries after the first: the planted iteration ends, in order, the last ones.
    const size_t offset = p.iter_end.size() - (m.size() - 1);
    for (size_t i = 1; i < m.size(); ++i)
      EXPECT_EQ(m[i].ts, p.iter_end[offset + i - 1]) << "seed " << seed << " boundary " << i;
    // No boundary inside set-up: the first is at or after iteration 0's first token.
    EXPECT_GT(m[0].ts, p.tokens.front().end) << "seed " << seed;
  }
}

TEST(StepDetector, OneSyncOrTenGiveTheSameSteps) {
  std::vector<std::vector<Marker>> got;
  for (int syncs : {1, 10}) {
    std::mt19937_64 rng(77);
    const Program p = generate(rng, 20, syncs, true, false);
    const auto m = run(p.tokens, 5, false);
    ASSERT_GE(m.size(), 20u);
    std::vector<Marker> ends(m.begin() + 1, m.end());
    // Steps end where the iterations do, in both.
    for (size_t i = 0; i < ends.size(); ++i)
      EXPECT_EQ(ends[i].ts, p.iter_end[p.iter_end.size() - ends.size() + i]) << syncs;
    got.push_back(ends);
  }
  EXPECT_EQ(got[0].size(), got[1].size());
}

TEST(StepDetector, CopiesAndSyncsAloneAreSetUpNotALoop) {
  // model.to("cuda") of 400 parameters: a copy and a sync each, nothing else.  No step.
  Loop l;
  for (int i = 0; i < 400; ++i) {
    l.tokens.push_back({l.t, l.t + 4'000, l.corr++, 5, 1, false, true, false});
    l.t += 4'000;
    l.sync(6, 20'000);
  }
  for (size_t chunks : {1u, 7u}) EXPECT_TRUE(run(l.tokens, chunks, false).empty()) << chunks;
}

TEST(StepDetector, NoRepetitionGivesUp) {
  Loop l;
  for (int i = 0; i < 200; ++i) l.op(static_cast<NameId>(i + 1));
  auto m = run(l.tokens, 1, false);
  EXPECT_TRUE(m.empty());
}

}  // namespace
}  // namespace gpuacct
