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

  explicit FlushWatermark(int64_t flush_period_ns) : flush_period_ns_(flush_period_ns) {}

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
