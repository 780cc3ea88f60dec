// The per-step JSONL stream, <base>.steps.jsonl: a header line, one line per finalised step
// row, now and then a provisional summary line, and a trailer with the run's final summary and
// verdict.  Written by the worker while the job runs, one write(2) per line, so a SIGKILL
// leaves every finished row on disk.
//
// Set-up line, once set-up is known (the first kept step finalised), again whenever it changes
// (detected steps folded into it when the program's own step marks began, docs/accounting.md):
//   {"setup": {...}}   the report's "setup" section (analysis/report/report.h setup_json).
// Its "folded_step_indices": [a, b] names rows written before that are set-up, not steps: a
// reader leaves them out (analysis/input/step_stream_reader.h); the last setup line counts.
//
// Summary lines (provisional and the trailer; the content is the pipeline's,
// inject/pipeline/pipeline.h):
//   {"summary": {...}, "verdict": {...}, "provisional": true|false, "step_rows": N,
//    "data_loss": bool, "stats": [{"name": "<counter>", "value": v, "severity": "..."}, ...]}
// summary, verdict and data_loss are the report's (analysis/report/report.cc) over the N step
// rows finalised before the line (the stream's rows before it, lost ones included); stats holds
// the report's counters that are not zero at that moment.
//
// Every write is checked.  When one fails (disk full, quota, I/O error) the part of the line
// that got out is cut off again (ftruncate to the last complete line), the row is counted as
// lost (Stat::stream_rows_lost, a data-loss counter the report prints) and one line goes to
// stderr.  Each later row tries again; the write that succeeds first says what is missing, in
// the same write(2) as the row:
//   - the header, if it never got out;
//   - a gap line: {"gap": {"rows_lost": N, "first_step_index": a, "last_step_index": b,
//                          "error": "No space left on device"}}
// so the stream is never silently incomplete.  Every line is serialised by dump_json
// (analysis/model/json_text.h): valid UTF-8 whatever the names held.  The file is opened as
// the library's own output in a directory others may write to (analysis/model/file_io.h
// open_in_place, kOwnFilesOnly): never through a planted link or into another user's file; a
// fresh name then, said in one line, and path() is that name.  Not thread-safe: the worker
// owns it.
#pragma once

#include <cstdint>
#include <string>

#include "analysis/model/stats.h"

namespace gpuacct::inject {

class StepStream {
 public:
  StepStream() = default;
  ~StepStream();
  StepStream(const StepStream&) = delete;
  StepStream& operator=(const StepStream&) = delete;

  // Where the stream goes and its first line (no newline).  Lost rows are counted in `stats`.
  // The file is created with the first row.
  void configure(std::string path, std::string header, Stats* stats);
  // One step row (a JSON object on one line, no newline).
  void write_row(const std::string& line, int64_t step_index);
  // A provisional summary line, after at least one row; false if it could not be written
  // (not said and not counted: no row is lost, and the next summary line replaces it).
  bool write_summary(const std::string& line);
  // A set-up line, after at least one row; false if it could not be written (the next one, or
  // the report, says the same).
  bool write_setup(const std::string& line);
  // The last line, after at least one row; false if it could not be written (said on stderr).
  bool write_trailer(const std::string& line);
  void close();

  const std::string& path() const { return path_; }
  int64_t rows_lost() const { return rows_lost_; }

 private:
  bool ensure_open();
  // Writes what is owed (header, gap line) and `line`, newline-terminated, in one write;
  // false when that did not get out whole (nothing of it stays in the file).
  bool write_line(const std::string& line);
  bool write_text(const std::string& text);
  void lost(int64_t step_index);

  std::string path_;
  std::string header_;
  Stats* stats_ = nullptr;
  int fd_ = -1;
  bool open_failed_ = false;  // creating the file failed for good: every row is lost
  bool open_message_said_ = false;
  bool rows_seen_ = false;
  bool header_written_ = false;
  uint64_t good_bytes_ = 0;  // end of the last complete line
  bool torn_line_ = false;   // a partial line could not be cut off: start the next on a new line
  int64_t rows_lost_ = 0;
  int64_t gap_rows_ = 0;  // lost since the last line that got out
  int64_t gap_first_ = -1, gap_last_ = -1;
  std::string gap_error_;
  int failure_messages_ = 0;  // a flapping disk must not flood stderr
};

}  // namespace gpuacct::inject
