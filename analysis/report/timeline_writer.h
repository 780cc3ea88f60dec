// Timeline export: a Chrome-trace / Perfetto-loadable JSON file of one analysed run.
//
// Tracks (pid/tid in the Chrome trace):
//   GPU <d>      (pid = device)     one thread per stream (tid = stream) with every GPU op;
//                                   "wall" (first row): the exclusive category of every instant,
//                                   from StepAccountant::set_segment_sink;
//                                   "steps": each step window, with its walls in args.
//   host         (pid = kHostPid)   one thread per host thread: step / data / user ranges and
//                                   CUDA API calls; markers as instant events.
// Times are microseconds with three decimals (exact nanoseconds) relative to the earliest
// event, so large epochs lose no precision.  Strings are written by append_json_string
// (analysis/model/json_text.h, the one place outside bytes become report text): valid UTF-8 is
// kept, quotes / backslashes / control characters are JSON-escaped, and bytes that are not
// UTF-8 are spelled "\xHH", so the output is always strict JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_row.h"
#include "analysis/model/event_sink.h"
#include "analysis/model/events.h"
#include "analysis/model/json_text.h"
#include "analysis/model/name_table.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/status.h"

namespace gpuacct {

class TimelineWriter final : public EventSink {
 public:
  static constexpr int64_t kHostPid = 1 << 20;        // above every device id (uint16)
  static constexpr int64_t kWallTid = 2'000'000'001;  // per-device category track
  static constexpr int64_t kStepTid = 2'000'000'002;  // per-device step windows

  explicit TimelineWriter(const NameTable& names) : names_(names) {}

  void on_gpu_op(const GpuOp& op) override { ops_.push_back(op); }
  void on_api_call(const HostApiCall& call) override { calls_.push_back(call); }
  void on_range(const HostRange& range) override { ranges_.push_back(range); }
  void on_marker(const Marker& marker) override { markers_.push_back(marker); }

  // Wire to StepAccountant::set_segment_sink / set_row_sink.
  void on_segment(const CategorySegment& seg) { segments_.push_back(seg); }
  void on_step_row(const StepRow& row) { rows_.push_back(row); }
  void set_metadata(const RunMetadata& meta) { meta_ = meta; }
  const std::vector<StepRow>& rows() const { return rows_; }  // as received, in step order

  size_t events() const {
    return ops_.size() + calls_.size() + ranges_.size() + markers_.size() + segments_.size() +
           rows_.size();
  }

  std::string to_json() const;
  // Writes to_json() atomically (write_file_atomic).
  Status write(const std::string& path) const;

 private:
  class Out;  // the JSON being written (timeline_writer.cc)
  TimeNs origin() const;  // the earliest time of all: the timeline's 0
  void write_track_names(Out& out) const;
  void write_accounting(Out& out) const;  // the wall track and the step windows
  void write_gpu_ops(Out& out) const;
  void write_host(Out& out) const;  // ranges, CUDA calls, markers

  const NameTable& names_;
  RunMetadata meta_;
  std::vector<GpuOp> ops_;
  std::vector<HostApiCall> calls_;
  std::vector<HostRange> ranges_;
  std::vector<Marker> markers_;
  std::vector<CategorySegment> segments_;
  std::vector<StepRow> rows_;
};

}  // namespace gpuacct
