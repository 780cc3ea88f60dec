// Turns drained host records (C API, NVTX, call-site stacks) into the event model: step and
// data ranges, step boundaries, FLOPs markers.  Runs on the worker thread; CUDA-free and
// unit-testable.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "analysis/model/events.h"
#include "analysis/model/name_table.h"
#include "analysis/model/stats.h"
#include "inject/recording/host_ring.h"
#include "inject/recording/name_patterns.h"
#include "inject/recording/native_stacks.h"

namespace gpuacct::inject {

// HostRecord::kind of a C API step begin / mark made while CUPTI was off (GPUACCT_SAMPLE,
// inject/recording/sampling.h): the step's range or boundary marker is flagged untraced (events.h).
inline constexpr uint8_t kStepUntracedKind = 1;

struct TimedRecord {
  HostRecord rec;
  uint32_t tid = 0;
  uint64_t frames[kMaxFrames] = {};  // kStack only
  int nframes = 0;
};

class HostEventProcessor {
 public:
  // Caps on what is held open (a program that pushes without popping must not grow the
  // worker's memory without bound).  A range pushed beyond a cap is not kept: its pop is
  // matched to it (it does not close the range around it), and it is counted in
  // Stat::host_ranges_dropped when it would have been kept.
  static constexpr size_t kMaxNestedRanges = 256;     // C API data / user ranges, per thread
  static constexpr size_t kMaxNvtxNesting = 1024;     // NVTX push / pop, per thread and domain
  static constexpr size_t kMaxStartedRanges = 65536;  // nvtxRangeStart ranges open at once

  HostEventProcessor(NameTable& names, NamePatterns step_patterns, NamePatterns data_patterns);

  // Records of one drain, any order (sorted here by time, stable).  Ranges dropped at a cap
  // (below) are counted in `stats`.
  void process(std::vector<TimedRecord>& records, EventBatch& out, SiteTable* sites, Stats& stats);
  // End of run: an open C API step (begin without end) cannot be accounted; counted.
  void finish(Stats& stats);

  // True once any explicit step source (C API or an NVTX range / mark matching a step
  // pattern) was seen: step detection stands down.
  bool explicit_steps() const { return explicit_steps_; }
  const char* step_source() const;

 private:
  struct Open {
    TimeNs start = 0;
    int64_t number = -1;
    NameId name = kNoName;
    RangeKind kind = RangeKind::kUser;
    bool keep = false;      // matched a pattern (NVTX) or came from the C API
    bool untraced = false;  // a C API step begun with CUPTI off (GPUACCT_SAMPLE)
  };
  // A per-thread stack of open ranges, with the pushes dropped at its cap still to be popped.
  struct OpenStack {
    std::vector<Open> open;
    size_t dropped_open = 0;
  };
  void push(OpenStack& stack, const Open& o, size_t cap, Stats& stats);
  void pop(OpenStack& stack, TimeNs end, uint32_t tid, EventBatch& out);
  void close(const Open& o, TimeNs end, uint32_t tid, EventBatch& out);
  void capi_step(const HostRecord& r, uint32_t tid, EventBatch& out);
  void nvtx(const HostRecord& r, uint32_t tid, EventBatch& out, Stats& stats);
  NameId intern(const HostRecord& r);
  void classify(const HostRecord& r, Open* o);

  NameTable& names_;
  NamePatterns step_patterns_;
  NamePatterns data_patterns_;
  bool explicit_steps_ = false;
  bool capi_steps_ = false;
  bool nvtx_steps_ = false;

  // C API step (process-wide).
  bool step_open_ = false;
  Open step_;
  uint32_t step_tid_ = 0;
  int64_t next_number_ = 0;

  // Per thread (and NVTX domain) stacks.
  std::map<std::pair<uint32_t, uint32_t>, OpenStack> nvtx_stacks_;
  std::unordered_map<uint32_t, OpenStack> data_stacks_;
  std::unordered_map<uint32_t, OpenStack> user_stacks_;
  std::unordered_map<uint64_t, Open> started_;  // nvtxRangeStart ids
};

}  // namespace gpuacct::inject
