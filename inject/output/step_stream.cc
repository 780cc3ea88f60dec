#include "inject/output/step_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "analysis/model/file_io.h"
#include "analysis/model/json_text.h"
#include "inject/log.h"

namespace gpuacct::inject {
namespace {

// Failures and recoveries said on stderr, at most; the report counts every lost row anyway.
constexpr int kMaxMessages = 4;

}  // namespace

StepStream::~StepStream() {
  close();
}

void StepStream::configure(std::string path, std::string header, Stats* stats) {
  path_ = std::move(path);
  header_ = std::move(header);
  stats_ = stats;
}

bool StepStream::ensure_open() {
  if (fd_ >= 0) return true;
  if (open_failed_ || path_.empty()) return false;
  // The library's own name in a directory others may write to: never through a planted link
  // or into another user's file (analysis/model/file_io.h, kOwnFilesOnly).
  OutputPlace place;
  fd_ = open_in_place(path_, OutputPolicy::kOwnFilesOnly, &place);
  if (fd_ >= 0) {
    if (!place.note.empty()) log_line(place.note);
    path_ = place.path;
    return true;
  }
  const int err = errno;
  gap_error_ = std::strerror(err);
  // A full disk can refuse a new file too: then try again with the next row.
  open_failed_ = err != ENOSPC && err != EDQUOT;
  if (!open_message_said_) {
    open_message_said_ = true;
    ++failure_messages_;
    log_line("cannot write " + path_ + " (" + gap_error_ + "); step rows are not streamed" +
             (open_failed_ ? "" : " until it can be created (counted in the report)"));
  }
  return false;
}

bool StepStream::write_text(const std::string& text) {
  const std::string out = torn_line_ ? "\n" + text : text;
  if (write_fully(fd_, out.data(), out.size())) {
    good_bytes_ += out.size();
    torn_line_ = false;
    return true;
  }
  gap_error_ = std::strerror(errno);
  // Cut off what got out: a reader sees whole lines only.  Where that is not possible (a pipe),
  // the next line starts on a line of its own.
  const auto good = static_cast<off_t>(good_bytes_);
  if (::ftruncate(fd_, good) != 0 || ::lseek(fd_, good, SEEK_SET) != good) {
    torn_line_ = true;
    const off_t at = ::lseek(fd_, 0, SEEK_CUR);
    if (at >= 0) good_bytes_ = static_cast<uint64_t>(at);
  }
  return false;
}

bool StepStream::write_line(const std::string& line) {
  if (!ensure_open()) return false;
  // What is owed goes out in the same write as the line: either all of it or none of it, so
  // a disk with room for a gap line but not for the row does not fill the stream with gaps.
  std::string text;
  if (!header_written_) text += header_ + "\n";
  if (gap_rows_ > 0) {
    const nlohmann::json gap = {{"gap",
                                 {{"rows_lost", gap_rows_},
                                  {"first_step_index", gap_first_},
                                  {"last_step_index", gap_last_},
                                  {"error", gap_error_}}}};
    text += dump_json(gap) + "\n";
  }
  text += line;
  text += '\n';
  if (!write_text(text)) return false;
  header_written_ = true;
  if (gap_rows_ > 0 && failure_messages_++ < kMaxMessages) {
    log_line(path_ + " can be written again; " + std::to_string(gap_rows_) +
             " step rows were lost (a gap line marks them)");
  }
  gap_rows_ = 0;
  return true;
}

void StepStream::lost(int64_t step_index) {
  ++rows_lost_;
  if (stats_ != nullptr) stats_->add(Stat::stream_rows_lost);
  if (gap_rows_++ == 0) {
    gap_first_ = step_index;
    if (fd_ >= 0 && failure_messages_++ < kMaxMessages) {
      log_line("cannot write " + path_ + " (" + gap_error_ +
               "); step rows are lost until it can be written again (counted in the report)");
    }
  }
  gap_last_ = step_index;
}

void StepStream::write_row(const std::string& line, int64_t step_index) {
  if (path_.empty()) return;
  rows_seen_ = true;
  if (!write_line(line)) lost(step_index);
}

bool StepStream::write_summary(const std::string& line) {
  if (path_.empty() || !rows_seen_) return false;
  return write_line(line);
}

bool StepStream::write_setup(const std::string& line) {
  return write_summary(line);  // the same rules: any line that is not a row
}

bool StepStream::write_trailer(const std::string& line) {
  if (path_.empty() || !rows_seen_) return false;
  if (write_line(line)) return true;
  if (fd_ >= 0) {
    log_line("cannot write the summary line of " + path_ + " (" + gap_error_ + ")");
  }
  return false;
}

void StepStream::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace gpuacct::inject
