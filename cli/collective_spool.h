// The collective instances of an input, held on disk while the input is accounted: their file's
// header (the run's metadata, how they were identified) is known only once the input is read,
// and a long run has millions of them, so they wait in an unnamed temporary file (tmpfile(3):
// gone when closed or when the process dies) instead of memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "analysis/model/collective.h"

namespace gpuacct::cli {

class CollectiveSpool {
 public:
  CollectiveSpool() : file_(std::tmpfile()) {}
  ~CollectiveSpool() {
    if (file_ != nullptr) std::fclose(file_);
  }
  CollectiveSpool(const CollectiveSpool&) = delete;
  CollectiveSpool& operator=(const CollectiveSpool&) = delete;

  // A record that cannot be written (no temporary file, disk full) is counted in lost().
  void add(const CollectiveRecord& record) {
    if (file_ != nullptr && std::fwrite(&record, sizeof(record), 1, file_) == 1) {
      ++count_;
    } else {
      ++lost_;
    }
  }
  // Every record held, in the order added; false (with what was read so far handed out) when
  // reading back failed.
  bool for_each(const std::function<void(const CollectiveRecord&)>& fn) {
    if (file_ == nullptr) return count_ == 0;
    if (std::fflush(file_) != 0 || std::fseek(file_, 0, SEEK_SET) != 0) return false;
    std::vector<CollectiveRecord> chunk(4096);
    int64_t read = 0;
    while (read < count_) {
      const size_t n = std::fread(chunk.data(), sizeof(CollectiveRecord), chunk.size(), file_);
      if (n == 0) return false;
      for (size_t i = 0; i < n; ++i) fn(chunk[i]);
      read += static_cast<int64_t>(n);
    }
    return true;
  }
  int64_t count() const { return count_; }
  int64_t lost() const { return lost_; }

 private:
  std::FILE* file_;
  int64_t count_ = 0;
  int64_t lost_ = 0;
};

}  // namespace gpuacct::cli
