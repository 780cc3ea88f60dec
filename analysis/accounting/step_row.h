// The per-step, per-device result of the accounting.  Its categories and walls are defined in
// taxonomy.h.
#pragma once

#include <cstdint>
#include "analysis/accounting/counter_totals.h"
#include "analysis/accounting/taxonomy.h"
#include "analysis/model/events.h"

namespace gpuacct {

// The device of a step's one row in a run with no GPU activity at all (docs/accounting.md §1):
// the step is accounted on the host alone.  No GpuOp may carry it: the accountant skips such an
// op as invalid.  Reports write it as device -1 (reported_device).
inline constexpr uint16_t kHostOnlyDevice = 0xFFFF;
inline int reported_device(uint16_t device) {
  return device == kHostOnlyDevice ? -1 : static_cast<int>(device);
}

struct StepRow {
  int64_t step_index = 0;    // 0-based position of the step in the run
  int64_t step_number = -1;  // the source's own number (ProfilerStep#N, user number)
  uint16_t device = 0;
  bool warmup = false;
  TimeNs host_begin = 0;
  TimeNs host_end = 0;
  TimeNs window_begin = 0;
  TimeNs window_end = 0;
  CategoryNs cat;
  int64_t comm_total = 0;       // union of collectives in the window (exposed or not)
  int64_t comm_overlapped = 0;  // collectives running while compute runs
  int64_t gpu_busy = 0;         // union of all ops: what nvidia-smi's "utilisation" sees
  uint32_t kernels = 0;         // kernels the step launched on this device
  uint32_t copies = 0;          // memcpy + memset ops the step launched on this device
  uint32_t launches = 0;        // launch API calls inside the step's host range (all devices)
  double flops = 0;             // model FLOPs the user declared for the step (0 = unknown)
  // Work the user declared for the step (gpuacct_set_step_work, summed over the step's calls;
  // 0 = none): tokens and samples of the whole job's step.  Used for the cost per unit of work.
  double tokens = 0;
  double samples = 0;
  // False: CUPTI was off during the step (GPUACCT_SAMPLE, docs/overhead.md).  The row then
  // holds the host side only -- its window (step time) and data_wait; every GPU-side field
  // is 0, so its categories do not sum to its duration.  Summaries leave such rows out.
  bool sampled = true;
  // Kernels run in the window whose name no earlier window (nor set-up) ran: one-time work --
  // autotuning, compilation, a first evaluation -- which the run summary's one-time-work rule
  // leaves out as warm-up when it makes the step slow (analysis/report/run_summary.h).
  uint32_t first_use_kernels = 0;
  // Hardware counters over the row's compute time (docs/counters.md); empty without samples.
  CounterTotals counters;

  int64_t duration() const { return window_end - window_begin; }
  WallBreakdown walls() const { return WallBreakdown::from(cat); }
};

}  // namespace gpuacct
