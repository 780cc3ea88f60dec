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
#include <limits>
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

  // The steps the timeline shows, by step index, `first` included and `end` not (`gpuacct
  // timeline --steps A:B`); every step by default.  Set before any event arrives.  The
  // timeline then holds those steps' rows and wall segments, and the events that overlap the
  // span of their windows and host ranges.  Events are dropped as they come once they cannot
  // overlap it, so memory holds about what is written, not the whole input: a device's
  // windows tile its timeline in step order (docs/accounting.md §1) and host ranges come in
  // step order, so the earliest begin among a step's rows bounds where every later step's
  // rows begin; the span ends once a row past the range arrived (rows come in step order).
  struct StepRange {
    int64_t first = 0;
    int64_t end = std::numeric_limits<int64_t>::max();
  };
  void set_step_range(StepRange range) { range_ = range; }

  void on_gpu_op(const GpuOp& op) override {
    if (wanted(op.start, op.end)) ops_.push_back(op), held();
  }
  void on_api_call(const HostApiCall& call) override {
    if (wanted(call.start, call.end)) calls_.push_back(call), held();
  }
  void on_range(const HostRange& range) override {
    if (wanted(range.start, range.end)) ranges_.push_back(range), held();
  }
  void on_marker(const Marker& marker) override {
    if (wanted(marker.ts, marker.ts)) markers_.push_back(marker), held();
  }

  // Wire to StepAccountant::set_segment_sink / set_row_sink.
  void on_segment(const CategorySegment& seg) {
    if (seg.step_index >= range_.first && seg.step_index < range_.end) segments_.push_back(seg);
  }
  void on_step_row(const StepRow& row);
  void set_metadata(const RunMetadata& meta) { meta_ = meta; }
  // The rows in the range, as received, in step order.
  const std::vector<StepRow>& rows() const { return rows_; }
  // 1 + the highest step index of every row received, in the range or not.
  int64_t steps_seen() const { return steps_seen_; }

  size_t events() const;  // what the timeline shows
  // Events held now (the writer's memory; with a step range, fewer than it received).
  size_t held_events() const {
    return ops_.size() + calls_.size() + ranges_.size() + markers_.size();
  }

  std::string to_json() const;
  // Writes the same text to `path`, a megabyte at a time, atomically (OutputFile: the name
  // appears only when everything was written; a failed write leaves nothing).
  Status write(const std::string& path) const;

 private:
  class Out;  // the JSON being written (timeline_writer.cc)
  void write_all(Out& out) const;
  // An event from `start` to `end` may overlap the steps' span (as far as is known yet).
  bool wanted(TimeNs start, TimeNs end) const { return end >= floor_ && start <= ceiling_; }
  // It overlaps the span of the rows in the range (every event without a range).
  bool shown(TimeNs start, TimeNs end) const {
    return !ranged() || (end >= span_begin_ && start <= span_end_);
  }
  bool ranged() const {
    return range_.first > 0 || range_.end != std::numeric_limits<int64_t>::max();
  }
  void held();                 // after an event was kept: drop what fell behind, now and then
  void raise_floor(TimeNs t);  // events ending before `t` can no longer overlap the span
  void drop_unwanted();
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

  StepRange range_;
  int64_t steps_seen_ = 0;
  static constexpr TimeNs kNoTime = std::numeric_limits<TimeNs>::min();
  TimeNs floor_ = kNoTime;                                  // see wanted()
  TimeNs ceiling_ = std::numeric_limits<TimeNs>::max();     // see wanted()
  int64_t before_index_ = -1;     // the latest step index before the range seen
  TimeNs before_begin_ = 0;       // the earliest begin among its rows
  TimeNs span_begin_ = std::numeric_limits<TimeNs>::max();  // the rows in the range: the
  TimeNs span_end_ = kNoTime;                               // earliest begin, latest end
  size_t held_at_last_drop_ = 0;  // events held after the last drop_unwanted()
};

}  // namespace gpuacct
