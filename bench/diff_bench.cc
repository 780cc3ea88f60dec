// The run diff's cost (analysis/compare/run_diff.h; numbers in docs/diff.md).
//   BM_DiffRuns/N: diff_runs of two runs of N summary steps each (random walls around a
//     ~40 ms step), the default 2000 bootstrap resamples: what `gpuacct diff` spends after it
//     has read its inputs.  Reading a report is the front door's (measured with the CLI).
#include <benchmark/benchmark.h>

#include <random>

#include "analysis/compare/run_diff.h"

namespace gpuacct {
namespace {

DiffRun random_run(size_t steps, uint64_t seed, TimeNs data_extra_ns) {
  DiffRun run;
  run.label = "bench";
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<TimeNs> jitter(-1'000'000, 1'000'000);
  run.steps.reserve(steps);
  for (size_t i = 0; i < steps; ++i) {
    WallBreakdown w;
    w.compute = 10'000'000 + jitter(rng);
    w.communication = 2'000'000 + jitter(rng) / 4;
    w.data = 25'000'000 + data_extra_ns + jitter(rng);
    w.launch = 500'000 + jitter(rng) / 4;
    w.other = 2'000'000 + jitter(rng) / 4;
    run.steps.push_back(w);
  }
  return run;
}

void BM_DiffRuns(benchmark::State& state) {
  const auto steps = static_cast<size_t>(state.range(0));
  const DiffRun base = random_run(steps, 1, 0), next = random_run(steps, 2, 3'000'000);
  for (auto _ : state) {
    RunDiff d = diff_runs(base, next);
    benchmark::DoNotOptimize(d);
  }
  state.counters["steps_per_run"] = static_cast<double>(steps);
}
BENCHMARK(BM_DiffRuns)->Arg(1'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpuacct

BENCHMARK_MAIN();
