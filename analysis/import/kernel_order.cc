#include "analysis/import/kernel_order.h"

#include <algorithm>
#include <charconv>
#include <tuple>

#include "analysis/model/stable_hash.h"

namespace gpuacct {

namespace {

// Heap order: the earliest start on top; ties by device, stream, then the op itself, so the
// numbering does not depend on arrival order.
bool starts_later(const GpuOp& a, const GpuOp& b) {
  return std::tie(a.start, a.device, a.stream, a.end, a.correlation_id) >
         std::tie(b.start, b.device, b.stream, b.end, b.correlation_id);
}

}  // namespace

uint64_t kernel_order_comm_hash(int64_t position) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof(digits), position);
  return stable_hash64(std::string_view(digits, static_cast<size_t>(result.ptr - digits)),
                       stable_hash64("kernel_order:"));
}

KernelOrderIdentity::KernelOrderIdentity(Sink sink, KernelOrderOptions options)
    : sink_(std::move(sink)), options_(options) {
  options_.held_op_limit = std::max<size_t>(options_.held_op_limit, 1);
}

void KernelOrderIdentity::on_gpu_op(const GpuOp& op) {
  if (!op.is_communication()) return;
  held_.push_back(op);
  std::push_heap(held_.begin(), held_.end(), starts_later);
  if (held_.size() > options_.held_op_limit) {
    ++counts_.released_early;
    release_one();
  }
}

void KernelOrderIdentity::on_api_call(const HostApiCall& call) {
  if (call.kind != HostApiKind::kLaunch) return;
  add_launch(call.correlation_id, call.start, call.end);
}

void KernelOrderIdentity::add_launch(uint64_t correlation_id, TimeNs start, TimeNs end) {
  if (correlation_id == 0) return;
  launch_start_[correlation_id] = start;
  launches_.emplace_back(end, correlation_id);
  while (launches_.size() > options_.launch_limit) {
    launch_start_.erase(launches_.front().second);
    launches_.pop_front();
  }
}

void KernelOrderIdentity::on_watermark(TimeNs watermark) {
  // A kernel that ended before the watermark has come, and so has every kernel of its stream
  // that started before it (they ended before it started); a kernel of another stream that
  // started earlier but is still running holds the ones after it (the heap is by start).
  while (!held_.empty() && held_.front().end < watermark) release_one();
  const TimeNs horizon = saturating_sub(watermark, options_.launch_horizon_ns);
  while (!launches_.empty() && launches_.front().first < horizon) {
    launch_start_.erase(launches_.front().second);
    launches_.pop_front();
  }
}

void KernelOrderIdentity::finish() {
  while (!held_.empty()) release_one();
  launch_start_.clear();
  launches_.clear();
}

void KernelOrderIdentity::release_one() {
  std::pop_heap(held_.begin(), held_.end(), starts_later);
  const GpuOp op = held_.back();
  held_.pop_back();
  auto [it, inserted] = streams_.try_emplace(StreamKey{op.device, op.stream});
  Stream& stream = it->second;
  if (inserted) {
    stream.position = counts_.streams++;
  } else if (op.start < stream.last_start) {
    ++counts_.out_of_order;
  }
  stream.last_start = std::max(stream.last_start, op.start);

  CollectiveRecord record;
  record.comm_hash = kernel_order_comm_hash(stream.position);
  record.seq = stream.next_seq++;
  record.gpu_start = op.start;
  record.gpu_end = op.end;
  record.correlation_id = op.correlation_id;
  record.device = op.device;
  record.stream = op.stream;
  record.type = op.collective;
  record.source = CollectiveSource::kKernelOrder;
  if (op.correlation_id != 0) {
    if (const TimeNs* launch = launch_start_.find(op.correlation_id)) {
      record.host_enqueue = *launch;
      ++counts_.host_enqueue_known;
    }
  }
  ++counts_.kernels;
  if (sink_) sink_(record);
}

}  // namespace gpuacct
