// The job view's merge (docs/job_view.md, *Method*): every rank's step rows and collective
// records, read in windows of steps from all ranks at once, never all held.
//
//   pass 1 (clocks): the collectives alone; matched instances' ends per host into the
//          ClockAligner (a bounded sample).  Skipped when all ranks are on one host.
//   pass 2 (blame):  rows and collectives again, times moved onto the job clock; per window:
//          instances matched by (comm, seq) and blamed (blame.h), then each step blamed, the
//          export tables streamed, the per-rank / per-type / per-step sums kept.
//
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
};

// The job view of `inputs` (its problems carried over, the merge's own added).  `exporter`
// (optional, open) receives both export tables.
JobView build_job_view(const JobInputs& inputs, const JobOptions& options = {},
                       JobExport* exporter = nullptr);

}  // namespace gpuacct
