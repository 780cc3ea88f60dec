// Chunked byte sources for the trace importer: a file or a memory buffer, transparently
// inflated when it starts with the gzip magic (1f 8b; the file name is not consulted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "analysis/model/status.h"

namespace gpuacct {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `n` bytes into `dst`; *got = 0 means end of data.
  virtual Status read(char* dst, size_t n, size_t* got) = 0;
  // Raw (possibly compressed) bytes consumed so far and in total (0 = unknown): for progress.
  virtual uint64_t raw_consumed() const = 0;
  virtual uint64_t raw_total() const = 0;
  virtual bool compressed() const { return false; }
};

// Opens `path`; detects gzip by magic.  Errors name the path.
StatusOr<std::unique_ptr<ByteSource>> open_byte_source(const std::string& path);
// Wraps `data` (not copied: it must outlive the source); detects gzip by magic.
std::unique_ptr<ByteSource> memory_byte_source(std::string_view data);

}  // namespace gpuacct
