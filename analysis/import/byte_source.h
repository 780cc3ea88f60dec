// Chunked byte sources for the trace importer: a file or a memory buffer, transparently
// inflated when it starts with the gzip magic (1f 8b; the file name is not consulted).
//
// Inflation uses ISA-L (about 4x zlib's speed) when the build found its header and the process
// can load libisal.so.2, else zlib.  It is loaded at run time, not linked: libgpuacct.so links
// this code and must not need a library a training machine may lack.  A large compressed input
// is inflated on a background thread that hands blocks to the reader through a bounded queue
// (prefetch_source.h): the tokenizer and the inflater run on two cores, memory stays flat.
// Every decoder and the thread report the same errors: "truncated gzip stream ...", "corrupt
// gzip data at compressed byte offset N: ...", each naming the compressed byte offset.
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
  // What inflates the bytes: "isa-l", "zlib", or "none" (plain input).
  virtual const char* decoder() const { return "none"; }

  // Reading in place (optional): a source that lends its own memory returns how many bytes
  // are writable just before every span lend() gives (0: it does not lend; use read()).
  virtual size_t lend_headroom() const { return 0; }
  // The next bytes, in place: *data points at *len bytes (0 at the end of data, or with an
  // error), preceded by lend_headroom() writable bytes into which `carry` has been copied, so
  // [*data - carry.size(), *data + *len) is contiguous.  carry.size() <= lend_headroom(); it
  // may lie in the span lent before, which stays valid until this call returns.  A span stays
  // valid until the next lend() or read().  Reads and lends may alternate.
  virtual Status lend(std::string_view carry, char** data, size_t* len) {
    (void)carry;
    *data = nullptr;
    *len = 0;
    return Status::Error("this byte source does not lend its memory");
  }
};

enum class GzipDecoder : uint8_t {
  kFastest,  // ISA-L when available, else zlib
  kZlib,     // zlib always (tests of both decoders; the benchmark's comparison)
};

struct ByteSourceOptions {
  GzipDecoder decoder = GzipDecoder::kFastest;
  // A gzip input of at least this many compressed bytes is inflated on a background thread
  // (0: always; UINT64_MAX: never).  Small inputs (tests, the fuzzer) stay on one thread.
  uint64_t background_min_bytes = uint64_t{1} << 20;
};

// Opens `path`; detects gzip by magic.  Errors name the path.
StatusOr<std::unique_ptr<ByteSource>> open_byte_source(const std::string& path,
                                                       const ByteSourceOptions& opts = {});
// Wraps `data` (not copied: it must outlive the source); detects gzip by magic.
std::unique_ptr<ByteSource> memory_byte_source(std::string_view data,
                                               const ByteSourceOptions& opts = {});

// The decoder GzipDecoder::kFastest gives in this process: "isa-l" or "zlib", and why not ISA-L
// when it is zlib ("zlib (ISA-L not in this build)", "zlib (libisal.so.2: <dlerror>)").
std::string gzip_decoder_description();

}  // namespace gpuacct
