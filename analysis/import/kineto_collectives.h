// The collective instances of a PyTorch-profiler (Kineto) trace (analysis/model/collective.h).
//
// What traces carry (PyTorch's record_param_comms, libkineto's output_json):
//   - every collective the process group issues is a CPU op `record_param_comms` whose args
//     hold "Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size",
//     "Process Group Name", "Process Group Description", "Process Group Ranks" (newer PyTorch:
//     also "Rank", "Seq", "Src Rank" / "Dst Rank" for p2p) and whose "External id" its NCCL
//     kernel shares;
//   - newer libkineto copies those args onto the NCCL kernel itself.
// A collective kernel takes its own args when it has them, else those of the
// record_param_comms op with its External id ("wait" ops launch no kernel and are ignored).
//   comm_hash = stable_hash64 of the process group (its name and ranks; p2p ops a channel of
//               their own per pair of ranks when the trace names the peer);
//   seq       = the trace's "Seq" when present, else the instance's position among its
//               group's instances in enqueue order (every rank issues one group's collectives
//               in program order);
//   host_enqueue = the record_param_comms op's start (else the kernel's launch call's);
//   bytes     = nelems (in, for all-gather; out, for reduce-scatter; else the larger) × the
//               size of dtype, when dtype is known.
// Collective kernels with no args at all (older PyTorch, sampled traces) are handed to
// `unidentified` instead, in start order, with the start of their launch call (0 if unknown):
// the front door numbers them by kernel order (analysis/import/kernel_order.h), which needs
// no launch table of its own for a trace.
//
// Fed by the Kineto importer (KinetoImportOptions::collectives) with each record_param_comms
// op and each collective kernel, and as an EventSink (teed beside the accountant) with the
// launch calls.  Everything is held until finish(): a trace is read whole, and its collective
// kernels are few (thousands; at most `kernel_limit`, the rest counted in dropped()).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analysis/import/json_scanner.h"
#include "analysis/model/collective.h"
#include "analysis/model/event_sink.h"
#include "analysis/model/flat_map.h"
#include "analysis/model/segmented_vector.h"

namespace gpuacct {

// The collective args of one trace event, as the importer's scanner read them (views valid
// while the event is handled).  slot() says where an args key goes; nullptr = not one of them.
struct KinetoCommValues {
  json_scan::Value external_id, collective_name, in_nelems, out_nelems, dtype, group_size,
      pg_name, pg_desc, pg_ranks, rank, seq, src_rank, dst_rank;
  json_scan::Value* slot(std::string_view key);
};

class KinetoCollectives final : public EventSink {
 public:
  using Sink = std::function<void(const CollectiveRecord&)>;
  using KernelSink = std::function<void(const GpuOp&, TimeNs host_enqueue)>;
  KinetoCollectives(Sink sink, KernelSink unidentified, size_t kernel_limit = size_t{1} << 22);
  ~KinetoCollectives() override;

  // A record_param_comms CPU op [start, end).
  void on_param_comms(TimeNs start, const KinetoCommValues& args);
  // A kernel with op.collective != kNone, with whatever collective args it has.
  void on_collective_kernel(const GpuOp& op, const KinetoCommValues& args);
  // EventSink: only launch calls are used (the host enqueue of kernels without a CPU op).
  void on_gpu_op(const GpuOp&) override {}
  void on_api_call(const HostApiCall& call) override;
  void on_range(const HostRange&) override {}
  void on_marker(const Marker&) override {}

  // Matches, numbers and emits every instance.  `own_rank`: the trace's global rank (its
  // distributedInfo), -1 if unknown; it finds the rank inside a group from its ranks list.
  void finish(int own_rank);

  int64_t records() const { return records_; }            // emitted with the trace's identity
  int64_t unidentified() const { return unidentified_; }  // handed to `unidentified`
  int64_t dropped() const { return dropped_; }            // over kernel_limit
  int64_t launches_dropped() const { return launches_dropped_; }  // launch calls over it

 private:
  struct Args {
    bool any = false;
    std::string collective_name, dtype, pg_name, pg_desc, pg_ranks;
    int64_t in_nelems = -1, out_nelems = -1, group_size = -1, rank = -1, seq = -1;
    int64_t src_rank = -1, dst_rank = -1;
  };
  struct Kernel {
    GpuOp op;
    int64_t external_id = -1;
    Args args;  // its own (newer libkineto)
  };
  struct ParamComms {
    TimeNs start = 0;
    Args args;
  };
  static Args read_args(const KinetoCommValues& v);
  CollectiveRecord record_from(const Kernel& k, const Args& args, TimeNs host_enqueue,
                               int own_rank) const;

  Sink sink_;
  KernelSink unidentified_sink_;
  size_t kernel_limit_;
  std::vector<Kernel> kernels_;
  std::unordered_map<int64_t, ParamComms> param_comms_;  // by External id
  // The launch calls (correlation id, never 0: on_api_call skips it; start).  A list, as they
  // come, while there are fewer than the limit: 16 bytes a call and no hashing (a table of
  // every launch of a trace was a tenth of the reading thread's page faults, and a trace
  // without collectives never looks one up); finish() looks up only its kernels' ids.  Past
  // the limit, a table: an id already held is updated, a new one is counted as dropped.
  struct Launch {
    uint64_t correlation;
    TimeNs start;
  };
  SegmentedVector<Launch> launch_list_;
  FlatMap64<TimeNs> launch_table_;
  bool launch_table_mode_ = false;
  // The launch start of each kernel id finish() looks up (kUnseen: no launch call of it).
  FlatMap64<TimeNs> kernel_launch_starts() const;
  int64_t records_ = 0;
  int64_t unidentified_ = 0;
  int64_t dropped_ = 0;
  int64_t launches_dropped_ = 0;
};

// Bytes per element of a PyTorch dtype name as Kineto writes it ("Float", "BFloat16", "Half",
// "Long", "Byte", "c10::BFloat16", "float32", ...); 0 if unknown.
int dtype_bytes(std::string_view dtype);

}  // namespace gpuacct
