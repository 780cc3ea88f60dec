// Benchmarks of the analysis core.
//   BM_AccountEvents: events classified per second on one core (target >= 20 M/s), replaying
//     a recorded synthetic stream (out-of-order batches + watermarks, as a live source sends).
//   BM_StreamMemory: a 10 M-event stream generated on the fly; reports the largest number of
//     events the accountant held at once and the process's peak RSS, for 1 M and 10 M events:
//     flat in the stream's length means the two agree.
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include <fstream>
#include <string>
#include <vector>

#include "analysis/accounting/step_accountant.h"
#include "analysis/import/synthetic.h"

namespace gpuacct {
namespace {

// Records the exact order of events and watermarks a source produced.
class Tape final : public EventSink {
 public:
  struct Entry {
    uint8_t kind;  // 0 op, 1 call, 2 range, 3 marker, 4 watermark
    uint32_t index;
  };
  std::vector<Entry> order;
  EventBatch events;
  std::vector<TimeNs> watermarks;
  void on_gpu_op(const GpuOp& op) override { push(0, events.gpu_ops, op); }
  void on_api_call(const HostApiCall& c) override { push(1, events.api_calls, c); }
  void on_range(const HostRange& r) override { push(2, events.ranges, r); }
  void on_marker(const Marker& m) override { push(3, events.markers, m); }
  void on_watermark(TimeNs w) override { push(4, watermarks, w); }

  void replay(EventSink& s) const {
    for (const Entry& e : order) {
      switch (e.kind) {
        case 0:
          s.on_gpu_op(events.gpu_ops[e.index]);
          break;
        case 1:
          s.on_api_call(events.api_calls[e.index]);
          break;
        case 2:
          s.on_range(events.ranges[e.index]);
          break;
        case 3:
          s.on_marker(events.markers[e.index]);
          break;
        default:
          s.on_watermark(watermarks[e.index]);
          break;
      }
    }
  }

 private:
  template <typename V, typename T>
  void push(uint8_t kind, V& v, const T& x) {
    order.push_back({kind, static_cast<uint32_t>(v.size())});
    v.push_back(x);
  }
};

const Tape& bench_tape() {
  static Tape* tape = [] {
    auto* t = new Tape;
    NameTable names;
    auto spec = SyntheticSpec::preset("bench");
    spec->steps = 500;  // ~1 M events
    generate_synthetic(*spec, names, *t);
    return t;
  }();
  return *tape;
}

void BM_AccountEvents(benchmark::State& state) {
  const Tape& tape = bench_tape();
  const int64_t events = static_cast<int64_t>(tape.events.size());
  for (auto _ : state) {
    StepAccountant acc;
    tape.replay(acc);
    acc.finish();
    benchmark::DoNotOptimize(acc.rows().data());
  }
  state.SetItemsProcessed(state.iterations() * events);
  state.counters["events_per_run"] = static_cast<double>(events);
}
BENCHMARK(BM_AccountEvents)->Unit(benchmark::kMillisecond)->MinTime(2.0);

long peak_rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

// Feeds the accountant directly from the generator and tracks what it holds.
class Probe final : public EventSink {
 public:
  explicit Probe(StepAccountant& acc) : acc_(acc) {}
  void on_gpu_op(const GpuOp& op) override { acc_.on_gpu_op(op); }
  void on_api_call(const HostApiCall& c) override { acc_.on_api_call(c); }
  void on_range(const HostRange& r) override { acc_.on_range(r); }
  void on_marker(const Marker& m) override { acc_.on_marker(m); }
  void on_watermark(TimeNs w) override {
    acc_.on_watermark(w);
    max_retained = std::max(max_retained, acc_.retained_events());
  }
  size_t max_retained = 0;

 private:
  StepAccountant& acc_;
};

void BM_StreamMemory(benchmark::State& state) {
  const int steps = static_cast<int>(state.range(0));
  size_t max_retained = 0;
  uint64_t events = 0;
  for (auto _ : state) {
    NameTable names;
    StepAccountant acc;
    acc.set_row_sink(nullptr);
    Probe probe(acc);
    auto spec = SyntheticSpec::preset("bench");
    spec->steps = steps;
    events = generate_synthetic(*spec, names, probe);
    acc.finish();
    max_retained = probe.max_retained;
  }
  state.counters["events"] = static_cast<double>(events);
  state.counters["max_retained_events"] = static_cast<double>(max_retained);
  state.counters["peak_rss_MiB"] = static_cast<double>(peak_rss_kb()) / 1024.0;
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(events));
}
// ~2 k events per step: 500 steps = 1 M events, 5000 steps = 10 M events.
BENCHMARK(BM_StreamMemory)->Arg(500)->Arg(5000)->Unit(benchmark::kMillisecond)->Iterations(1);

// A whole trace delivered before finish() (what the trace importer does, and what the
// injected library does when a run ends with steps still pending): one pass finds each op's
// owner, so the cost stays linear in the number of steps.
void BM_FinishBacklog(benchmark::State& state) {
  Tape tape;
  NameTable names;
  auto spec = SyntheticSpec::preset("bench");
  spec->steps = static_cast<int>(state.range(0));
  spec->shuffle_batch = 0;
  generate_synthetic(*spec, names, tape);
  for (auto _ : state) {
    StepAccountant acc;
    tape.replay(acc);
    acc.finish();
    benchmark::DoNotOptimize(acc.rows().data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(tape.events.size()));
}
BENCHMARK(BM_FinishBacklog)->Arg(50)->Arg(500)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpuacct

BENCHMARK_MAIN();
