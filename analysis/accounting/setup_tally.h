// Set-up: what a run did before its first step -- the CUDA context, the parameters copied in,
// cuBLAS / cuDNN handles, autotuning, compilation, the first iteration when the loop marks its
// first step at the first optimizer step.  It is no step: nothing in it counts in the step
// walls, the summary or the verdict (docs/accounting.md §1), and the report gives it a section
// of its own ("setup", analysis/report/report.h).
//
// The step accountant fills it: set-up runs from the first CUDA event (a call or a GPU op) to
// the host begin of the first step the run keeps.  Steps the detector found before the
// program's own marks began are folded into it (docs/accounting.md, *Set-up*): their rows are
// taken back and their numbers added here.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "analysis/model/events.h"

namespace gpuacct {

struct SetupTally {
  // begin: the first CUDA call or GPU op seen; end: the first kept step's host begin.  `known`
  // once that step was finalised (before, there is no set-up yet: the run has no step).
  bool known = false;
  TimeNs begin = std::numeric_limits<TimeNs>::max();
  TimeNs end = 0;
  int64_t gpu_busy_ns = 0;  // union of the GPU ops in set-up, per device, summed
  int64_t kernels = 0;
  int64_t copies = 0;  // memcpy and memset ops
  int64_t launches = 0;
  int64_t syncs = 0;    // blocking synchronisation calls (not in folded steps)
  int64_t sync_ns = 0;  // their time
  // Detected steps folded into set-up, and the step indices their rows had (live, the step
  // stream already holds those rows: its reader leaves them out, inject/output/step_stream.h).
  int64_t folded_steps = 0;
  int64_t folded_first_index = -1;
  int64_t folded_last_index = -1;
  // The CUDA calls of set-up by name (not those inside folded steps): module loading, graph
  // capture and the like show here where the source traced them (a profiler trace holds every
  // runtime call; the library traces launches, copies and syncs).
  struct Api {
    NameId name = kNoName;
    int64_t count = 0;
    int64_t ns = 0;
  };
  std::vector<Api> api;
  // Advanced whenever the tally changes: a live writer rewrites its line when it moves.
  uint64_t version = 0;

  int64_t duration_ns() const { return known && end > begin ? saturating_sub(end, begin) : 0; }
};

}  // namespace gpuacct
