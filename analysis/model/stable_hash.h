// A 64-bit hash that is the same in every process, build and machine (FNV-1a), for names that
// must agree across ranks: the communicator hash of a trace's process group, of a kernel-order
// stream (analysis/import/kernel_order.h).  Not for hash tables keyed by untrusted input.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpuacct {

inline uint64_t stable_hash64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ULL) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace gpuacct
