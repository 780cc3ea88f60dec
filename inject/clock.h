// The host clock: every host record (C API, NVTX, Python through the C API, CUPTI API
// callbacks) is stamped with it, from the process's first record on -- with the library
// preloaded (LD_PRELOAD, `import gpuacct`) that is long before CUDA loads CUPTI.  It is
// CLOCK_REALTIME, CUPTI's default clock on Linux, so timelines of ranks on different hosts can
// be lined up.  It never switches: CUPTI is made to use it (a timestamp callback), or CUPTI's
// records are moved onto it by a measured offset (cupti::Collector::sync_clocks), so host and
// GPU records share one timeline whatever clock CUPTI has.
#pragma once

#include <time.h>

#include <cstdint>

namespace gpuacct::inject {

inline int64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The same clock with the signature of CUPTI's timestamp callback.
inline uint64_t host_clock_for_cupti() noexcept {
  return static_cast<uint64_t>(now_ns());
}

}  // namespace gpuacct::inject
