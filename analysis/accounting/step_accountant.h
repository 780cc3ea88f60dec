// StepAccountant: the incremental core.  Sources push batches of events in any order; the
// accountant groups them into steps, and once a step can no longer change it splits each
// device's step window into exclusive categories (docs/accounting.md), emits one StepRow per
// device taking part (from the first step that ends after an op was launched on the device; a
// host-only row before any, §1), and frees the step's state.  Memory is bounded by the events
// in flight, not by the length of the run.
//
// Watermark contract: advance_watermark(W) promises that every event whose end (or, for a
// marker, whose timestamp) is < W has already been delivered.  Events that arrive later than
// that for an already-finalised step are dropped and counted (Stat::late_*), never silently.
// finish() declares the stream complete and finalises everything left.
//
// Threading: not thread-safe; one owner thread (the injected library's worker, or the CLI).
//
// Implementation: step_accountant.cc (intake), step_finalization.cc (steps, when a step can be
// finalised, the ops it owns), step_accountant_impl.h (the state both share), host_state.{h,cc}
// (launch calls by correlation id, per-thread calls and data ranges, nested calls), device_state.h
// (each device's pending ops), window_sweep.{h,cc} (the sweep of one window and its idle gaps),
// owed_launches.h (launches still waiting for their op, graph launches included; delivery
// progress), delivery_lag.h (how late GPU records came).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "analysis/accounting/accounting_config.h"
#include "analysis/accounting/delivery_lag.h"
#include "analysis/accounting/setup_tally.h"
#include "analysis/accounting/step_row.h"
#include "analysis/model/event_sink.h"
#include "analysis/model/events.h"
#include "analysis/model/stats.h"

namespace gpuacct {

struct IdleGap {
  int64_t step_index = 0;
  uint16_t device = 0;
  TimeNs start = 0;
  TimeNs end = 0;
  int64_t data_wait = 0;
  int64_t launch_gap = 0;
  int64_t host_other = 0;
  NameId next_op = kNoName;       // the op that ended the gap
  NameId host_context = kNoName;  // data range or CUDA call the host was in, if any
  uint32_t thread = 0;            // launching thread of next_op (0 = unknown)
  bool op_was_queued = false;     // next_op had been submitted before the gap began

  int64_t length() const { return end - start; }
  // The idle category holding most of the gap (ties: data wait, then launch gap): what the host
  // was mostly doing, for the "largest idle gaps" list.
  Category dominant() const;
};

// Exposed time attributed to one kernel name: compute time split equally among concurrently
// running compute kernels, exposed communication split among concurrent collectives.  The sum
// over all names equals compute + comm_exposed.
struct KernelExposure {
  NameId name = kNoName;
  int64_t exposed_ns = 0;
  int64_t count = 0;
  bool communication = false;
};

// A maximal interval of one category on one device: for timelines.
struct CategorySegment {
  uint16_t device = 0;
  int64_t step_index = 0;
  TimeNs start = 0;
  TimeNs end = 0;
  Category category = Category::kCompute;
};

class StepAccountant final : public EventSink {
 public:
  using RowSink = std::function<void(const StepRow&)>;
  using SegmentSink = std::function<void(const CategorySegment&)>;

  explicit StepAccountant(AccountingConfig config = {});
  ~StepAccountant() override;
  StepAccountant(const StepAccountant&) = delete;
  StepAccountant& operator=(const StepAccountant&) = delete;

  // Called for every finalised row, in step order (rows of one step in device order).
  void set_row_sink(RowSink sink);
  // Optional: called with every classified interval (costs time; for timeline export).
  void set_segment_sink(SegmentSink sink);

  void add(const EventBatch& batch);
  void add_gpu_op(const GpuOp& op);
  void add_api_call(const HostApiCall& call);
  void add_range(const HostRange& range);
  void add_marker(const Marker& marker);
  // A hardware counter sample: attributed to the rows whose compute time it overlaps
  // (counter_attribution.h, docs/counters.md); late ones are dropped and counted.
  void add_counter_sample(const CounterSample& sample);

  void advance_watermark(TimeNs watermark);
  void finish();

  // EventSink: the same as add_* / advance_watermark.
  void on_gpu_op(const GpuOp& op) override { add_gpu_op(op); }
  void on_api_call(const HostApiCall& call) override { add_api_call(call); }
  void on_range(const HostRange& range) override { add_range(range); }
  void on_marker(const Marker& marker) override { add_marker(marker); }
  void on_watermark(TimeNs watermark) override { advance_watermark(watermark); }
  void on_counter_sample(const CounterSample& sample) override { add_counter_sample(sample); }

  const std::vector<StepRow>& rows() const;
  // What the run did before its first step (setup_tally.h); known once that step is
  // finalised.  Detected steps folded into set-up are no longer in rows().
  const SetupTally& setup() const;
  std::vector<KernelExposure> kernel_exposure() const;  // summary steps only, unsorted
  const std::vector<IdleGap>& largest_gaps() const;     // summary steps only, longest first
  const Stats& stats() const;
  Stats& mutable_stats();
  const AccountingConfig& config() const;
  // How late GPU records came behind the watermark, and the most events held waiting.
  const DeliveryLag& delivery_lag() const;

  // Bytes currently held for unfinalised steps (for the memory benchmark and self-checks).
  size_t retained_events() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuacct
