// The collective identity of last resort: NCCL kernels numbered in order per stream, for runs
// where no NCCL profiler-plugin event names the communicator and sequence number (older NCCL,
// a plugin refused, recordings without plugin events, traces without collective args).
//
//   - an NCCL kernel is a GpuOp with collective != kNone (the importers classify kernel names
//     with analysis/model/nccl_names.h);
//   - the rank's NCCL streams, keyed by (device, stream), are numbered 0, 1, ... in the order
//     of their first NCCL kernel's start; comm_hash = kernel_order_comm_hash(that position);
//   - seq = the kernel's index on its stream, in start order (0-based);
//   - gpu_start / gpu_end = the kernel's; host_enqueue = the start of the launch call with its
//     correlation id when that call was seen (else 0); source = kKernelOrder.
// Assumption (said in the rows file's identity note): every rank launches one communicator's
// collectives in the same order on one stream, and its NCCL streams begin in the same order.
// Kernels of one stream run one after another, so start order is launch order there.
//
// Streaming: an EventSink (tee it beside the accountant).  Kernels may arrive in any order;
// they are numbered in start order, so each is held until the watermark (on_watermark: every
// event that ended before it was delivered) passes its end -- no kernel that started before it
// on any stream can still come -- or until finish().  Work per event is O(log held).  Memory is
// bounded: over `held_op_limit` held kernels the earliest is numbered at once (counted: a
// kernel that comes later than that and started before it breaks the order), and launch calls
// are kept for `launch_horizon_ns` behind the watermark, at most `launch_limit` of them.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/model/collective.h"
#include "analysis/model/event_sink.h"
#include "analysis/model/flat_map.h"

namespace gpuacct {

// The communicator hash of the kernel-order stream at `position`: the same on every rank.
uint64_t kernel_order_comm_hash(int64_t position);

struct KernelOrderOptions {
  size_t held_op_limit = size_t{1} << 20;
  size_t launch_limit = size_t{1} << 21;
  TimeNs launch_horizon_ns = 60'000'000'000;  // GPU records come at most this late
};

struct KernelOrderCounts {
  int64_t kernels = 0;          // NCCL kernels numbered
  int64_t streams = 0;          // NCCL streams seen
  int64_t released_early = 0;   // numbered before the watermark passed (held_op_limit)
  int64_t out_of_order = 0;     // came after a later kernel of their stream was numbered
  int64_t host_enqueue_known = 0;
};

class KernelOrderIdentity final : public EventSink {
 public:
  using Sink = std::function<void(const CollectiveRecord&)>;
  explicit KernelOrderIdentity(Sink sink, KernelOrderOptions options = {});

  void on_gpu_op(const GpuOp& op) override;
  void on_api_call(const HostApiCall& call) override;
  // A launch (correlation id != 0) whose call started at `start`: what on_api_call keeps of a
  // launch call, for a source that knows only that (a trace's unidentified kernels,
  // analysis/input/input_collectives.cc).
  void add_launch(uint64_t correlation_id, TimeNs start, TimeNs end = 0);
  void on_range(const HostRange&) override {}
  void on_marker(const Marker&) override {}
  void on_watermark(TimeNs watermark) override;
  // Numbers and emits every kernel still held.
  void finish();

  const KernelOrderCounts& counts() const { return counts_; }

 private:
  struct StreamKey {
    uint16_t device;
    uint32_t stream;
    bool operator==(const StreamKey& o) const { return device == o.device && stream == o.stream; }
  };
  struct StreamKeyHash {
    size_t operator()(const StreamKey& k) const {
      return std::hash<uint64_t>()((uint64_t{k.device} << 32) | k.stream);
    }
  };
  struct Stream {
    int64_t position = 0;
    uint64_t next_seq = 0;
    TimeNs last_start = 0;
  };
  void release_one();
  void forget_launches(TimeNs before);

  Sink sink_;
  KernelOrderOptions options_;
  KernelOrderCounts counts_;
  std::vector<GpuOp> held_;  // min-heap by (start, device, stream)
  std::unordered_map<StreamKey, Stream, StreamKeyHash> streams_;
  FlatMap64<TimeNs> launch_start_;                     // by correlation id (never 0)
  std::deque<std::pair<TimeNs, uint64_t>> launches_;   // (end, correlation id), arrival order
};

}  // namespace gpuacct
