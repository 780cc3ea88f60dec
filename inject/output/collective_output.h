// The live library's collectives rows file, <base>.collectives.csv (schema gpuacct.collectives/1,
// analysis/model/collective_rows.h): one row per collective / p2p of this rank, streamed by the
// worker as steps are finalised, committed at exit.  Written only when the run had collectives.
//
// Where a row's identity comes from (the file header's `identity`, one for the whole file):
//   nccl_plugin   NCCL's profiler-plugin records (inject/nccl/nccl_profiler.h) with the GPU
//                 times of their kernels (CollectiveMatcher, inject/nccl/nccl_match.h);
//   kernel_order  no plugin record came: NCCL kernels numbered by order per stream
//                 (analysis/import/kernel_order.h); the header's identity_note says why.
// The choice is made when the first record is ready for its step (a plugin record is drained
// within microseconds of its kernel's launch call, and kernel-order records wait for the
// watermark -- several flush periods -- so a run with plugin events does not start as
// kernel_order); it then holds for the file.  Until plugin
// records are seen the kernel-order numbering runs beside the matcher; it is dropped once the
// file is nccl_plugin.
//
// Steps: CollectiveStepAssigner (analysis/accounting/collective_steps.h), fed the accountant's
// rows.
// Errors: a file that cannot be written is said once (log_line) and its rows counted lost
// (Stat::collective_rows_lost).  Not thread-safe: the worker owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/accounting/collective_steps.h"
#include "analysis/accounting/step_row.h"
#include "analysis/import/kernel_order.h"
#include "analysis/model/collective_rows.h"
#include "analysis/model/events.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/stats.h"
#include "inject/nccl/nccl_match.h"
#include "inject/nccl/nccl_profiler.h"

namespace gpuacct::inject {

class CollectiveOutput {
 public:
  // `path`: <base>.collectives.csv.  `metadata`: the run's metadata for the header (called
  // when the file opens).  `stats`: where losses are counted (the accountant's).
  CollectiveOutput(std::string path, std::function<RunMetadata()> metadata, Stats* stats);

  // Plugin records drained this collect, then the batch the accountant is about to take.
  void add(const std::vector<PluginRecord>& records, const EventBatch& batch);
  // After the accountant's watermark moved: records decided so far go on towards the file.
  void on_watermark(int64_t watermark);
  // Each step row as the accountant finalises it.
  void on_step_row(const StepRow& row);
  // The end (after the accountant's last rows): everything decided, the file committed.
  void finish();

  CollectiveSource identity() const { return mode_; }
  int64_t rows_written() const { return writer_open_ ? writer_.rows() : 0; }
  const std::string& path() const { return path_; }
  // The file being written (until finish(): a temporary name); empty before the first row.
  const std::string& temp_path() const { return writer_.temp_path(); }

 private:
  void to_steps(const CollectiveRecord& record);
  void write(const CollectiveRecord& record);
  void choose(CollectiveSource mode);
  std::string kernel_order_note() const;

  std::string path_;
  std::function<RunMetadata()> metadata_;
  Stats* stats_;
  CollectiveMatcher matcher_;
  std::unique_ptr<KernelOrderIdentity> kernel_order_;
  CollectiveStepAssigner steps_;
  CollectiveRowWriter writer_;
  CollectiveSource mode_ = CollectiveSource::kNone;
  bool writer_open_ = false;
  bool writer_failed_ = false;
  int64_t plugin_records_ignored_ = 0;  // plugin records after the file became kernel_order
  int64_t rows_flushed_ = 0;
  std::vector<CollectiveRecord> decided_;
};

}  // namespace gpuacct::inject
