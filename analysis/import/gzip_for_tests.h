// A whole buffer gzip-compressed in memory, for the importer's tests and benchmarks (the
// product only ever inflates).  Returns "" when zlib fails, so a caller's comparison fails
// rather than reading garbage.
#pragma once

#include <string>

#include <zlib.h>

namespace gpuacct::testing_support {

inline std::string gzip(const std::string& in, int level = 6) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return "";
  }
  std::string out(deflateBound(&zs, static_cast<uLong>(in.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const bool done = deflate(&zs, Z_FINISH) == Z_STREAM_END;
  out.resize(done ? zs.total_out : 0);
  deflateEnd(&zs);
  return out;
}

}  // namespace gpuacct::testing_support
