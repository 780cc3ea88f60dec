#include "inject/output/prom_output.h"

#include <exception>
#include <string_view>

#include "analysis/model/file_io.h"
#include "inject/log.h"

namespace gpuacct::inject {
namespace {

// A part of the file name: at most this many bytes, so that the name, its ".tmp.<pid>"
// temporary and a fresh name's suffix stay far within NAME_MAX (255).
constexpr size_t kMaxNamePartBytes = 64;

std::string name_part(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, kMaxNamePartBytes)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '-' || c == '_';
    out += plain ? c : '_';
  }
  return out;
}

}  // namespace

std::string prom_file_name(const Config& config) {
  const std::string who =
      config.rank >= 0 ? "rank" + std::to_string(config.rank) : "pid" + std::to_string(config.pid);
  return "gpuacct_" + name_part(config.job_id.empty() ? "nojob" : config.job_id) + "_" +
         name_part(config.host) + "_" + who + ".prom";
}

PromOutput::PromOutput(const Config& config) : period_(config.prom_period_ms) {
  if (config.prom_dir.empty()) return;
  try {
    std::string dir = config.prom_dir;
    if (dir.back() != '/') dir += '/';
    path_ = dir + prom_file_name(config);
    identity_ = {config.job_id, config.host, config.rank};
    enabled_ = true;
  } catch (...) {
    enabled_ = false;  // out of memory at start: no metrics, as when none are asked for
  }
}

void PromOutput::add_row(const StepRow& row) {
  if (!enabled_) return;
  try {
    metrics_.add_row(row);
  } catch (...) {
    // Out of memory on a device's first row: that device's rows go uncounted; the next write
    // (which allocates too) says so if memory stays short.
  }
}

void PromOutput::maybe_write(const Stats& stats, Clock::time_point now) {
  if (!enabled_ || now < next_write_) return;
  next_write_ = now + period_;
  write(stats);
}

void PromOutput::write(const Stats& stats) {
  if (!enabled_) return;
  const auto start = Clock::now();
  Status st;
  OutputPlace place;
  try {
    st = write_file_atomic(path_, metrics_.render(identity_, stats), OutputPolicy::kOwnFilesOnly,
                           &place);
  } catch (const std::exception& e) {
    st =
        Status::Error(std::string("cannot write ") + path_ + " (internal error: " + e.what() + ")");
  } catch (...) {
    st = Status::Error("cannot write " + path_ + " (internal error)");
  }
  last_write_cost_ = Clock::now() - start;
  if (!st.ok()) {
    enabled_ = false;
    log_line(st.message() + "; live metrics (GPUACCT_PROM_DIR) are off for the rest of the run");
    return;
  }
  if (!place.note.empty()) {
    log_line(place.note);  // said once: the fresh name is this process's from now on
    path_ = place.path;
  }
  ++writes_;
}

}  // namespace gpuacct::inject
