// Reading a live run's step stream (<base>.steps.jsonl, written by inject/output/step_stream.h):
// the header line, one line per finalised step row, summary lines, gap lines, and -- when the run
// finished -- a closing summary line.  A job killed with SIGKILL leaves every row it finalised
// and no closing line; this reader takes all of its rows, so `gpuacct report` and
// `gpuacct analyze` summarise them with the one C++ summary (analysis/report/report.h).
//
// What the lines hold:
//   header   {"schema": "gpuacct.steps/1", "source": ..., "hostname": ..., "pid": ..., "rank": ...,
//             "world_size": ..., "job_id": ... (both absent in streams written before them)}
//   row      report.h step_row_to_json (step_row_from_json below is its inverse)
//   summary  {"summary": ..., "verdict": ..., "provisional": bool, "step_rows": N,
//             "stats": [{"name", "value", "severity"}, ...]}: the counters at that moment
//   gap      {"gap": {"rows_lost": N, ...}}: rows a full disk kept out
// Recognised by content: the first line is a JSON object whose "schema" is gpuacct.steps/1.
//
// Tolerated, said in the result: no closing summary line (the writer was killed: counted as
// Stat::inputs_cut_off, the counters are those of the last summary line); a last line without
// its newline that does not parse (cut while it was copied); a line in the middle that does
// not parse (a writer that could not cut off a torn line starts the next on a line of its own):
// skipped and counted (Stat::importer_events_skipped).  A row line with a field missing or of
// the wrong type is an error naming the line.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/step_row.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/stats.h"
#include "analysis/model/status.h"

namespace gpuacct {

inline constexpr const char* kStepStreamSchema = "gpuacct.steps/1";

// True if `first_line` (the file's first line, or its first bytes) is a step stream's header.
bool looks_like_step_stream(std::string_view first_line);

// The inverse of step_row_to_json (analysis/report/report.h): every field it writes that a
// StepRow holds.  Walls, duration and host_only are derived, not read.
StatusOr<StepRow> step_row_from_json(const nlohmann::json& row);

struct StepStreamContents {
  RunMetadata metadata;       // from the header: source, hostname, pid, rank, world_size, job_id
  std::vector<StepRow> rows;  // every row line, in stream order
  Stats stats;                // the last summary line's counters, and what reading counted
  bool finished = false;      // the closing summary line is there
  int64_t summary_lines = 0;
  int64_t rows_in_last_summary = 0;  // its "step_rows": the rows before it
  int64_t rows_lost = 0;             // gap lines: rows the writer could not write
  uint64_t bytes_cut = 0;            // a last line cut before its newline, left out
  uint64_t bytes = 0;                // read, the cut line included
  // The last set-up line's section (inject/output/step_stream.h), null if none; the rows it names
  // as folded into set-up are not in `rows`.
  nlohmann::json setup;
};

// The one parser of a step stream's lines, and the one policy for lines that are not what they
// should be (above): read_step_stream takes a whole stream through it, the job view
// (analysis/job/rank_inputs.h) a row at a time.  Feed every line in order, then finish().
class StepStreamParser {
 public:
  enum class Line { kHeader, kRow, kSummary, kSetup, kGap, kSkipped, kCut };
  explicit StepStreamParser(std::string label) : label_(std::move(label)) {}
  // `text` without its newline; `has_newline` false for a last line the file ends without.
  // An error: line 1 is no step stream's header, or a row line holds no row (the error names
  // the line); the stream is not to be used then.
  StatusOr<Line> feed(std::string_view text, bool has_newline);
  // The row of the last kRow line.
  const StepRow& row() const { return row_; }
  // At the end of the stream: an error for an empty one; the counters the end decides (rows
  // lost to gaps, a stream without its closing line).
  Status finish();

  // What was read so far (rows are not kept: the caller takes each from row()).
  const StepStreamContents& contents() const { return state_; }
  int64_t lines() const { return line_number_; }
  int64_t lines_skipped() const { return skipped_; }

 private:
  std::string label_;
  StepStreamContents state_;
  StepRow row_;
  int64_t line_number_ = 0;
  int64_t skipped_ = 0;
};

// The step indices [first, last] a set-up line names as folded into set-up ({0, -1}: none).
std::pair<int64_t, int64_t> folded_step_indices(const nlohmann::json& setup);

StatusOr<StepStreamContents> read_step_stream(std::istream& in, const std::string& label);
StatusOr<StepStreamContents> read_step_stream_file(const std::string& path);

}  // namespace gpuacct
