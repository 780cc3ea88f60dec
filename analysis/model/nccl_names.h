// Classifies collective-library kernel names (NCCL) into a CollectiveType.
//
// Recognised forms (see shared/notes/cupti-field-notes.md, "NCCL kernel naming"):
//   ncclDevKernel_<Coll>_<RedOp>_<type>_<ALGO>_<PROTO>   (NCCL >= 2.19)
//   ncclKernel_<Coll>_<ALGO>_<PROTO>_<RedOp>_<type>      (older NCCL)
//   ncclSymkDevKernel_<Coll>_...                         (symmetric kernels, NCCL 2.27)
//   ncclDevKernel_SendRecv, ncclDevKernel_Generic, ...
// Only the collective part is used: the algorithm/protocol parts of the name are not reliable
// (NCCL folds them) and are ignored.  Names may carry a "void " prefix and an argument list, as
// demangled kernel names in Kineto traces do ("void ncclKernel_AllReduce_RING_LL_Sum_float(...)").
#pragma once

#include <string_view>

#include "analysis/model/events.h"

namespace gpuacct {

// kNone if the name is not a collective-library kernel; kOther if it is one of unknown type.
CollectiveType classify_collective(std::string_view kernel_name);

// Maps a collective's own name, as Kineto writes it in args["Collective name"] or PyTorch in
// record_param_comms ("allreduce", "all_reduce", "_allgather_base", "reduce_scatter_tensor",
// "send", "recv", "all_to_all", ...), to a CollectiveType.  kOther if unrecognised but
// non-empty, kNone if empty.
CollectiveType classify_collective_name(std::string_view collective_name);

}  // namespace gpuacct
