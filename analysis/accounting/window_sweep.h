// The sweep over one step window on one device, internal to accounting/ (StepAccountant): it
// splits the window into the exclusive categories (docs/accounting.md §2), classifies its idle
// gaps by what the host did ("Idle gaps"), and keeps what the run summary lists -- the exposed
// time per kernel name and the largest idle gaps.
//
// Cost: O(n log n) in the window's ops (a radix sort of their endpoints, then one pass); no
// allocation once the scratch buffers have grown to the largest window.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "analysis/accounting/accounting_config.h"
#include "analysis/accounting/host_state.h"
#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_row.h"

namespace gpuacct::accounting {

class WindowSweep {
 public:
  // The run's list keeps kGapHeadroom x top_gaps gaps, at most top_gaps of each row: the run
  // summary later leaves out slow-start steps (analysis/report/run_summary.h), whose gaps are
  // often the run's longest, and the report lists the top_gaps longest of the rest -- exact
  // while at most kGapHeadroom - 1 rows are left out.
  static constexpr size_t kGapHeadroom = 4;

  explicit WindowSweep(const AccountingConfig& cfg) : cfg_(cfg) {}

  // Accounts row's window [window_begin, window_end): fills row.cat (which sums to the window
  // exactly), gpu_busy, comm_total and comm_overlapped.  `ops`: the window's GPU ops in start
  // order (clipped to the window).  `step_thread`: the step range's thread, where idle time
  // with no known launch call is examined.  Rows that are not warm-up also feed
  // kernel_exposure() and gaps().  `segments` (optional) receives the merged category
  // intervals.
  void account(StepRow& row, uint32_t step_thread, const std::vector<GpuOp>& ops, HostState& host,
               const std::function<void(const CategorySegment&)>& segments);

  const std::vector<KernelExposure>& exposure() const { return exposure_; }  // by NameId
  const std::vector<IdleGap>& gaps() const { return gaps_; }                 // a heap: any order
  // Idle gaps whose data wait was inferred (AccountingConfig::infer_data_wait), since the last
  // call: the accountant adds them to its stats.
  int64_t take_inferred_data_waits() { return std::exchange(inferred_data_waits_, 0); }

 private:
  // How an idle gap splits, and what the host was doing.
  struct IdleSplit {
    int64_t data = 0;
    int64_t launch = 0;
    int64_t other = 0;
    NameId context = kNoName;  // data range or CUDA call the host was in, if any
    bool queued = false;       // the next op had been submitted before the gap began
  };

  void build_sorted_endpoints(TimeNs ws, TimeNs we);
  void sweep();
  void add_busy(TimeNs a, TimeNs b, const int count[4]);
  const GpuOp* op_ending_gap(size_t i, TimeNs t) const;
  void attribute(Category cls, int64_t len);
  KernelExposure& exposure_of(NameId name) {
    if (name >= exposure_.size()) exposure_.resize(static_cast<size_t>(name) + 1);
    KernelExposure& k = exposure_[name];
    k.name = name;
    return k;
  }
  void segment(TimeNs a, TimeNs b, Category c);
  void flush_segment();

  // Idle gaps (docs/accounting.md "Idle gaps").
  Category classify_idle(TimeNs g0, TimeNs g1, const GpuOp* next);
  NameId collect_data_ranges(const ThreadHost* th, TimeNs g0, TimeNs g1);
  int64_t data_in(TimeNs a, TimeNs b) const;
  void split_by_pauses(const ThreadHost* th, TimeNs a, TimeNs b, IdleSplit* split) const;
  void split_by_length(int64_t len, IdleSplit* split) const;
  void infer_input_wait(const ThreadHost* th, TimeNs g0, TimeNs call_start, IdleSplit* split);
  void keep_gap(const IdleGap& gap);
  static void keep_longest(std::vector<IdleGap>& heap, const IdleGap& gap, size_t cap);

  const AccountingConfig& cfg_;
  int64_t inferred_data_waits_ = 0;

  // The window being accounted.
  StepRow* row_ = nullptr;
  uint32_t step_thread_ = 0;
  const std::vector<GpuOp>* ops_ = nullptr;
  HostState* host_ = nullptr;
  const std::function<void(const CategorySegment&)>* segments_ = nullptr;
  bool summary_step_ = false;
  // Consecutive intervals of one category merge into one timeline segment.
  bool seg_open_ = false;
  Category seg_cat_ = Category::kCompute;
  TimeNs seg_start_ = 0;
  TimeNs seg_end_ = 0;

  std::vector<KernelExposure> exposure_;  // indexed by NameId (ids are dense)
  std::vector<IdleGap> gaps_;      // min-heap on length, capacity kGapHeadroom x cfg.top_gaps
  std::vector<IdleGap> row_gaps_;  // the row being swept: min-heap, capacity cfg.top_gaps

  // Scratch reused across windows.
  struct Endpoint {
    TimeNs t;
    uint32_t op;  // index into ops_
    int8_t delta;
    uint8_t cls;  // the op's busy Category
  };
  std::vector<Endpoint> endpoints_;
  std::vector<uint64_t> packed_;
  std::vector<uint64_t> starts_;
  std::vector<uint64_t> ends_;
  std::vector<uint64_t> radix_scratch_;
  std::vector<uint32_t> active_[4];
  std::vector<std::pair<TimeNs, TimeNs>> data_scratch_;
};

}  // namespace gpuacct::accounting
