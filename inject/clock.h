// The event model's clock, readable from the hot path.  Once CUPTI is loaded every timestamp
// comes from cuptiGetTimestamp, so host records and activity records share one clock (CUPTI's
// default is CLOCK_REALTIME; a simulated or re-clocked CUPTI stays consistent too).  Before
// that, CLOCK_REALTIME.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

namespace gpuacct::inject {

using TimestampFn = int (*)(uint64_t*);
inline std::atomic<TimestampFn> g_timestamp_fn{nullptr};

inline int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t now_ns() {
  const TimestampFn f = g_timestamp_fn.load(std::memory_order_relaxed);
  if (f != nullptr) {
    uint64_t t = 0;
    if (f(&t) == 0) return static_cast<int64_t>(t);
  }
  return realtime_ns();
}

}  // namespace gpuacct::inject
