// StepAccountant::Impl: the step accountant's state, shared by its implementation files
// (step_accountant.h): step_accountant.cc takes events in (intake); step_finalization.cc turns
// markers into steps, decides when a step can no longer change and finalises it (its rows and
// each device's window).  Internal to the step accountant.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "analysis/accounting/counter_attribution.h"
#include "analysis/accounting/device_state.h"
#include "analysis/accounting/host_state.h"
#include "analysis/accounting/owed_launches.h"
#include "analysis/accounting/setup_tally.h"
#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/window_sweep.h"

namespace gpuacct {
namespace accounting {

// Ops a step owns on one device (see docs/accounting.md §1).
struct OwnedStats {
  TimeNs max_end = std::numeric_limits<TimeNs>::min();
  uint32_t kernels = 0;
  uint32_t copies = 0;
  void add(const GpuOp& op) {
    max_end = std::max(max_end, op.end);
    if (op.kind == GpuOpKind::kKernel) {
      // A graph launch traced as one span counts its nodes (one when unknown), as the same
      // launch traced node by node would.
      const bool span = (op.flags & kGpuOpGraphSpan) != 0 && op.graph_nodes > 0;
      kernels += span ? op.graph_nodes : 1;
    } else {
      ++copies;
    }
  }
};

struct PendingStep {
  TimeNs begin = 0;
  TimeNs end = 0;
  int64_t number = -1;
  uint32_t thread = 0;
  NameId name = kNoName;
  bool untraced = false;  // CUPTI was off in it (GPUACCT_SAMPLE): a host-side row only
  bool detected = false;  // found by step detection, not marked (events.h kDetectedStep)
};

// Steps are ordered by host begin; ties (bad input: two ranges opening at the same instant)
// are broken by every other field, shorter first, so the order events arrived in never
// decides which of them is kept.
inline bool step_before(const PendingStep& a, const PendingStep& b) {
  return std::tie(a.begin, a.end, a.number, a.thread, a.name) <
         std::tie(b.begin, b.end, b.number, b.thread, b.name);
}
}  // namespace accounting

struct StepAccountant::Impl {
  AccountingConfig cfg;
  RowSink row_sink;
  SegmentSink segment_sink;
  Stats stats;

  TimeNs watermark = accounting::kMinTime;
  bool finished = false;

  accounting::HostState host;
  std::map<uint16_t, accounting::DeviceState> devices;

  std::vector<accounting::PendingStep> steps;  // unfinalised, sorted lazily
  bool steps_sorted = true;
  std::vector<Marker> boundaries;  // step-boundary markers not yet turned into steps
  std::vector<Marker> flops_markers;
  std::vector<Marker> work_markers;  // kStepTokens / kStepSamples not yet given to a step

  int64_t next_step_index = 0;
  TimeNs last_step_end = accounting::kMinTime;    // host end of the last finalised step
  TimeNs last_step_begin = accounting::kMinTime;  // host begin of the last finalised step
  TimeNs host_cutoff = accounting::kMinTime;      // host events ending before this were pruned
  TimeNs host_only_until = accounting::kMinTime;
  uint64_t intake_epoch = 1;  // advanced by every GPU op and launch call taken in

  std::vector<StepRow> rows;

  // Set-up (setup_tally.h): open until the first kept step is finalised, open again when
  // detected steps are folded into it.  Before the first step of a device after a fold, its
  // window restarts at the step's host begin (never before the folded windows' end).
  SetupTally setup;
  bool setup_open = true;
  bool saw_detected = false;  // a detected step came in
  bool folded = false;        // the program's first marked step came: detected ones folded
  TimeNs setup_calls_from = accounting::kMinTime;  // set-up calls not yet tallied begin here
  bool host_only_restart = false;
  int64_t warmup_base = 0;  // step index of the first step after set-up (warm-up counts from it)
  std::vector<std::pair<TimeNs, TimeNs>> setup_busy;  // scratch: set-up ops of one device
  std::map<NameId, SetupTally::Api> setup_api;
  // Kernel names some window or set-up already ran (by NameId): StepRow::first_use_kernels.
  std::vector<bool> kernel_seen;
  uint32_t window_first_uses = 0;  // scratch: the window being taken
  bool first_use(NameId name) {
    if (name >= kernel_seen.size()) kernel_seen.resize(static_cast<size_t>(name) + 1, false);
    if (kernel_seen[name]) return false;
    kernel_seen[name] = true;
    return true;
  }

  accounting::OwedLaunches owed;  // launch calls whose op had not arrived when the call did
  size_t corr_prune_at = 4096;
  TimeNs blocked_step_begin = accounting::kMinTime;
  TimeNs blocked_until = accounting::kMinTime;
  // More events held than cfg.pending_event_limit: owed launches blocking the next step are cut
  // off (counted) until the held events fit again.
  bool over_limit = false;
  DeliveryLag lag;
  std::vector<IdleGap> gaps_sorted;  // longest first, rebuilt by largest_gaps()

  accounting::WindowSweep sweep{cfg};
  CounterQueue counters;                         // hardware counter samples (docs/counters.md)
  std::vector<CategorySegment> window_segments;  // scratch: a window's segments, for counters
  std::vector<GpuOp> window_ops;  // scratch: the window's ops (no per-window allocation)

  // Map elements are stable in memory, so the last lookup can be cached.
  accounting::DeviceState* last_device = nullptr;
  uint16_t last_device_id = 0;

  // Member functions are declared inline, as they were when all of them were defined in this
  // struct, and each is defined in the one file that calls it: the per-event intake and the
  // helpers it calls stay in one file, inlinable into each other.  Calling one from the other
  // file does not compile (an inline function used but never defined).

  // ---- intake (step_accountant.cc) ---------------------------------------------------------
  inline void add_gpu_op(const GpuOp& op);
  inline void add_counter_sample(const CounterSample& sample);
  inline void add_api_call(const HostApiCall& call);
  inline bool late_for_new_device(const GpuOp& op) const;
  inline bool launched_in_finalized_step(const GpuOp& op) const;
  inline void add_range(const HostRange& r);
  inline void add_marker(const Marker& m);
  inline void note_first_event(TimeNs t) { setup.begin = std::min(setup.begin, t); }

  // The program's first marked step begins at `t`: the detected steps before it are set-up.
  inline void fold_detected_before(TimeNs t);

  // ---- set-up (step_finalization.cc) ---------------------------------------------------------
  inline void tally_setup_calls(TimeNs until);
  inline void tally_setup_op(const GpuOp& op, TimeNs window_begin);
  inline void close_setup(const accounting::PendingStep& first_kept);

  // ---- the pending steps (both files) -----------------------------------------------------
  // How step `s` (sorted after it) relates to the last kept step [prev_begin, prev_end)
  // (docs/accounting.md §1): after it; touching it (it begins at most the touch tolerance
  // before prev_end, later than prev_begin, and ends after prev_end: a rounding overlap, so it
  // begins at prev_end); or overlapping it (nested or concurrent: skipped, counted).  The
  // later step moves, not the earlier one, because a live source may have finalised the
  // earlier step before the later one arrives: both paths make the same choice.
  enum class StepFit : uint8_t { kAfter, kTouches, kOverlaps };
  StepFit fit_after(TimeNs prev_begin, TimeNs prev_end, const accounting::PendingStep& s) const {
    if (s.begin >= prev_end) return StepFit::kAfter;
    // Valid times lie in [-2^62, 2^62): the difference cannot overflow.
    if (prev_end - s.begin <= cfg.step_touch_tolerance_ns && s.begin > prev_begin &&
        s.end > prev_end) {
      return StepFit::kTouches;
    }
    return StepFit::kOverlaps;
  }

  void push_step(const accounting::PendingStep& s) {
    if (!steps.empty() && accounting::step_before(s, steps.back())) steps_sorted = false;
    steps.push_back(s);
  }

  void sort_steps() {
    if (steps_sorted) return;
    std::sort(steps.begin(), steps.end(), accounting::step_before);
    steps_sorted = true;
  }

  // ---- steps from markers, finalisation, the window (step_finalization.cc) ---------------
  inline void convert_boundaries(bool at_end);
  inline TimeNs pending_launch_time(accounting::PendingOp& p);
  template <typename F>
  void for_each_ownable_op(F&& f);
  template <typename F>
  void for_each_op_launched_in(TimeNs begin, TimeNs end, F&& f);
  inline bool ready_to_finalize(const accounting::PendingStep& s);
  inline bool settled(const accounting::OwedLaunches::Launch& p, TimeNs horizon);
  inline bool gave_up(const accounting::OwedLaunches::Launch& p) const;
  static inline TimeNs sat_add(TimeNs a, TimeNs b);
  inline bool cut_off_owed(const accounting::OwedLaunches::Launch& p, TimeNs horizon);
  inline int64_t held_events() const;
  inline void check_held_events();
  inline void try_finalize(bool force);
  inline std::vector<std::map<uint16_t, accounting::OwnedStats>> owned_by_step();
  inline std::map<uint16_t, accounting::OwnedStats> owned_in(TimeNs begin, TimeNs end);
  inline void finalize_step(const accounting::PendingStep& s,
                            const std::map<uint16_t, accounting::OwnedStats>* pre);
  inline bool takes_part(accounting::DeviceState& dev, TimeNs step_end);
  inline void emit(StepRow row);
  inline void prune_host(const accounting::PendingStep& s);
  inline void take_window_ops(const StepRow& row, const accounting::PendingStep& s,
                              accounting::DeviceState& dev);
  inline void account_window(StepRow& row, const accounting::PendingStep& s,
                             accounting::DeviceState* dev);
};

}  // namespace gpuacct
