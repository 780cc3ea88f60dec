// Finalisation: steps from step-boundary markers, when a step can no longer change
// (ready_to_finalize, owed launches), its rows and each device's window.  The rules are written
// down in docs/accounting.md (section 1 and *Finalisation*); events come in through
// step_accountant.cc.
#include "analysis/accounting/step_accountant_impl.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "analysis/accounting/counter_attribution.h"
#include "analysis/accounting/window_sweep.h"

namespace gpuacct {

using accounting::CorrEntry;
using accounting::DeviceState;
using accounting::kMinTime;
using accounting::kUnresolved;
using accounting::OwedLaunches;
using accounting::OwnedStats;
using accounting::PendingOp;
using accounting::PendingStep;

namespace {

bool marker_before(const Marker& a, const Marker& b) {
  return std::tie(a.ts, a.thread, a.number, a.name) < std::tie(b.ts, b.thread, b.number, b.name);
}

}  // namespace

// ---- steps from markers ------------------------------------------------------------------

void StepAccountant::Impl::convert_boundaries(bool at_end) {
  if (boundaries.empty()) return;
  std::sort(boundaries.begin(), boundaries.end(), marker_before);
  size_t used = 0;
  for (size_t i = 0; i + 1 < boundaries.size(); ++i) {
    if (!at_end && boundaries[i + 1].ts > watermark) break;
    const Marker& m = boundaries[i];
    push_step(
        PendingStep{m.ts, boundaries[i + 1].ts, m.number, m.thread, m.name, step_untraced(m)});
    used = i + 1;
  }
  if (at_end && used < boundaries.size()) {
    // The step opened by the last mark never got a closing mark: it ends at its thread's
    // last CUDA call.  With no CUDA call after the mark there is nothing to account.
    const Marker& m = boundaries.back();
    TimeNs end = kMinTime;
    auto it = host.threads.find(m.thread);
    if (it != host.threads.end()) {
      for (const HostApiCall& c : it->second.calls) {
        if (c.start >= m.ts) end = std::max(end, c.end);
      }
    }
    if (end > m.ts) {
      push_step(PendingStep{m.ts, end, m.number, m.thread, m.name, step_untraced(m)});
    } else {
      stats.add(Stat::incomplete_trailing_step);
    }
    used = boundaries.size();
  }
  boundaries.erase(boundaries.begin(), boundaries.begin() + static_cast<ptrdiff_t>(used));
}

// ---- finalisation ----------------------------------------------------------------------

// Launch time of a pending op, cached once its launch call is known.
TimeNs StepAccountant::Impl::pending_launch_time(PendingOp& p) {
  TimeNs& lt = p.launch;
  if (lt != kUnresolved) return lt;
  const GpuOp& op = p.op;
  if (op.correlation_id != 0) {
    const CorrEntry* e = host.corr.find(op.correlation_id);
    if (e != nullptr && e->has_api) return lt = e->api_start;
  }
  return op.start;
}

// Every op a step can still own, with its launch time: the live pending ops of every device,
// and the ops consumed early (they ran inside an earlier window; `consumed`).  The one walk
// behind "the ops a step launched": f(device, launch, op, consumed).
template <typename F>
void StepAccountant::Impl::for_each_ownable_op(F&& f) {
  for (auto& [id, dev] : devices) {
    for (size_t i = dev.head; i < dev.pending.size(); ++i) {
      f(id, pending_launch_time(dev.pending[i]), dev.pending[i].op, /*consumed=*/false);
    }
    for (const PendingOp& p : dev.consumed_early) f(id, p.launch, p.op, /*consumed=*/true);
  }
}

// The ops launched in [begin, end): f(device, op, consumed).
template <typename F>
void StepAccountant::Impl::for_each_op_launched_in(TimeNs begin, TimeNs end, F&& f) {
  for_each_ownable_op([&](uint16_t device, TimeNs launch, const GpuOp& op, bool consumed) {
    if (launch >= begin && launch < end) f(device, op, consumed);
  });
}

// A step can be finalised when nothing that could still arrive can change its rows: its host
// range is over, every op it launched has arrived and ended before the watermark, and no
// launch call made before its window's end is still waiting for its op (such an op could
// run inside the window).  A launch whose op has not come is given up on once delivery has
// moved cfg.pending_launch_timeout_ns past it (gave_up), or cut off when the events held
// exceed cfg.pending_event_limit (cut_off_owed).
bool StepAccountant::Impl::ready_to_finalize(const PendingStep& s) {
  if (watermark < s.end) return false;
  // An op of this step known to end after `blocked_until` keeps it open at least until the
  // watermark passes that time: skip the scan until then.
  if (blocked_step_begin == s.begin && watermark < blocked_until) return false;
  TimeNs horizon = s.end;
  TimeNs blocking = kMinTime;
  for_each_op_launched_in(s.begin, s.end, [&](uint16_t, const GpuOp& op, bool consumed) {
    if (!consumed && op.end > watermark) blocking = std::max(blocking, op.end);
    horizon = std::max(horizon, op.end);
  });
  if (blocking != kMinTime) {
    blocked_step_begin = s.begin;
    blocked_until = blocking;
    return false;
  }
  // Settle owed launches from the front (their op came, or they were given up on or cut
  // off); the earliest one still owed decides.
  const TimeNs first_owed =
      owed.earliest_owed([&](const OwedLaunches::Launch& p) { return settled(p, horizon); });
  return first_owed >= horizon;
}

// Whether owed launch `p` no longer holds back a step finalised up to `horizon`: its op came
// (to it or to a call of its nest), or it was given up on or cut off.  A graph launch has one
// op per kernel node and no count of them comes with the records, so its first op settles
// nothing: it stays owed until given up, as a launch whose op never came is, and a node's op
// later than that is dropped and counted (launched_in_finalized_step).  Over the memory bound
// it is let go uncounted: if nothing more comes, nothing was lost.
bool StepAccountant::Impl::settled(const OwedLaunches::Launch& p, TimeNs horizon) {
  const CorrEntry* e = host.corr.find(p.corr);
  if (e == nullptr) return true;
  const CorrEntry* got = e->has_op ? e : host.nest_op(p.thread, p.start, p.end);
  if (got == nullptr) return gave_up(p) || cut_off_owed(p, horizon);
  if (!got->graph) return true;
  return gave_up(p) || (over_limit && p.start < horizon);
}

// An owed launch is given up on (its op presumed never to come: a failed launch, a record
// CUPTI lost) once both the watermark and the delivered ops' launch frontier are the timeout
// past it.  The frontier keeps late records owed: while every GPU record comes seconds late
// it trails the watermark by that lag, so the wait grows with the lag observed.  It counts as
// it stood kLateFlushes watermarks ago: a record CUPTI held back a few flushes behind those of
// later launches still comes (owed_launches.h).
bool StepAccountant::Impl::gave_up(const OwedLaunches::Launch& p) const {
  const TimeNs at = sat_add(p.end, cfg.pending_launch_timeout_ns);
  if (watermark < at) return false;
  if (owed.settled_frontier() >= at) return true;
  // The job stopped launching (an eval or checkpoint phase without GPU work): nothing newer
  // can move the frontier, so the watermark alone decides, once it is past the newest launch
  // by the timeout plus max(4 x the timeout, 2 x the worst delivery lag seen): the op may
  // still run (a long kernel queued behind others) and then come late, before any late
  // record has shown the lag (the differential fuzzer's seed 1717: 1.5 s kernels, records
  // 3.5 s late, seconds without launches).
  const TimeNs wait = cfg.pending_launch_timeout_ns +
                      std::max(4 * cfg.pending_launch_timeout_ns, sat_add(lag.max(), lag.max()));
  return watermark >= sat_add(owed.newest(), wait);
}

TimeNs StepAccountant::Impl::sat_add(TimeNs a, TimeNs b) {
  return a > std::numeric_limits<TimeNs>::max() - b ? std::numeric_limits<TimeNs>::max() : a + b;
}

// Over the memory bound, an owed launch that blocks the step being finalised (made before
// its horizon) is cut off: counted as data loss (its op, if it comes, is dropped late).  Only
// launches the watermark has passed by the timeout: a long step's launches whose kernels are
// still running are waited for, the bound then being exceeded by at most that much.
bool StepAccountant::Impl::cut_off_owed(const OwedLaunches::Launch& p, TimeNs horizon) {
  if (!over_limit || p.start >= horizon) return false;
  if (watermark < sat_add(p.end, cfg.pending_launch_timeout_ns)) return false;
  stats.add(Stat::owed_launches_cut_off);
  return true;
}

// The events kept for unfinalised steps (what waiting for owed launches holds): pending GPU
// ops, host calls and ranges, steps, counter samples.  O(devices + threads).
int64_t StepAccountant::Impl::held_events() const {
  size_t n = steps.size() + boundaries.size() + counters.size();
  for (const auto& [id, dev] : devices) n += dev.live() + dev.consumed_early.size();
  for (const auto& [tid, th] : host.threads)  // without the pruned prefix not yet erased
    n += th.calls.size() - th.calls_stale + th.data.size() - th.data_stale;
  return static_cast<int64_t>(n);
}

void StepAccountant::Impl::check_held_events() {
  const int64_t held = held_events();
  lag.note_held(held);
  over_limit = held > cfg.pending_event_limit;
}

void StepAccountant::Impl::try_finalize(bool force) {
  sort_steps();
  // With many steps to finalise at once (the end of a trace or of a run), find every op's
  // owner in one pass instead of scanning all pending ops once per step.
  std::vector<std::map<uint16_t, OwnedStats>> owned;
  if (force && steps.size() > 4) owned = owned_by_step();
  size_t k = 0;
  for (; k < steps.size(); ++k) {
    PendingStep s = steps[k];
    // Steps that overlap the previous one are bad input: skip them, counted.  (A later step
    // that overlaps this one is skipped when its turn comes.)  One that only touches it
    // after rounding begins where it ends.
    const StepFit fit = fit_after(last_step_begin, last_step_end, s);
    if (fit == StepFit::kOverlaps) {
      stats.add(Stat::overlapping_steps_skipped);
      continue;
    }
    if (fit == StepFit::kTouches) s.begin = last_step_end;
    if (!force && !ready_to_finalize(s)) break;
    if (fit == StepFit::kTouches) stats.add(Stat::step_boundaries_aligned);
    finalize_step(s, owned.empty() ? nullptr : &owned[k]);
    // Cut off only until the held events fit again (steps[0, k] are finalised, not yet erased).
    if (over_limit)
      over_limit = held_events() - static_cast<int64_t>(k + 1) > cfg.pending_event_limit;
  }
  steps.erase(steps.begin(), steps.begin() + static_cast<ptrdiff_t>(k));
}

// For each pending step (sorted, possibly overlapping), the ops it owns per device.  Only the
// steps try_finalize will keep can own ops: a step that overlaps the one before it is
// skipped, and an op launched inside it belongs to the earlier step that contains it.
std::vector<std::map<uint16_t, OwnedStats>> StepAccountant::Impl::owned_by_step() {
  std::vector<std::map<uint16_t, OwnedStats>> out(steps.size());
  struct Kept {
    TimeNs begin;  // after aligning a touching step to the one before it
    TimeNs end;
    size_t index;
  };
  std::vector<Kept> kept;  // the steps that will be finalised: disjoint, sorted
  TimeNs last_begin = last_step_begin;
  TimeNs last_end = last_step_end;
  for (size_t k = 0; k < steps.size(); ++k) {
    const StepFit fit = fit_after(last_begin, last_end, steps[k]);
    if (fit == StepFit::kOverlaps) continue;
    const TimeNs begin = fit == StepFit::kTouches ? last_end : steps[k].begin;
    kept.push_back(Kept{begin, steps[k].end, k});
    last_begin = begin;
    last_end = steps[k].end;
  }
  auto owner = [&](TimeNs lt) -> std::map<uint16_t, OwnedStats>* {
    auto it = std::upper_bound(kept.begin(), kept.end(), lt,
                               [](TimeNs t, const Kept& k) { return t < k.begin; });
    if (it == kept.begin()) return nullptr;
    const Kept& k = *std::prev(it);
    return lt < k.end ? &out[k.index] : nullptr;
  };
  for_each_ownable_op([&](uint16_t device, TimeNs launch, const GpuOp& op, bool) {
    if (auto* o = owner(launch)) (*o)[device].add(op);
  });
  return out;
}

// The ops launched in [begin, end) per device: what a step owns.
std::map<uint16_t, OwnedStats> StepAccountant::Impl::owned_in(TimeNs begin, TimeNs end) {
  std::map<uint16_t, OwnedStats> out;
  OwnedStats* last = nullptr;  // the walk goes device by device: one lookup per device
  uint16_t last_id = 0;
  for_each_op_launched_in(begin, end, [&](uint16_t device, const GpuOp& op, bool) {
    if (last == nullptr || device != last_id) {
      last = &out[device];
      last_id = device;
    }
    last->add(op);
  });
  return out;
}

// `pre` (optional): the ops the step owns per device, precomputed by owned_by_step().
void StepAccountant::Impl::finalize_step(const PendingStep& s,
                                         const std::map<uint16_t, OwnedStats>* pre) {
  std::map<uint16_t, OwnedStats> owned;
  if (pre == nullptr && !devices.empty()) {
    owned = owned_in(s.begin, s.end);
    pre = &owned;
  }
  if (setup_open) tally_setup_calls(s.begin);
  const int64_t index = next_step_index++;
  uint32_t unmatched = 0;
  const uint32_t launches = host.count_launches(s.begin, s.end, &unmatched);
  stats.add(Stat::unmatched_launches, unmatched);
  double flops = 0;
  for (const Marker& m : flops_markers) {
    if (m.ts >= s.begin && m.ts < s.end) flops = m.value;
  }
  flops_markers.erase(std::remove_if(flops_markers.begin(), flops_markers.end(),
                                     [&](const Marker& m) { return m.ts < s.end; }),
                      flops_markers.end());
  // Declared work adds up inside a step (micro-batches); work declared before the step
  // (outside every step) is dropped with it, as FLOPs are.
  double tokens = 0, samples = 0;
  for (const Marker& m : work_markers) {
    if (m.ts < s.begin || m.ts >= s.end) continue;
    (m.kind == MarkerKind::kStepTokens ? tokens : samples) += m.value;
  }
  work_markers.erase(std::remove_if(work_markers.begin(), work_markers.end(),
                                    [&](const Marker& m) { return m.ts < s.end; }),
                     work_markers.end());

  StepRow base;
  base.step_index = index;
  base.step_number = s.number >= 0 ? s.number : index;
  base.warmup = index - warmup_base < cfg.warmup_steps;
  base.host_begin = s.begin;
  base.host_end = s.end;
  base.launches = launches;
  base.flops = flops;
  base.tokens = tokens;
  base.samples = samples;
  base.sampled = !s.untraced;

  bool on_device = false;
  for (auto& [id, dev] : devices) {
    if (!takes_part(dev, s.end)) continue;
    on_device = true;
    StepRow row = base;
    row.device = id;
    row.window_begin = !dev.has_window ? s.begin
                       : dev.restart   ? std::max(s.begin, dev.finalized_until)
                                       : dev.finalized_until;
    dev.restart = false;
    OwnedStats own;
    if (auto it = pre->find(id); it != pre->end()) own = it->second;
    std::erase_if(dev.consumed_early, [&](const PendingOp& p) { return p.launch < s.end; });
    row.kernels = own.kernels;
    row.copies = own.copies;
    row.window_end = own.max_end == kMinTime ? std::max(row.window_begin, s.end)
                                             : std::max(row.window_begin, own.max_end);
    account_window(row, s, &dev);
    dev.finalized_until = row.window_end;
    dev.has_window = true;
    emit(row);
  }
  if (!on_device) {  // before any device's first op: the step on the host alone
    StepRow row = base;
    row.device = kHostOnlyDevice;
    row.window_begin = host_only_until == kMinTime ? s.begin
                       : host_only_restart       ? std::max(s.begin, host_only_until)
                                                 : host_only_until;
    host_only_restart = false;
    row.window_end = std::max(row.window_begin, s.end);
    host_only_until = row.window_end;
    account_window(row, s, /*dev=*/nullptr);
    emit(row);
  }
  if (setup_open) close_setup(s);
  last_step_end = s.end;
  counters.drop_through_unless(
      [&](uint16_t device) {
        const auto it = devices.find(device);
        return it != devices.end() && it->second.has_window;
      },
      s.end);
  prune_host(s);
  last_step_begin = s.begin;
  stats.add(Stat::steps_finalized);
}

// Whether `dev` has a row in the step ending at `step_end` (docs/accounting.md §1): once it
// has a window, always; before, when an op was launched on it before the step ended.  The
// step is finalised only once every launch made before its end has its op or was given up
// (ready_to_finalize), so the answer does not depend on when the device's ops arrived.  The
// scan is cached until the next event comes in: O(the device's pending ops) per tick.
bool StepAccountant::Impl::takes_part(DeviceState& dev, TimeNs step_end) {
  if (dev.has_window) return true;
  if (dev.first_launch_epoch != intake_epoch) {
    dev.first_launch = std::numeric_limits<TimeNs>::max();
    for (size_t i = dev.head; i < dev.pending.size(); ++i)
      dev.first_launch = std::min(dev.first_launch, pending_launch_time(dev.pending[i]));
    dev.first_launch_epoch = intake_epoch;
  }
  return dev.first_launch < step_end;
}

void StepAccountant::Impl::emit(StepRow row) {
  if (!row.sampled) {
    // CUPTI was off (GPUACCT_SAMPLE): the GPU side is unknown, not idle.  Only what the
    // host saw stays -- the window and the data wait (docs/overhead.md).
    const int64_t data_wait = row.cat.data_wait;
    row.cat = CategoryNs{};
    row.cat.data_wait = data_wait;
    row.comm_total = row.comm_overlapped = row.gpu_busy = 0;
    row.kernels = row.copies = 0;
  }
  rows.push_back(row);
  if (row_sink) row_sink(row);
}

// Drops host state no future window can need: gaps of later windows start at or after the
// earliest device's window end.  Correlation entries lag one step behind so ops that were
// launched in one step but run in a later window still find their launch call.
void StepAccountant::Impl::prune_host(const PendingStep& s) {
  // A device without windows yet begins its first at a later step's host begin (>= s.end).
  TimeNs cutoff = s.end;
  bool any_window = false;
  for (auto& [id, dev] : devices) {
    if (!dev.has_window) continue;
    cutoff = std::min(cutoff, dev.finalized_until);
    any_window = true;
  }
  if (!any_window) cutoff = host_only_until;
  if (cutoff > host_cutoff) {
    host_cutoff = cutoff;
    host.prune_threads_before(cutoff);
  }
  if (last_step_begin != kMinTime) {
    const TimeNs corr_cutoff = std::min(last_step_begin, cutoff);
    // Rebuilding is O(map); do it only when the map has grown enough to matter.
    if (host.corr.size() > corr_prune_at) {
      // An entry goes once its launch is old AND every op it names has been consumed by a
      // window (or, with no op, once the launch has timed out): ops still pending must keep
      // finding their launch call, or their owner and gap classification would change.
      host.corr.erase_if([&](uint64_t, const CorrEntry& e) {
        if (e.has_op && e.op_end > cutoff) return false;
        if (!e.has_api) return true;
        if (e.api_start >= corr_cutoff) return false;
        return e.has_op || finished || watermark >= e.api_start + cfg.pending_launch_timeout_ns;
      });
      corr_prune_at = std::max<size_t>(4096, host.corr.size() * 2);
    }
  }
}

// ---- the window --------------------------------------------------------------------------

// Takes the device's ops that run in row's window into window_ops, in start order: ops
// entirely before it ran outside every window (before the first step); ops running past its
// end stay for later windows too.  Pending ops are sorted by start, so the window's ops are a
// prefix of the live ones.  Ops of that prefix that run past the window stay (moved to the
// prefix's end, order kept); the rest are consumed.
void StepAccountant::Impl::take_window_ops(const StepRow& row, const PendingStep& s,
                                           DeviceState& dev) {
  const TimeNs ws = row.window_begin;
  const TimeNs we = row.window_end;
  dev.sort_live();
  size_t j = dev.head;
  while (j < dev.pending.size() && dev.pending[j].op.start < we) ++j;
  size_t keep_at = j;
  for (size_t i = j; i-- > dev.head;) {
    const GpuOp& op = dev.pending[i].op;
    if (setup_open) tally_setup_op(op, ws);
    if (op.kind == GpuOpKind::kKernel && first_use(op.name) && op.end > ws) ++window_first_uses;
    if (op.end > we) {
      window_ops.push_back(op);
      dev.pending[--keep_at] = dev.pending[i];
      continue;
    }
    if (op.end <= ws && !(op.start == op.end && op.start == ws)) {
      stats.add(Stat::ops_outside_steps);
    } else {
      window_ops.push_back(op);
    }
    if (const TimeNs lt = pending_launch_time(dev.pending[i]); lt >= s.end) {
      // Keep the launch time it was owned by (an op with no known launch call has it
      // resolved to its own start only on the fly, not cached).
      PendingOp early = dev.pending[i];
      early.launch = lt;
      dev.consumed_early.push_back(early);
    }
  }
  std::reverse(window_ops.begin(), window_ops.end());  // back to start order
  dev.head = keep_at;
  dev.compact();
  if (!setup_busy.empty()) {  // the device's set-up ops: their union is GPU busy in set-up
    std::sort(setup_busy.begin(), setup_busy.end());
    TimeNs a = setup_busy.front().first, b = setup_busy.front().second;
    for (const auto& [x, y] : setup_busy) {
      if (x > b) {
        setup.gpu_busy_ns = saturating_add(setup.gpu_busy_ns, saturating_sub(b, a));
        a = x;
      }
      b = std::max(b, y);
    }
    setup.gpu_busy_ns = saturating_add(setup.gpu_busy_ns, saturating_sub(b, a));
    setup_busy.clear();
  }
}

// ---- set-up (setup_tally.h) ----------------------------------------------------------------

// An op of the window being taken that ran (at least partly) before the window began, while
// set-up is open: a set-up op.  Counted when it ran entirely before; its time before the window
// is GPU busy in set-up either way.
void StepAccountant::Impl::tally_setup_op(const GpuOp& op, TimeNs window_begin) {
  if (op.start >= window_begin) return;
  if (op.end <= window_begin) {
    if (op.kind == GpuOpKind::kKernel) {
      ++setup.kernels;
    } else {
      ++setup.copies;
    }
  }
  setup_busy.emplace_back(op.start, std::min(op.end, window_begin));
}

// The CUDA calls of set-up not tallied yet: [setup_calls_from, until) on every thread.  Run
// when the first kept step is finalised, before anything prunes them.
void StepAccountant::Impl::tally_setup_calls(TimeNs until) {
  for (auto& [tid, th] : host.threads) {
    th.sort_all();
    for (const HostApiCall& c : th.calls) {
      if (c.start < setup_calls_from) continue;
      if (c.start >= until) break;
      SetupTally::Api& a = setup_api[c.name];
      a.name = c.name;
      ++a.count;
      // Saturating: a recording's times are anyone's bytes (the fuzzers found the overflow).
      const int64_t ns = saturating_sub(c.end, c.start);
      a.ns = saturating_add(a.ns, ns);
      if (c.kind == HostApiKind::kSync) {
        ++setup.syncs;
        setup.sync_ns = saturating_add(setup.sync_ns, ns);
      } else if (c.kind == HostApiKind::kLaunch) {
        ++setup.launches;
      }
    }
  }
  setup_calls_from = std::max(setup_calls_from, until);
}

// The first kept step was finalised: set-up ends at its host begin.
void StepAccountant::Impl::close_setup(const PendingStep& first_kept) {
  setup_open = false;
  setup.known = true;
  setup.end = first_kept.begin;
  setup.api.clear();
  for (const auto& [name, a] : setup_api) setup.api.push_back(a);
  ++setup.version;
}


void StepAccountant::Impl::account_window(StepRow& row, const PendingStep& s, DeviceState* dev) {
  window_ops.clear();
  window_first_uses = 0;
  if (dev != nullptr) take_window_ops(row, s, *dev);
  row.first_use_kernels = window_first_uses;
  if (dev == nullptr || !counters.has(row.device)) {
    sweep.account(row, s.thread, window_ops, host, segment_sink);
    stats.add(Stat::data_waits_inferred, sweep.take_inferred_data_waits());
    return;
  }
  // Counter samples need the window's category segments (counter_attribution.h).
  window_segments.clear();
  const SegmentSink collect = [this](const CategorySegment& seg) {
    window_segments.push_back(seg);
    if (segment_sink) segment_sink(seg);
  };
  sweep.account(row, s.thread, window_ops, host, collect);
  stats.add(Stat::data_waits_inferred, sweep.take_inferred_data_waits());
  const auto walls = attribute_counters_by_wall(
      window_segments, counters.overlapping(row.device, row.window_begin, row.window_end));
  row.counters = walls[static_cast<size_t>(Wall::kCompute)];
  counters.drop_through(row.device, row.window_end);
}

// ---- what drives it: the watermark and the end of the stream ------------------------------

void StepAccountant::advance_watermark(TimeNs watermark) {
  if (impl_->finished || watermark <= impl_->watermark) return;
  impl_->watermark = watermark;
  impl_->owed.on_watermark();
  impl_->convert_boundaries(false);
  impl_->check_held_events();
  impl_->try_finalize(false);
}

void StepAccountant::finish() {
  if (impl_->finished) return;
  impl_->convert_boundaries(true);
  impl_->finished = true;
  impl_->try_finalize(true);
  for (auto& [id, dev] : impl_->devices) {
    impl_->stats.add(Stat::ops_outside_steps, static_cast<int64_t>(dev.live()));
    dev.pending.clear();
    dev.head = dev.sorted = 0;
  }
  impl_->counters.clear();
}

}  // namespace gpuacct
