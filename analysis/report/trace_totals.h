// Whole-trace totals exactly as HTA (Holistic Trace Analysis 0.6.1) defines them, so a user can
// check gpuacct against the tool they know.  Definitions (docs/kineto_import.md):
//
//   HTA's GPU rows: every GPU op (kernel, memcpy, memset) and every `cuda_sync` row that has a
//     stream (Stream Sync, Stream Wait Event: on_cuda_sync) -- HTA keeps every event with
//     stream != -1; sync rows are of its OTHER class (named "...Sync", "Stream Wait Event")
//   kernel_time  = last GPU row end - first GPU row start (all devices and streams)
//   idle         = kernel_time - |union of all GPU rows|
//   compute      = |union of compute kernels|   (HTA's name-based COMPUTATION class)
//   non_compute  = kernel_time - compute - idle
//   overlap %    = |union(comm) ∩ union(compute)| / |union(comm)| * 100
//   idle breakdown, per stream, over GPU ops only (HTA leaves cuda_sync rows out of it): ops in
//     start order; each op's gap = its start - the *previous op's* end (not the latest end so
//     far, so an op that overlaps the one before it has a negative gap):
//     host_wait   if the op's launch call started after the previous op ended,
//     kernel_wait else if the gap is < consecutive_kernel_delay (30 µs) -- negative gaps too,
//     other       else.
//   percentages (of kernel_time, of comm) and per-stream ratios (of the stream's summed gaps):
//     v / total in float64, then pandas' round(2) -- numpy's: x * 100, half to even, / 100
//     (a ratio of 1/8 is 0.12); a total that is negative (overlapping ops) divides all the
//     same; a zero total (NaN or inf in HTA) gives 0.
//
// HTA specifics reproduced: times are rounded to whole microseconds as pandas does it -- the
// decimal ts and dur parsed to float64, start = ceil(ts), end = floor(ts + dur) in float64;
// unless include_last_profiler_step, when there are >= 2 ProfilerSteps (HTA counts step
// *names*: a name written twice is one step), GPU rows whose launching CPU call (matched by
// correlation id) started at or after the last step's start --
// or that have no launching call in the trace -- are dropped, while a row with no correlation
// id at all is one of HTA's CPU rows and is kept when it starts before the last step.  The
// last step's start is that of the latest ProfilerStep among HTA's CPU rows (stream -1): the
// CPU-side ones and the `gpu_user_annotation` copies PyTorch writes on the GPU timeline
// (on_gpu_step_annotation), which begin when the GPU reaches the step, later.  One
// instance covers one input file (HTA: one rank).  All GPU rows are kept until compute():
// memory is ~40 bytes per GPU op plus 16 per CUDA call, far below the trace's own size.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/import/kineto_importer.h"
#include "analysis/model/event_sink.h"
#include "analysis/model/events.h"
#include "analysis/model/name_table.h"
#include "analysis/model/segmented_vector.h"

namespace gpuacct {

struct HtaTotalsOptions {
  bool include_last_profiler_step = false;  // HTA's default: drop the last step
  int64_t consecutive_kernel_delay_us = 30;
};

struct HtaStreamIdle {
  uint16_t device = 0;
  uint32_t stream = 0;
  int64_t host_wait_us = 0;
  int64_t kernel_wait_us = 0;
  int64_t other_us = 0;
};

struct HtaTotals {
  int64_t kernel_time_us = 0;
  int64_t idle_us = 0;
  int64_t compute_us = 0;
  int64_t non_compute_us = 0;
  int64_t comm_us = 0;          // |union of communication kernels|
  int64_t comm_overlap_us = 0;  // |comm ∩ compute|
  double comm_comp_overlap_pct = 0;
  int64_t gpu_ops = 0;         // received (GPU ops and cuda_sync rows)
  int64_t gpu_ops_kept = 0;    // after HTA's last-step filter
  int64_t cuda_sync_rows = 0;  // cuda_sync rows received (part of gpu_ops)
  int64_t profiler_steps = 0;  // ProfilerStep ranges received
  int64_t gpu_step_annotations = 0;  // ProfilerStep#N on the GPU timeline (on_gpu_step_annotation)
  bool last_step_dropped = false;
  std::vector<HtaStreamIdle> idle_by_stream;  // sorted by (device, stream)
};

// HTA's kernel classes, by name (anchored prefixes / substrings as in its regexes).
bool hta_is_communication(std::string_view kernel_name);
bool hta_is_computation(std::string_view kernel_name);

class TraceTotals final : public EventSink {
 public:
  explicit TraceTotals(const NameTable& names, HtaTotalsOptions opts = {});

  void on_gpu_op(const GpuOp& op) override;
  void on_api_call(const HostApiCall& call) override;
  void on_range(const HostRange& range) override;
  void on_marker(const Marker&) override {}
  // A Kineto `cuda_sync` row with a stream (Stream Sync, Stream Wait Event): a GPU row to HTA's
  // temporal breakdown, not part of its idle breakdown.  Not GPU work: the importer hands these
  // to TraceTotals only (KinetoImportOptions::on_cuda_sync), never to the step accounting.
  void on_cuda_sync(const GpuOp& row);
  // The start of a `gpu_user_annotation` ProfilerStep#N without a stream: one of HTA's CPU
  // rows, so a candidate for the latest ProfilerStep (KinetoImportOptions::on_gpu_step_annotation).
  void on_gpu_step_annotation(TimeNs start);
  // Points `opts` at this instance for the rows only TraceTotals uses (cuda_sync rows, GPU-side
  // step annotations): what `gpuacct analyze` and the golden test import with.
  void attach(KinetoImportOptions* opts);

  void set_rank(int rank) { rank_ = rank; }

  // Computes the totals over everything received so far.
  HtaTotals compute() const;
  // {"definition", "rank", "kernel_time_us", "idle_us", ..., "idle_by_stream": [...]}
  nlohmann::json to_json() const;

 private:
  struct Op {
    TimeNs start;
    TimeNs end;
    uint64_t correlation;
    uint32_t stream;
    uint16_t device;
    uint8_t cls;  // bit 0: communication, bit 1: computation, bit 2: cuda_sync row
  };
  uint8_t name_class(NameId name);
  const NameTable& names_;
  HtaTotalsOptions opts_;
  int rank_ = -1;
  SegmentedVector<Op> ops_;  // every GPU op of the trace: appended, never moved
  // Every host call with a correlation id (never 0), as it came: appended on the reading
  // thread (no hashing there); compute() -- on a second thread in Input::read -- looks up
  // only its ops' ids, the earliest call of each.
  struct Call {
    uint64_t correlation;
    TimeNs start;
  };
  SegmentedVector<Call> calls_;
  std::vector<int8_t> class_cache_;                    // by NameId; -1 = not yet classified
  int64_t steps_ = 0;
  // HTA counts ProfilerStep names, and drops the last step from two on: the first name seen,
  // and whether another followed.
  NameId first_step_name_ = 0;
  bool two_step_names_ = false;
  TimeNs last_step_start_ = 0;
  int64_t gpu_steps_ = 0;
  TimeNs last_gpu_step_start_ = 0;
};

}  // namespace gpuacct
