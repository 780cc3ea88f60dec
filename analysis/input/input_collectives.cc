#include "analysis/input/input_collectives.h"

#include <utility>

namespace gpuacct {

// A trace's NCCL kernels reach the kernel order only through KinetoCollectives (those without
// args); it needs the launch calls for their host enqueue, and nothing else of the events.
class InputCollectives::LaunchCallsOnly final : public EventSink {
 public:
  explicit LaunchCallsOnly(EventSink& target) : target_(target) {}
  void on_gpu_op(const GpuOp&) override {}
  void on_api_call(const HostApiCall& call) override { target_.on_api_call(call); }
  void on_range(const HostRange&) override {}
  void on_marker(const Marker&) override {}

 private:
  EventSink& target_;
};

InputCollectives::InputCollectives(bool kineto_trace, Sink sink)
    : sink_(std::move(sink)), kernel_order_([this](const CollectiveRecord& r) {
        ++records_;
        if (sink_) sink_(r);
      }) {
  if (!kineto_trace) return;
  kineto_ = std::make_unique<KinetoCollectives>(
      [this](const CollectiveRecord& r) {
        ++records_;
        if (sink_) sink_(r);
      },
      [this](const GpuOp& op) { kernel_order_.on_gpu_op(op); });
  launches_ = std::make_unique<LaunchCallsOnly>(kernel_order_);
  tee_ = std::make_unique<TeeSink>(std::vector<EventSink*>{kineto_.get(), launches_.get()});
}

InputCollectives::~InputCollectives() = default;

EventSink* InputCollectives::events() {
  if (tee_) return tee_.get();
  return &kernel_order_;
}

CollectiveIdentity InputCollectives::finish(int own_rank) {
  if (kineto_) kineto_->finish(own_rank);
  kernel_order_.finish();
  CollectiveIdentity out;
  out.records = records_;
  const int64_t by_order = kernel_order_.counts().kernels;
  const std::string order_rule =
      "numbered in order per stream (assumes every rank launches a communicator's collectives "
      "in the same order on one stream)";
  if (kineto_ && kineto_->records() > 0) {
    out.source = CollectiveSource::kKineto;
    if (by_order > 0)
      out.note = std::to_string(by_order) + " collective kernels without collective args " +
                 order_rule;
  } else if (by_order > 0) {
    out.source = CollectiveSource::kKernelOrder;
    out.note = std::string(kineto_ ? "the trace carries no collective args (record_param_comms)"
                                   : "a recording holds no NCCL profiler-plugin events") +
               ": NCCL kernels " + order_rule;
  }
  return out;
}

}  // namespace gpuacct
