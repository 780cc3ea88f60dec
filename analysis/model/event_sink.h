// Where sources push events.  StepAccountant is one; a tee lets an importer feed the
// accountant and whole-trace totals (or a timeline writer) from a single pass.
#pragma once

#include <vector>

#include "analysis/model/events.h"

namespace gpuacct {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_gpu_op(const GpuOp& op) = 0;
  virtual void on_api_call(const HostApiCall& call) = 0;
  virtual void on_range(const HostRange& range) = 0;
  virtual void on_marker(const Marker& marker) = 0;
  // See StepAccountant: every event ending before `watermark` has been delivered.
  virtual void on_watermark(TimeNs watermark) { (void)watermark; }
  // A hardware counter sample (docs/counters.md); sinks that do not use counters ignore it.
  virtual void on_counter_sample(const CounterSample& sample) { (void)sample; }
};

// Forwards every event to each sink in order.
class TeeSink final : public EventSink {
 public:
  explicit TeeSink(std::vector<EventSink*> sinks) : sinks_(std::move(sinks)) {}
  void on_gpu_op(const GpuOp& op) override {
    for (auto* s : sinks_) s->on_gpu_op(op);
  }
  void on_api_call(const HostApiCall& call) override {
    for (auto* s : sinks_) s->on_api_call(call);
  }
  void on_range(const HostRange& range) override {
    for (auto* s : sinks_) s->on_range(range);
  }
  void on_marker(const Marker& marker) override {
    for (auto* s : sinks_) s->on_marker(marker);
  }
  void on_watermark(TimeNs watermark) override {
    for (auto* s : sinks_) s->on_watermark(watermark);
  }
  void on_counter_sample(const CounterSample& sample) override {
    for (auto* s : sinks_) s->on_counter_sample(sample);
  }

 private:
  std::vector<EventSink*> sinks_;
};

}  // namespace gpuacct
