#include "analysis/input/input_collectives.h"

#include <utility>

namespace gpuacct {

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
      // A trace's NCCL kernels without args reach the kernel order only from here, with their
      // launch's start from the trace's one launch table (KinetoCollectives').
      [this](const GpuOp& op, TimeNs host_enqueue) {
        if (host_enqueue != 0) kernel_order_.add_launch(op.correlation_id, host_enqueue);
        kernel_order_.on_gpu_op(op);
      });
}

InputCollectives::~InputCollectives() = default;

EventSink* InputCollectives::events() {
  if (kineto_) return kineto_.get();  // the launch calls, for the host enqueue
  return &kernel_order_;
}

int64_t InputCollectives::over_limit() const {
  return kineto_ ? kineto_->dropped() + kineto_->launches_dropped() : 0;
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
