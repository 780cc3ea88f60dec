// One collective / point-to-point operation instance on one rank: the unit of the job view
// (docs/job_view.md).  Every source gives the same record:
//   - the live library, from NCCL's profiler-plugin events (inject/nccl/nccl_profiler.*) matched to
//     the CUPTI kernel that ran them;
//   - where no plugin events arrive (older NCCL, plugin refused) and for recordings without
//     them, NCCL kernels matched by their order per stream (analysis/import/kernel_order.h);
//   - a PyTorch-profiler trace, from its kernels' "Collective name", "In msg nelems",
//     "Process Group", "seq" args.
// On every rank, (comm_hash, seq) names the same instance: that is how ranks are matched.
//
// Fixed size and trivially copyable, like the event records (events.h): the live worker keeps
// them in bounded buffers without allocating per record.
#pragma once

#include <cstdint>
#include <type_traits>

#include "analysis/model/events.h"

namespace gpuacct {

// Where a record's identity came from.  Written in the rows file as a word (to_string).
enum class CollectiveSource : uint8_t {
  kNone = 0,
  kNcclPlugin = 1,   // NCCL's profiler-plugin events: comm hash and seq are NCCL's own
  kKernelOrder = 2,  // NCCL kernels numbered in order per stream: comm_hash names the stream's
                     // position among the rank's streams that ran NCCL kernels (assumption:
                     // every rank launches one communicator's collectives in the same order on
                     // one stream)
  kKineto = 3,       // a profiler trace's kernel args (Process Group, seq)
};
const char* to_string(CollectiveSource source);

// Names too long are cut to 15 bytes; kept inline so the record stays fixed-size.
struct ShortName {
  char text[16] = {};
};

struct CollectiveRecord {
  uint64_t comm_hash = 0;  // communicator (NCCL commHash / a hash of the process group)
  uint64_t seq = 0;        // per-communicator sequence number, the same on every rank
  uint64_t bytes = 0;      // message size on this rank (count × datatype size; 0 = unknown)
  TimeNs host_enqueue = 0;  // the host enqueued it (plugin startEvent, CPU op start); 0 = unknown
  TimeNs gpu_start = 0;     // its kernel started on this rank's GPU; 0 = unknown
  TimeNs gpu_end = 0;       // its kernel ended; 0 = unknown
  uint64_t correlation_id = 0;  // the launch that ran it (links the CUPTI kernel); 0 = unknown
  int64_t step_index = -1;      // the step it belongs to (set by whoever assigns steps)
  int32_t rank = -1;            // rank in the communicator; -1 = unknown
  int32_t nranks = 0;           // ranks in the communicator; 0 = unknown
  uint32_t stream = 0;
  uint16_t device = 0;
  CollectiveType type = CollectiveType::kNone;
  CollectiveSource source = CollectiveSource::kNone;
  // Operations its kernel carried, itself included: 1 = a kernel of its own; 2+ = one kernel ran
  // several (a group's sends and receives, a group's collectives fused into one plan: NCCL's
  // Group -> Coll / P2p event hierarchy, docs/job_view.md, *Shared kernels*), each record then
  // has that kernel's GPU times; 0 = unknown (no kernel matched, or a source that cannot tell).
  uint16_t kernel_ops = 0;
  ShortName datatype;  // "bf16", "float32", ... as the source names it; empty = unknown
  ShortName algo;      // "RING", "TREE", ...; empty = unknown
  ShortName proto;     // "LL", "LL128", "SIMPLE"; empty = unknown
};
static_assert(sizeof(CollectiveRecord) == 136);
static_assert(std::is_trivially_copyable_v<CollectiveRecord>);

}  // namespace gpuacct
