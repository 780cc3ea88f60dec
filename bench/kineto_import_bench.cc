// Kineto importer throughput and memory.
//
//   build/bench/kineto_import_bench                      in-memory synthetic traces
//   GPUACCT_KINETO_BENCH_TRACE=/tmp/big.json
//       build/bench/kineto_import_bench --benchmark_filter=File   a real file
//       (scripts/gen_big_kineto_trace.py)
//
// Counters: events/s (trace events parsed), bytes/s (decompressed JSON), peak_rss_MiB
// (getrusage high-water mark of the whole process).
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "analysis/import/gzip_for_tests.h"
#include "analysis/accounting/step_accountant.h"
#include "analysis/import/kineto_importer.h"
#include "analysis/input/input.h"
#include "analysis/report/trace_totals.h"
#include "bench/kineto_trace_gen.h"

namespace gpuacct {
namespace {

using bench::CountingSink;

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

std::string make_trace(size_t events, size_t* count) {
  bench::KinetoTraceGen gen;
  std::string s = bench::KinetoTraceGen::header();
  s.reserve(events * 260);
  while (gen.events() < events) gen.append_op(s);
  s += bench::KinetoTraceGen::footer();
  *count = gen.events();
  return s;
}


const std::string& trace_text(size_t* count) {
  static size_t n = 0;
  static const std::string t = make_trace(1'000'000, &n);
  *count = n;
  return t;
}

void BM_ImportMemoryPlain(benchmark::State& state) {
  size_t n = 0;
  const std::string& t = trace_text(&n);
  for (auto _ : state) {
    NameTable names;
    Stats stats;
    CountingSink sink;
    auto r = import_kineto_buffer(t, names, sink, stats);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(sink.n);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(t.size()));
  state.counters["bytes_per_event"] = static_cast<double>(t.size()) / static_cast<double>(n);
}
BENCHMARK(BM_ImportMemoryPlain)->Unit(benchmark::kMillisecond);

void BM_ImportMemoryGzip(benchmark::State& state) {
  size_t n = 0;
  const std::string& t = trace_text(&n);
  static const std::string z = testing_support::gzip(t, 1);
  for (auto _ : state) {
    NameTable names;
    Stats stats;
    CountingSink sink;
    auto r = import_kineto_buffer(z, names, sink, stats);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(t.size()));
}
BENCHMARK(BM_ImportMemoryGzip)->Unit(benchmark::kMillisecond);

// The front door on a trace: importer, HTA totals, step detection, the accountant (what
// `gpuacct analyze` and `gpuacct timeline` run).
void BM_ImportMemoryFullPipeline(benchmark::State& state) {
  size_t n = 0;
  const std::string& t = trace_text(&n);
  for (auto _ : state) {
    NameTable names;
    const Input input = Input::from_buffer(t, "bench");
    auto r = account_input(input, AccountingConfig{}, names);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    benchmark::DoNotOptimize(r.ok() ? r->accountant->rows().size() : 0);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_ImportMemoryFullPipeline)->Unit(benchmark::kMillisecond);

// A trace file named by $GPUACCT_KINETO_BENCH_TRACE, read once; arg 1 = with TraceTotals.
void BM_ImportFile(benchmark::State& state) {
  const char* path = std::getenv("GPUACCT_KINETO_BENCH_TRACE");
  if (!path) {
    state.SkipWithError("set GPUACCT_KINETO_BENCH_TRACE=<trace.json[.gz]>");
    for (auto _ : state) {
    }
    return;
  }
  uint64_t events = 0;
  for (auto _ : state) {
    NameTable names;
    Stats stats;
    CountingSink sink;
    TraceTotals totals(names);
    TeeSink tee({&sink, &totals});
    EventSink& target = state.range(0) ? static_cast<EventSink&>(tee) : sink;
    auto r = import_kineto_trace(path, names, target, stats);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    if (state.range(0)) benchmark::DoNotOptimize(totals.compute().idle_us);
    // Trace events = mapped + skipped + unknown + ignored; count what the importer saw.
    events = sink.n;
  }
  state.counters["mapped_events"] = static_cast<double>(events);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_ImportFile)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace gpuacct

BENCHMARK_MAIN();
