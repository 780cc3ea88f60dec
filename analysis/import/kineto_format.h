// Kineto's vocabulary: what the fields of a PyTorch-profiler (Kineto) trace event mean to
// gpuacct -- the activity categories, the CUDA API names, the step and data range names, and
// times in decimal microseconds.  The mapping table is in docs/kineto_import.md; the reader that
// applies it is kineto_events.cc (the Kineto importer's per-event stage).
#pragma once

#include <cstdint>
#include <string_view>

#include "analysis/model/events.h"

namespace gpuacct::kineto {

enum class CatKind : uint8_t {
  kUnknown,
  kIgnored,
  kKernel,
  kMemcpy,
  kMemset,
  kRuntime,
  kUserAnnotation,
  kCpuOp,
  kFlow,
  kCudaSync,          // when a host or stream waited: only for KinetoImportOptions::on_cuda_sync
  kGpuUserAnnotation,  // an annotation on the GPU timeline: only its ProfilerStep#N, for
                       // KinetoImportOptions::on_gpu_step_annotation
  kOtherAccelerator,  // another accelerator's activity (MTIA, XPU, HPU, ...): not supported
};

CatKind classify_cat(std::string_view cat);
HostApiKind classify_api(std::string_view name);
CopyDir copy_dir_from_name(std::string_view memcpy_name);
// "ProfilerStep#12" (also "ProfilerStep #12", as HTA's regex allows): true, *number = 12 (-1
// when it has no number).  False for other names.
bool profiler_step_number(std::string_view name, int64_t* number);
// A DataLoader / DataPipe iteration: the host waits for input.
bool is_data_range(std::string_view name);

// An X event's [start, end) in ns.  The end is ts + dur rounded once, not round(ts) +
// round(dur): two consecutive events that Kineto wrote touching (ProfilerStep#N ends where #N+1
// begins) must not overlap by a rounding nanosecond.  The start is round(ts), exactly as
// parse_us_to_ns (flows are matched on it).  False on bad syntax, a negative dur or overflow.
bool parse_span_ns(std::string_view ts_text, std::string_view dur_text, int64_t* start,
                   int64_t* end);

}  // namespace gpuacct::kineto
