// The watermark the live library promises the accountant: no GPU record that completed
// before it is still to come.  Computed by the worker (Runtime), because it depends on when
// the worker flushes CUPTI, and applied by the pipeline (Pipeline::tick).
//
// CUPTI delivers a record that completed at time t within a few flushes of t (it holds some
// back), and every tick flushes: so a tick promises only the clock value seen kTicksBehind
// ticks earlier, and at most now - 2 flush periods (ticks can come faster, on
// gpuacct_flush()).  Until that many ticks have been seen nothing is promised (kNone).
// A record later than that (a deep queue, a busy CUPTI thread) breaks the promise; the
// accountant still takes it while its launch is owed (docs/accounting.md, "Finalisation") and
// reports how far behind the watermark it came (the report's delivery section).
//
// CUPTI hands a buffer back only once every record in it is complete (cuptiActivityFlushAll
// with flag 0; the periodic flush only full ones: cupti_activity.h), and it fills a thread's
// buffer as the thread makes calls (CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, default 1):
// while one kernel of a thread is still queued, every record the thread made since its buffer
// was asked for -- API records too, so no launch is known to be owed -- stays in CUPTI.  In a
// loop that never lets the GPU queue drain, that is until the buffer fills.  So the watermark
// also stays before the oldest buffer CUPTI holds (held_by_buffers), but never more than
// kMaxBufferWaitNs behind what it would be (a buffer CUPTI keeps for long, empty or not, must
// not hold every row back; records later than that come late and are counted).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>

#include "analysis/accounting/accounting_config.h"

namespace gpuacct::inject {

class FlushWatermark {
 public:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  // "A few flushes": the accountant's launch frontier trails by as many watermarks.
  static constexpr size_t kTicksBehind = static_cast<size_t>(AccountingConfig::kLateFlushes);

  // A record's end may be stamped just before its buffer was asked for (a call's record is
  // written after it returned): the watermark stays this far before the buffer's time.
  static constexpr int64_t kBufferMarginNs = 1'000'000;
  static constexpr int64_t kMaxBufferWaitNs = 10'000'000'000;

  explicit FlushWatermark(int64_t flush_period_ns) : flush_period_ns_(flush_period_ns) {}

  // `watermark` (from on_tick), kept before `oldest_lent_ns`: when CUPTI asked for the oldest
  // buffer it still holds after the tick's flush (cupti::Collector::oldest_lent_ns).  A time
  // past the watermark changes nothing -- Collector::kNoBufferLent (none held) is the largest.
  static int64_t held_by_buffers(int64_t watermark, int64_t oldest_lent_ns) {
    if (watermark == kNone || oldest_lent_ns - kBufferMarginNs >= watermark) return watermark;
    const int64_t floor = watermark - kMaxBufferWaitNs;
    return std::max(std::min(watermark, oldest_lent_ns - kBufferMarginNs), floor);
  }

  // One tick at host-clock time `now`, before its flush: the watermark it may promise.
  int64_t on_tick(int64_t now) {
    seen_.push_back(now);
    while (seen_.size() > kTicksBehind + 1) seen_.pop_front();
    if (seen_.size() <= kTicksBehind) return kNone;
    return std::min(seen_.front(), now - 2 * flush_period_ns_);
  }

 private:
  int64_t flush_period_ns_;
  std::deque<int64_t> seen_;
};

}  // namespace gpuacct::inject
