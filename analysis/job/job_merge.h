// The job view's merge (docs/job_view.md, *Method*): every rank's step rows and collective
// records, read in windows of steps from all ranks at once, never all held.
//
//   pass 1 (clocks): the collectives alone; matched instances' ends per host into the
//          ClockAligner (a bounded sample).  Skipped when all ranks are on one host.
//   pass 2 (blame):  rows and collectives again, times moved onto the job clock; per window:
//          instances matched by (comm, seq) and blamed (blame.h), then each step blamed, the
//          export tables streamed, the per-rank / per-type / per-step sums kept.
//
// Matching (docs/job_view.md, *When matching cannot be trusted*):
//   - a record whose identity cannot say who takes part is never matched across ranks
//     (matchable_across_ranks); it is kept in the per-rank table of unmatched collectives;
//   - between the passes a check pass puts every matched instance on the job clock and tests
//     that its ends agree within end_tolerance_ns; a communicator most of whose instances fail
//     is unreliable: left out of the clocks (aligned again without it) and of the blame, its
//     records listed as unmatched, and said in JobView::matching_notes;
//   - steps that have unmatched records and no trusted instance are blamed by the transfer
//     floor (kMethodStepRowsFloor); with no trusted instance in the whole job, every step is.
// Memory is bounded by ranks x (rows + collectives) per window (JobOptions::window_steps),
// plus the fixed-size samples (clock instances, residuals, step times) and the top steps.
// Assumption: the ranks give one instance the same step index (they run the same program);
// an instance whose records fall into two windows, or that some rank lacks, is blamed with
// the ranks present and counted as incomplete.
#pragma once

#include <cstddef>
#include <cstdint>

#include "analysis/job/job_export.h"
#include "analysis/job/job_summary.h"
#include "analysis/job/rank_inputs.h"

namespace gpuacct {

struct JobOptions {
  int64_t window_steps = 8;
  size_t top_steps = 10;
  size_t max_align_instances = 4096;
  // The link's peak bus bandwidth (GB/s) the user gave (`gpuacct job --link-peak-gbs`: e.g.
  // NVLink on H100/H200 450 per direction per GPU, InfiniBand NDR 50 per port); 0 = unknown.
  // The per-collective table then shows each type's mean bus bandwidth as a share of it.
  double link_peak_gbs = 0;
};

// Whether a record's (comm, seq) names the same operation, with the same ranks, on every rank
// that has it.  Point-to-point records only where the identity names the transfer: the
// plugin's when it knew rank and peer (comm = the (communicator, sender, receiver) hash, seq
// the pair's count from 1: inject/nccl/nccl_profiler.cc) and a trace's (its comm is the pair's when
// the trace names the peer).  Not under kernel-order identity: the i-th send/recv kernel of
// one rank and the i-th of another are usually transfers with different peers (pipeline
// stages), and nothing in the kernel names the peer.
bool matchable_across_ranks(const CollectiveRecord& record);

// Whether one matched instance, on the job clock, can be one operation.  Two facts of a
// collective (every rank of the instance takes part):
//   - causality: no rank finishes before the last rank has arrived (nothing can move without
//     it), so every end is after the last arrival;
//   - the transfer tail: the ranks finish together, within the transfer -- the last piece of
//     data reaches every rank at about the same time.  The bound is twice the instance's
//     median transfer (median over ranks of end - last arrival, blame.h): a rank whose own
//     transfer takes up to 3x the others' (a slow link, which the job view reports) still
//     passes, while the i-th record of one rank paired with the (i+1)-th of another ends a
//     whole operation apart, or breaks causality.
// Both allow kEndToleranceFloorNs for timestamp jitter and what an offset estimated from
// medians leaves between hosts (tens of us).
inline constexpr int64_t kEndToleranceFloorNs = 50'000;
int64_t end_tolerance_ns(int64_t median_transfer_ns);
bool instance_plausible(const InstanceBlame& blame, TimeNs first_end);

// The job view of `inputs` (its problems carried over, the merge's own added).  `exporter`
// (optional, open) receives both export tables.
JobView build_job_view(const JobInputs& inputs, const JobOptions& options = {},
                       JobExport* exporter = nullptr);

}  // namespace gpuacct
