// The rows of one rank, read a window of steps at a time (analysis/job/rank_inputs.h:
// RankStream and its pulls): rows in memory, a step stream through the one step-stream parser,
// a collectives rows file a chunk at a time.
#include <algorithm>
#include <fstream>
#include <optional>

#include "analysis/input/live_writer.h"
#include "analysis/input/step_stream_reader.h"
#include "analysis/job/rank_inputs.h"
#include "analysis/model/collective_rows.h"

namespace gpuacct {

// ---- pulls ---------------------------------------------------------------------------------

namespace {

template <typename Row, typename Base>
class VectorPull : public Base {
 public:
  explicit VectorPull(std::shared_ptr<const std::vector<Row>> rows) : rows_(std::move(rows)) {}
  bool next(Row* out) override {
    if (rows_ == nullptr || at_ >= rows_->size()) return false;
    *out = (*rows_)[at_++];
    return true;
  }

 private:
  std::shared_ptr<const std::vector<Row>> rows_;
  size_t at_ = 0;
};

// A step stream, one line at a time, through the one parser and its policy for bad lines
// (analysis/input/step_stream_reader.h StepStreamParser): the rows, and the notes of what the
// stream lacks (its closing line, a cut last line, lines skipped, rows its writer lost).
class StepStreamPull : public StepRowPull {
 public:
  StepStreamPull(std::string path, std::ifstream in)
      : path_(std::move(path)), in_(std::move(in)), parser_(path_) {}
  // The header line: false (and error()) when the file is no step stream.
  bool start() {
    std::string header;
    if (!std::getline(in_, header)) {
      error_ = Status::Error(path_ + ": cannot be read");
      return false;
    }
    take(header, !in_.eof());
    return error_.ok();
  }
  bool next(StepRow* out) override {
    std::string text;
    while (!done_ && std::getline(in_, text)) {
      if (take(text, !in_.eof())) {
        *out = parser_.row();
        return true;
      }
    }
    if (!done_) {
      done_ = true;
      if (const Status st = parser_.finish(); !st.ok() && error_.ok()) error_ = st;
    }
    return false;
  }
  // A row line that holds no row: the stream stops there (the policy: an error naming it).
  const Status& error() const { return error_; }
  std::vector<std::string> notes() const override {
    std::vector<std::string> out;
    const StepStreamContents& c = parser_.contents();
    if (!error_.ok()) out.push_back(error_.message() + ": the rows after it are left out");
    if (done_ && error_.ok() && !c.finished) {
      // A rank still running holds its stream open (analysis/input/live_writer.h).
      out.push_back(file_held_by_live_writer(path_, c.metadata)
                        ? path_ + ": still being written (pid " + std::to_string(c.metadata.pid) +
                              " holds it open): its rows so far are used"
                        : path_ +
                              ": the step stream has no closing summary line (its writer was "
                              "killed?): its rows up to the cut are used");
    }
    if (c.bytes_cut > 0) out.push_back(path_ + ": its last line was cut before its newline");
    if (parser_.lines_skipped() > 0) {
      out.push_back(path_ + ": " + std::to_string(parser_.lines_skipped()) +
                    " lines that did not parse, skipped");
    }
    if (c.rows_lost > 0) {
      out.push_back(path_ + ": its writer lost " + std::to_string(c.rows_lost) +
                    " step rows (gap lines)");
    }
    return out;
  }

 private:
  // True for a row line.
  bool take(const std::string& text, bool has_newline) {
    auto line = parser_.feed(text, has_newline);
    if (!line.ok()) {
      error_ = line.status();
      done_ = true;
      return false;
    }
    if (line.value() == StepStreamParser::Line::kCut) done_ = true;
    return line.value() == StepStreamParser::Line::kRow;
  }

  std::string path_;
  std::ifstream in_;
  StepStreamParser parser_;
  Status error_;
  bool done_ = false;
};

// A rows file a chunk of lines at a time: each chunk, behind the file's header and column
// lines, goes through the one rows parser (collective_rows.h), so memory holds one chunk.
class RowsFilePull : public CollectivePull {
 public:
  // Small: every rank holds one chunk (1024 ranks x 256 rows x 128 bytes = 32 MiB).
  static constexpr size_t kChunkLines = 256;
  RowsFilePull(std::string path, std::ifstream in, std::string head)
      : path_(std::move(path)), in_(std::move(in)), head_(std::move(head)) {}
  bool next(CollectiveRecord* out) override {
    if (at_ >= chunk_.size()) {
      if (!refill()) return false;
    }
    *out = chunk_[at_++];
    return true;
  }
  std::vector<std::string> notes() const override {
    std::vector<std::string> out;
    if (eof_ && !trailer_) {
      out.push_back(path_ +
                    ": the rows file has no end line (its writer was killed?): its rows "
                    "up to the cut are used");
    }
    if (bad_lines_ > 0) {
      out.push_back(path_ + ": " + std::to_string(bad_lines_) +
                    " rows that did not parse, skipped");
    }
    if (rows_lost_ > 0) {
      out.push_back(path_ + ": its writer lost " + std::to_string(rows_lost_) + " rows");
    }
    return out;
  }

 private:
  bool refill() {
    chunk_.clear();
    at_ = 0;
    while (chunk_.empty() && !eof_) {
      std::string text = head_;
      std::string line;
      size_t lines = 0;
      while (lines < kChunkLines && std::getline(in_, line)) {
        if (line.rfind("# end", 0) == 0) trailer_ = true;
        text += line;
        text += '\n';
        ++lines;
      }
      if (lines < kChunkLines) eof_ = true;
      auto parsed = read_collective_rows_buffer(
          text, path_, [this](const CollectiveRecord& r) { chunk_.push_back(r); });
      if (!parsed.ok()) {
        eof_ = true;
        break;
      }
      bad_lines_ += parsed->bad_lines;
      rows_lost_ += parsed->rows_lost;
    }
    return !chunk_.empty();
  }

  std::string path_;
  std::ifstream in_;
  std::string head_;  // the header and column lines
  std::vector<CollectiveRecord> chunk_;
  size_t at_ = 0;
  bool eof_ = false;
  bool trailer_ = false;
  int64_t bad_lines_ = 0;
  int64_t rows_lost_ = 0;
};

class PullRankStream : public RankStream {
 public:
  PullRankStream(std::unique_ptr<StepRowPull> rows, std::unique_ptr<CollectivePull> collectives)
      : rows_(std::move(rows)), collectives_(std::move(collectives)) {
    advance_row();
    advance_collective();
  }
  void read_until(int64_t step_end, std::vector<StepRow>* rows,
                  std::vector<CollectiveRecord>* collectives) override {
    while (row_ahead_ && row_ahead_->step_index < step_end) {
      if (rows != nullptr) rows->push_back(*row_ahead_);
      advance_row();
    }
    while (collective_ahead_ && collective_ahead_->step_index < step_end) {
      if (collectives != nullptr) collectives->push_back(*collective_ahead_);
      advance_collective();
    }
  }
  int64_t next_step() const override {
    int64_t next = kNoMoreSteps;
    if (row_ahead_) next = std::min(next, row_ahead_->step_index);
    if (collective_ahead_) next = std::min(next, collective_ahead_->step_index);
    return next;
  }
  std::vector<std::string> notes() const override {
    std::vector<std::string> out;
    if (rows_ != nullptr) out = rows_->notes();
    if (collectives_ != nullptr) {
      for (std::string& n : collectives_->notes()) out.push_back(std::move(n));
    }
    return out;
  }

 private:
  void advance_row() {
    StepRow r;
    if (rows_ != nullptr && rows_->next(&r)) {
      row_ahead_ = r;
    } else {
      row_ahead_.reset();
    }
  }
  void advance_collective() {
    CollectiveRecord r;
    if (collectives_ != nullptr && collectives_->next(&r)) {
      collective_ahead_ = r;
    } else {
      collective_ahead_.reset();
    }
  }

  std::unique_ptr<StepRowPull> rows_;
  std::unique_ptr<CollectivePull> collectives_;
  std::optional<StepRow> row_ahead_;
  std::optional<CollectiveRecord> collective_ahead_;
};

}  // namespace

std::unique_ptr<StepRowPull> pull_rows(std::shared_ptr<const std::vector<StepRow>> rows) {
  return std::make_unique<VectorPull<StepRow, StepRowPull>>(std::move(rows));
}

std::unique_ptr<CollectivePull> pull_collectives(
    std::shared_ptr<const std::vector<CollectiveRecord>> records) {
  return std::make_unique<VectorPull<CollectiveRecord, CollectivePull>>(std::move(records));
}

StatusOr<std::unique_ptr<StepRowPull>> pull_step_stream(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot be read");
  auto pull = std::make_unique<StepStreamPull>(path, std::move(in));
  if (!pull->start()) return pull->error();
  return std::unique_ptr<StepRowPull>(std::move(pull));
}

Status check_step_stream(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot be read");
  StepStreamPull pull(path, std::move(in));
  if (!pull.start()) return pull.error();
  StepRow row;
  while (pull.next(&row)) {
  }
  return pull.error();
}

StatusOr<std::unique_ptr<CollectivePull>> pull_collective_rows(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string header, columns;
  if (!in || !std::getline(in, header) || !std::getline(in, columns)) {
    return Status::Error(path + ": cannot be read (or has no header)");
  }
  std::string head = header + "\n" + columns + "\n";
  // The header alone through the parser: an error here is the file's error.
  auto checked = read_collective_rows_buffer(head, path, [](const CollectiveRecord&) {});
  if (!checked.ok()) return checked.status();
  return std::unique_ptr<CollectivePull>(
      std::make_unique<RowsFilePull>(path, std::move(in), std::move(head)));
}

std::unique_ptr<RankStream> make_rank_stream(std::unique_ptr<StepRowPull> rows,
                                             std::unique_ptr<CollectivePull> collectives) {
  return std::make_unique<PullRankStream>(std::move(rows), std::move(collectives));
}

}  // namespace gpuacct
