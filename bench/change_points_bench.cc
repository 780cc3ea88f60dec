// Change points over long runs (docs/change_points.md, *Cost*): find_change_points on a
// series of N steps with five walls -- the step-time search, the periodic rule and the five
// walls' own searches.  Run alone for a clean peak RSS:
//   build/bench/change_points_bench --benchmark_filter='BM_ChangePoints/1000000'
//   BM_ChangePoints/N/0: flat noise (PELT's worst case: nothing is pruned inside a segment)
//   BM_ChangePoints/N/1: a data-wall shift at 60% of the run and a 2 s spike every 500th step
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include <random>

#include "analysis/report/change_points.h"

namespace gpuacct {
namespace {

long peak_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

StepSeries series(size_t n, bool planted) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> noise(0.0, 0.9);
  StepSeries s;
  s.step_index.reserve(n);
  s.step_ms.reserve(n);
  s.wall_ms.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    WallMs w{};
    w[static_cast<size_t>(Wall::kCompute)] = 60 + noise(rng);
    w[static_cast<size_t>(Wall::kData)] = 20 + noise(rng) + (planted && i >= n * 6 / 10 ? 8 : 0);
    w[static_cast<size_t>(Wall::kOther)] = 10 + noise(rng) + (planted && i % 500 == 499 ? 2000 : 0);
    double sum = 0;
    for (double v : w) sum += v;
    s.step_index.push_back(static_cast<int64_t>(i));
    s.step_ms.push_back(sum);
    s.wall_ms.push_back(w);
  }
  return s;
}

void BM_ChangePoints(benchmark::State& state) {
  const StepSeries s = series(static_cast<size_t>(state.range(0)), state.range(1) != 0);
  size_t shifts = 0, periodic = 0;
  for (auto _ : state) {
    const ChangePoints cp = find_change_points(s);
    shifts = cp.shifts.size();
    periodic = cp.periodic.size();
    benchmark::DoNotOptimize(cp.segments.data());
  }
  state.counters["shifts"] = static_cast<double>(shifts);
  state.counters["periodic"] = static_cast<double>(periodic);
  state.counters["peak_rss_MiB"] = static_cast<double>(peak_rss_kb()) / 1024.0;
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ChangePoints)
    ->Args({10'000, 1})
    ->Args({100'000, 1})
    ->Args({1'000'000, 0})
    ->Args({1'000'000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace gpuacct

BENCHMARK_MAIN();
