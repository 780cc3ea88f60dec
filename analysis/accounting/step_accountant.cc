// The accounting rules implemented here are written down in docs/accounting.md; each rule
// has a unit test in step_accountant_test.cc.  Read that document first.
// This file: events in (intake) and the accessors; steps are finalised in step_finalization.cc,
// on the state both share (step_accountant_impl.h).
#include "analysis/accounting/step_accountant.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "analysis/accounting/step_accountant_impl.h"

namespace gpuacct {

using accounting::CorrEntry;
using accounting::DeviceState;
using accounting::kMinTime;
using accounting::kUnresolved;
using accounting::PendingOp;
using accounting::PendingStep;

Category IdleGap::dominant() const {
  if (data_wait >= launch_gap && data_wait >= host_other) return Category::kDataWait;
  if (launch_gap >= host_other) return Category::kLaunchGap;
  return Category::kHostOther;
}

namespace {

// Timestamps the accounting accepts: [-2^62, 2^62) (+-146 years around the epoch).  Any two of
// them differ by less than 2^63, so window lengths, gaps and "t + timeout" never overflow;
// events outside are garbage (a corrupt record) and are skipped as invalid.
constexpr TimeNs kValidTimeLimit = TimeNs{1} << 62;
bool valid_time(TimeNs t) {
  return t >= -kValidTimeLimit && t < kValidTimeLimit;
}
bool valid_interval(TimeNs start, TimeNs end) {
  return valid_time(start) && valid_time(end) && end >= start;
}

}  // namespace

// ---- intake ----------------------------------------------------------------------------

void StepAccountant::Impl::add_gpu_op(const GpuOp& op) {
  stats.add(Stat::gpu_ops_received);
  if (!valid_interval(op.start, op.end) || op.device == kHostOnlyDevice) {
    stats.add(Stat::invalid_events_skipped);
    return;
  }
  // Consecutive ops are usually on the same device: skip the map lookup.
  if (last_device == nullptr || last_device_id != op.device) {
    last_device = &devices[op.device];
    last_device_id = op.device;
  }
  DeviceState& dev = *last_device;
  note_first_event(op.start);
  // A watermark can be anything a recording says; clamped to the valid range, the difference
  // of two valid times cannot overflow.
  lag.add(watermark > op.end ? std::min(watermark, kValidTimeLimit - 1) - op.end : 0);
  if (dev.has_window ? op.end <= dev.finalized_until || launched_in_finalized_step(op)
                     : late_for_new_device(op)) {
    stats.add(Stat::late_gpu_ops_dropped);
    return;
  }
  dev.pending.push_back(PendingOp{op, kUnresolved});
  ++intake_epoch;
  if (op.correlation_id != 0) {
    CorrEntry& e = host.corr[op.correlation_id];
    e.has_op = true;
    e.op_end = std::max(e.op_end, op.end);
    // Node by node, a graph launch has one op per node, so more may follow the first; as one
    // span (GRAPH_TRACE) the op is the launch's only one and settles it at once.
    e.graph = e.graph || (op.graph_id != 0 && (op.flags & kGpuOpGraphSpan) == 0);
    if (e.has_api) owed.delivered(e.api_start);
  }
}

// A sample is late once its device's finalised windows reach past its end; before the
// device's first window, once it ended before the last finalised step did (the first window
// begins at a later step's begin): it lies outside every window, like an op there.
void StepAccountant::Impl::add_counter_sample(const CounterSample& sample) {
  if (!counter_sample_valid(sample) || !valid_interval(sample.start, sample.end)) {
    stats.add(Stat::invalid_events_skipped);
    return;
  }
  const auto it = devices.find(sample.device);
  if (it != devices.end() && it->second.has_window) {
    if (sample.end <= it->second.finalized_until) {
      stats.add(Stat::late_counter_samples_dropped);
      return;
    }
  } else if (sample.end <= last_step_end) {
    return;
  }
  counters.add(sample);
}

void StepAccountant::Impl::add_api_call(const HostApiCall& call) {
  stats.add(Stat::api_calls_received);
  if (!valid_interval(call.start, call.end)) {
    stats.add(Stat::invalid_events_skipped);
    return;
  }
  if (call.end < host_cutoff) {
    stats.add(Stat::late_host_events_dropped);
    return;
  }
  host.thread_host(call.thread).calls.push_back(call);  // sorted lazily (sort_all)
  host.note_call(call.thread, call.start);
  note_first_event(call.start);
  if (call.correlation_id != 0 &&
      (call.kind == HostApiKind::kLaunch || call.kind == HostApiKind::kCopy)) {
    CorrEntry& e = host.corr[call.correlation_id];
    // Correlation ids should be unique; when a bad source repeats one, the earliest call
    // wins, so the result does not depend on the order the calls were delivered in.
    if (e.has_api && std::tie(e.api_start, e.thread, e.api_name) <=
                         std::tie(call.start, call.thread, call.name)) {
      return;
    }
    e.api_start = call.start;
    e.api_end = call.end;
    e.thread = call.thread;
    e.api_name = call.name;
    e.has_api = true;
    ++intake_epoch;
    // A graph launch is owed even when one of its ops came before the call did: more may follow.
    if (!e.has_op || e.graph) owed.add({call.start, call.end, call.correlation_id, call.thread});
    if (e.has_op) owed.delivered(call.start);
  }
}

// An op for a device without windows yet that can no longer count: launched (as far as is
// known) before the last finalised step ended -- that step was finalised without the device,
// after waiting for every launch made before its end -- or, launch unknown, run before then.
bool StepAccountant::Impl::late_for_new_device(const GpuOp& op) const {
  if (last_step_end == kMinTime) return false;
  const CorrEntry* e = host.launch_of(op);
  return e != nullptr ? e->api_start < last_step_end : op.end <= last_step_end;
}

// An op whose launch call came before the last finalised step ended: that step (or the one it
// was launched before) was finalised without it -- a graph's later kernel, a launch given up
// or cut off -- so it can only be dropped, counted; all at once it would be in that window.
bool StepAccountant::Impl::launched_in_finalized_step(const GpuOp& op) const {
  const CorrEntry* e = host.launch_of(op);
  return e != nullptr && last_step_end != kMinTime && e->api_start < last_step_end;
}

void StepAccountant::Impl::add_range(const HostRange& r) {
  stats.add(Stat::ranges_received);
  if (!valid_interval(r.start, r.end)) {
    stats.add(Stat::invalid_events_skipped);
    return;
  }
  switch (r.kind) {
    case RangeKind::kStep: {
      const PendingStep s{r.start, r.end,          r.number,
                          r.thread, r.name,        step_untraced(r),
                          step_detected(r)};
      if (s.detected) {
        // Detected steps that begin before the program's marks are set-up (folded).
        if (folded) {
          ++setup.folded_steps;
          ++setup.version;
          return;
        }
        saw_detected = true;
      } else if (saw_detected && !folded) {
        fold_detected_before(s.begin);
      }
      // A step that merely touches the last finalised one (a rounding overlap) is kept:
      // try_finalize makes it begin where that one ended, as it does all at once.
      if (fit_after(last_step_begin, last_step_end, s) == StepFit::kOverlaps) {
        stats.add(Stat::late_steps_dropped);
        return;
      }
      push_step(s);
      break;
    }
    case RangeKind::kData: {
      if (r.end < host_cutoff) {
        stats.add(Stat::late_host_events_dropped);
        return;
      }
      host.thread_host(r.thread).data.push_back(r);  // sorted lazily (sort_all)
      host.earliest_data_end = std::min(host.earliest_data_end, r.end);
      break;
    }
    case RangeKind::kUser:
      break;  // shown by timelines; not used for accounting
  }
}

void StepAccountant::Impl::add_marker(const Marker& m) {
  stats.add(Stat::markers_received);
  if (!valid_time(m.ts)) {
    stats.add(Stat::invalid_events_skipped);
    return;
  }
  switch (m.kind) {
    case MarkerKind::kStepBoundary:
      if (saw_detected && !folded) fold_detected_before(m.ts);
      if (m.ts < last_step_end) {
        stats.add(Stat::late_steps_dropped);
        return;
      }
      boundaries.push_back(m);
      break;
    case MarkerKind::kStepFlops:
      flops_markers.push_back(m);
      break;
    case MarkerKind::kStepTokens:
    case MarkerKind::kStepSamples:
      // A count of work: anything but a finite positive number is a caller's mistake.
      if (!(m.value > 0) || !std::isfinite(m.value)) {
        stats.add(Stat::invalid_events_skipped);
        return;
      }
      work_markers.push_back(m);
      break;
    case MarkerKind::kInstant:
      break;
  }
}

// The program's first marked step begins at `t`: every step detected before it is set-up
// (docs/accounting.md, *Set-up*).  The rows already emitted are taken back (only detected steps
// made rows before a marked step came) and their numbers added to set-up; detected steps not yet
// finalised are dropped; each device's next window restarts at its step's host begin, and the
// warm-up counts from that step.
void StepAccountant::Impl::fold_detected_before(TimeNs t) {
  folded = true;
  int64_t last_index = -1;
  TimeNs folded_until = accounting::kMinTime;
  auto keep = rows.begin();
  for (auto it = rows.begin(); it != rows.end(); ++it) {
    if (it->host_begin >= t) {
      *keep++ = *it;
      continue;
    }
    setup.gpu_busy_ns = saturating_add(setup.gpu_busy_ns, it->gpu_busy);
    setup.kernels += it->kernels;
    setup.copies += it->copies;
    if (it->step_index != last_index) {  // once per step: every row of it has its launches
      setup.launches += it->launches;
      ++setup.folded_steps;
      if (setup.folded_first_index < 0) setup.folded_first_index = it->step_index;
      setup.folded_last_index = it->step_index;
      last_index = it->step_index;
    }
    folded_until = std::max(folded_until, it->host_end);
  }
  rows.erase(keep, rows.end());
  const auto pending_end = std::remove_if(steps.begin(), steps.end(), [&](const PendingStep& p) {
    return p.detected && p.begin < t;
  });
  setup.folded_steps += std::distance(pending_end, steps.end());
  steps.erase(pending_end, steps.end());
  for (auto& [id, dev] : devices) dev.restart = dev.has_window;
  host_only_restart = host_only_until != accounting::kMinTime;
  // The marked step may begin inside the last folded one (the marks came a watermark late):
  // it is not an overlap with a step that no longer exists.
  last_step_begin = last_step_end = accounting::kMinTime;
  warmup_base = next_step_index;
  setup_open = true;
  setup.known = false;  // until the first kept step: set-up then ends at its begin
  setup_calls_from = std::max(setup_calls_from, folded_until);
  ++setup.version;
}

StepAccountant::StepAccountant(AccountingConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = config;
}
StepAccountant::~StepAccountant() = default;

void StepAccountant::set_row_sink(RowSink sink) {
  impl_->row_sink = std::move(sink);
}
void StepAccountant::set_segment_sink(SegmentSink sink) {
  impl_->segment_sink = std::move(sink);
}

void StepAccountant::add(const EventBatch& batch) {
  for (const auto& e : batch.gpu_ops) impl_->add_gpu_op(e);
  for (const auto& e : batch.api_calls) impl_->add_api_call(e);
  for (const auto& e : batch.ranges) impl_->add_range(e);
  for (const auto& e : batch.markers) impl_->add_marker(e);
  for (const auto& e : batch.counter_samples) impl_->add_counter_sample(e);
}
void StepAccountant::add_counter_sample(const CounterSample& sample) {
  impl_->add_counter_sample(sample);
}
void StepAccountant::add_gpu_op(const GpuOp& op) {
  impl_->add_gpu_op(op);
}
void StepAccountant::add_api_call(const HostApiCall& call) {
  impl_->add_api_call(call);
}
void StepAccountant::add_range(const HostRange& range) {
  impl_->add_range(range);
}
void StepAccountant::add_marker(const Marker& marker) {
  impl_->add_marker(marker);
}

const std::vector<StepRow>& StepAccountant::rows() const {
  return impl_->rows;
}

const SetupTally& StepAccountant::setup() const {
  return impl_->setup;
}

std::vector<KernelExposure> StepAccountant::kernel_exposure() const {
  std::vector<KernelExposure> out;
  const std::vector<KernelExposure>& exposure = impl_->sweep.exposure();
  out.reserve(exposure.size());
  for (const KernelExposure& k : exposure) {
    if (k.exposed_ns > 0 || k.count > 0) out.push_back(k);
  }
  return out;
}

const std::vector<IdleGap>& StepAccountant::largest_gaps() const {
  impl_->gaps_sorted = impl_->sweep.gaps();
  std::sort(impl_->gaps_sorted.begin(), impl_->gaps_sorted.end(),
            [](const IdleGap& a, const IdleGap& b) { return a.length() > b.length(); });
  return impl_->gaps_sorted;
}

const Stats& StepAccountant::stats() const {
  return impl_->stats;
}
Stats& StepAccountant::mutable_stats() {
  return impl_->stats;
}
const AccountingConfig& StepAccountant::config() const {
  return impl_->cfg;
}
const DeliveryLag& StepAccountant::delivery_lag() const {
  return impl_->lag;
}

size_t StepAccountant::retained_events() const {
  size_t n = impl_->host.corr.size() + impl_->steps.size() + impl_->boundaries.size() +
             impl_->flops_markers.size() + impl_->work_markers.size() + impl_->counters.size();
  for (const auto& [id, dev] : impl_->devices) n += dev.live();
  // Each known thread holds state of its own, even with no event left.
  for (const auto& [tid, th] : impl_->host.threads) n += 1 + th.calls.size() + th.data.size();
  return n;
}

}  // namespace gpuacct
