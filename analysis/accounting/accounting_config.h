// Every threshold the accounting uses, with its default: the one definition of each default.
// The CLI flags and their help text, the injected library's GPUACCT_* settings
// (inject/config.h) and the Python launcher take theirs from here (the launcher passes a
// setting only when the user gave one); docs/accounting.md publishes the same table, keep the
// two in step.
#pragma once

#include <cstdint>

#include "analysis/model/events.h"

namespace gpuacct {

struct AccountingConfig {
  // An idle gap whose op was already submitted when the gap began is launch latency (launch
  // wall) when shorter than this; longer, the GPU waited on a dependency (other wall).
  // 30 us = HTA's consecutive_kernel_delay ("kernel wait").
  TimeNs launch_latency_threshold_ns = 30'000;

  // A pause between consecutive CUDA calls on the launching thread longer than this is
  // host-other (Python/CPU work, logging, checkpointing); shorter pauses are framework
  // overhead between launches, i.e. the launch wall.  Eager PyTorch spends 10-50 us per op
  // between launches, so the default sits above that.  100 us = HTA's launch_delay_cutoff.
  TimeNs host_pause_threshold_ns = 100'000;

  // A step range that begins at most this long before the previous step ends touches it: it
  // begins where the previous one ends (never nested, never skipped).  Trace writers round ts
  // and dur separately; at any resolution of 1 us or finer that makes consecutive steps
  // overlap by at most 1 us (integer-us writers: ts 0.6 -> 1, dur 1.6 -> 2 ends at 3 while
  // the next step, at 2.2, begins at 2).  A real overlap of two steps (a nested or
  // concurrent step range) spans at least a CUDA call, several us, so it stays a skipped and
  // counted step (overlapping_steps_skipped).
  TimeNs step_touch_tolerance_ns = 1'000;

  // Steps left out of the run summary and reported apart.  A whole run (the live library, a
  // recording of it) leaves out its first steps, which compile, autotune and allocate; a
  // profiler trace is already a steady-state capture.  kWarmupBySource lets the input decide
  // (input/input.h default_warmup_steps): what the CLI passes when the user gives no --warmup.
  static constexpr int kWarmupStepsWholeRun = 2;
  static constexpr int kWarmupStepsProfilerTrace = 0;
  static constexpr int kWarmupBySource = -1;
  int warmup_steps = kWarmupStepsWholeRun;

  // A launch call whose GPU op has not arrived is *owed*: the steps it may run in wait for it.
  // It is given up on (counted in unmatched_launches: a failed launch, a record CUPTI lost) once
  // delivery has moved this far past it: the watermark has passed the call's end by this much
  // AND ops of launches made this much later have arrived.  Delivery progress, not the clock,
  // decides, so GPU records that come seconds late (a deep queue, a busy CUPTI thread) are
  // waited for as long as their lag needs (docs/accounting.md, "Finalisation").
  TimeNs pending_launch_timeout_ns = 2'000'000'000;
  // CUPTI hands a completed record out within this many flushes, possibly after records that
  // completed with it or later.  A live source advances the watermark once per flush: it
  // promises the clock seen this many flushes ago (inject/recording/watermark.h), and the ops'
  // launch frontier gives an owed launch up only as it stood this many watermarks ago.
  static constexpr int kLateFlushes = 5;

  // What waiting for owed launches may hold: at most this many events (GPU ops, host calls and
  // ranges, steps) kept for unfinalised steps, checked at every watermark.  Beyond it the
  // oldest owed launches are given up on until the held events fit again, each counted as
  // data loss (owed_launches_cut_off).  About 100 bytes per event with its bookkeeping
  // (correlation entry, pending launch): ~100 MB at the default.
  int64_t pending_event_limit = 1'000'000;

  // With no data range ended before a gap's end (no DataLoader instrumentation, no NVTX or C
  // API data marks: a C++ program, a loop whose Python instrumentation did not load), the
  // host pause that ends in the launch of a host-to-device copy -- the step's input arriving
  // -- is data wait, inferred (Stat::data_waits_inferred; docs/accounting.md, "Idle gaps").  A
  // loop that logs just before it copies its next batch in has that pause called data too:
  // mark data ranges (gpuacct.data(), the DataLoader instrumentation) for certainty.
  bool infer_data_wait = true;
  // How many idle gaps and kernels the run summary lists.
  int top_gaps = 10;
  int top_kernels = 10;
};

}  // namespace gpuacct
