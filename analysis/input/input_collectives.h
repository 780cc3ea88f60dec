// How the front door identifies an input's collective instances (InputOptions::on_collective,
// analysis/input/input.h): one object per read, tee'd beside the accountant.
//   - a Kineto trace: its collective args (import/kineto_collectives.h); its collective kernels
//     without args by kernel order;
//   - a recording (no NCCL profiler-plugin events are recorded yet): kernel order
//     (analysis/import/kernel_order.h), released by the recording's watermarks.
// finish() emits what is held and says, for the rows file's header, how the collectives were
// identified and why when it was a fallback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "analysis/import/kineto_collectives.h"
#include "analysis/import/kernel_order.h"
#include "analysis/model/collective.h"
#include "analysis/model/event_sink.h"

namespace gpuacct {

struct CollectiveIdentity {
  CollectiveSource source = CollectiveSource::kNone;  // kNone: the input has no collectives
  std::string note;                                   // why a fallback was used
  int64_t records = 0;
};

class InputCollectives {
 public:
  using Sink = std::function<void(const CollectiveRecord&)>;
  // `kineto_trace`: the input is a trace (else a recording).
  InputCollectives(bool kineto_trace, Sink sink);
  ~InputCollectives();

  // What to tee beside the accountant.
  EventSink* events();
  // For KinetoImportOptions::collectives (a trace), else nullptr.
  KinetoCollectives* kineto() { return kineto_.get(); }
  // Emits every record still held.  `own_rank`: the run's rank (RunMetadata::rank).
  CollectiveIdentity finish(int own_rank);
  // A trace's collective kernels and launch calls past KinetoCollectives' limit
  // (Stat::trace_collectives_over_limit); 0 for a recording.
  int64_t over_limit() const;

 private:
  Sink sink_;
  int64_t records_ = 0;
  KernelOrderIdentity kernel_order_;
  std::unique_ptr<KinetoCollectives> kineto_;
};

}  // namespace gpuacct
