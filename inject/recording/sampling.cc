#include "inject/recording/sampling.h"

#include <atomic>

#include "cupti_hooks/collector.h"
#include "inject/clock.h"
#include "inject/recording/host_events.h"
#include "inject/recording/recorder.h"

namespace gpuacct::inject {

StepSampler::Decision StepSampler::next_step() {
  Decision d;
  if (every_ <= 1) return d;
  const int64_t index = next_index_++;
  d.traced = index % every_ == every_ - 1;
  d.switch_on = d.traced && !tracing_;
  d.switch_off = !d.traced && tracing_;
  tracing_ = d.traced;
  return d;
}

namespace {
std::atomic<int> g_every{1};
// Steps are process-wide: marks from several threads are serialised here (once per step,
// not per launch).
std::mutex g_mu;
StepSampler g_sampler;
}  // namespace

void configure_sampling(int every) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_sampler = StepSampler(every);
  g_every.store(g_sampler.every(), std::memory_order_release);
}

int sampling_every() {
  return g_every.load(std::memory_order_acquire);
}

uint8_t begin_sampled_step(int64_t* ts) {
  // The first mark of a process starts the library, which reads GPUACCT_SAMPLE: before that
  // no step may be counted, or every index would be one off.
  if (!start_lazily()) return 0;
  if (g_every.load(std::memory_order_acquire) <= 1) return 0;
  std::lock_guard<std::mutex> lock(g_mu);
  const StepSampler::Decision d = g_sampler.next_step();
  cupti::Collector& collector = cupti::Collector::instance();
  if (d.switch_on) {
    collector.set_tracing(true);
    *ts = now_ns();
  } else if (d.switch_off) {
    collector.set_tracing(false);
  }
  return d.traced ? 0 : kStepUntracedKind;
}

}  // namespace gpuacct::inject
