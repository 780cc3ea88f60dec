// StepDetector: finds training steps in a run that marks none, from the repeating sequence of
// GPU work in launch order.  CUDA-free; fed by the injected library's worker when no explicit
// step source (C API, NVTX) has appeared.
//
// Input: one token per GPU op (kernel / copy / memset name; launch order = correlation id; host
// time = its launch call) and one per blocking synchronisation call.  Tokens without a
// correlation id (order 0: a sync call the source could not correlate, an op with no known
// launch) take their place in launch order by host time.  A training loop issues
// the same multiset of tokens every iteration, so:
//   1. every token name with enough occurrences is tried as an anchor: the segments between
//      its consecutive occurrences are hashed as multisets (order-free, so threads that
//      interleave differently each step still match, O(N) with prefix sums); the anchor whose
//      segments agree most (>= match_threshold) and occur most often gives the period;
//   2. the step-ending token b is chosen among the tokens that occur exactly once per period:
//      a blocking sync first (a step usually ends by waiting for its result), then the one
//      followed by the longest host pause (the loop top: data loading, logging);
//   3. boundaries are placed at the end of every occurrence of b; the first step starts one
//      period of tokens before the first b, moved back by the typical host pause after b (the
//      loop's own top-of-step host work, e.g. data loading), but never before the input
//      began (note_input_start()).  When fewer than a period of tokens
//      precede the first b, the input began inside that step: it is partial and gets no
//      boundary (its work lies outside every step).
// Once locked, every new occurrence of b closes a step.  Emitted as kStepBoundary markers:
// boundary i begins step i and ends step i-1 (N steps -> N+1 boundaries).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "analysis/model/events.h"

namespace gpuacct {

struct DetectorToken {
  TimeNs start = 0;    // host time the work was issued (launch call start, or op start)
  TimeNs end = 0;      // end of the launch / sync call (host)
  uint64_t order = 0;  // launch order: the CUDA correlation id
  NameId name = kNoName;
  uint32_t thread = 0;
  bool is_sync = false;
};

struct StepDetectorOptions {
  int min_repeats = 3;            // identical segments needed to lock
  double match_threshold = 0.75;  // share of segments equal to the most common one
  double min_explained = 0.5;     // share of all tokens inside segments equal to it
  size_t max_tokens = 4'000'000;  // give up (no steps) beyond this many tokens without a lock
  // A period without a blocking sync is accepted only after this many tokens (or at the end).
  size_t min_tokens_without_sync = 4096;
};

class StepDetector {
 public:
  explicit StepDetector(StepDetectorOptions options = {});

  // Any order.  After lock only tokens named like the step-ending token are kept.
  void add(const DetectorToken& token);

  // The input (a trace, a recording) begins at `t`: the first step never begins before it.
  // Without it (the live library: the process ran before its first launch) the first step
  // begins one typical host pause before its first token.
  void note_input_start(TimeNs t) {
    input_start_ = std::min(input_start_, t);
    has_input_start_ = true;
  }

  // Looks at tokens whose end < watermark (all of them when final) and returns new boundaries.
  std::vector<Marker> poll(TimeNs watermark, bool final);

  bool locked() const { return locked_; }
  // At lock, fewer than a period of tokens preceded the first step end: that step began before
  // the input did and got no boundary.
  bool leading_partial_step() const { return leading_partial_; }
  bool gave_up() const { return gave_up_; }
  NameId step_end_name() const { return end_name_; }
  bool step_end_is_sync() const { return end_is_sync_; }
  size_t period_tokens() const { return period_; }
  size_t tokens_held() const { return tokens_.size(); }
  int64_t boundaries_emitted() const { return emitted_; }

 private:
  bool try_lock(std::vector<DetectorToken>& ready, std::vector<Marker>& out, bool final);
  void emit(TimeNs ts, uint32_t thread, std::vector<Marker>& out);
  // Whether `t` comes after the last step-ending token consumed (launch order, or host time
  // when either has no order).
  bool after_last_end(const DetectorToken& t) const;
  void consumed_end(const DetectorToken& t);

  StepDetectorOptions opt_;
  std::vector<DetectorToken> tokens_;
  bool locked_ = false;
  bool gave_up_ = false;
  NameId end_name_ = kNoName;
  bool end_is_sync_ = false;
  size_t period_ = 0;
  uint64_t last_order_ = 0;  // order of the last step-ending token consumed
  TimeNs last_start_ = 0;    // and its host time
  bool have_last_end_ = false;
  TimeNs last_boundary_ = 0;
  int64_t emitted_ = 0;
  TimeNs input_start_ = std::numeric_limits<TimeNs>::max();
  bool has_input_start_ = false;
  bool leading_partial_ = false;
};

}  // namespace gpuacct
