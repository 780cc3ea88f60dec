// StepDetector: finds training steps in a run that marks none, from the repeating sequence of
// GPU work in launch order.  CUDA-free; fed by the injected library's worker when no explicit
// step source (C API, NVTX, Python) has appeared, and by `gpuacct analyze` for inputs without
// steps.
//
// Input: one token per GPU op (kernel / copy / memset name; launch order = correlation id; host
// time = its launch call) and one per blocking synchronisation call.  Tokens without a
// correlation id (order 0: a sync call the source could not correlate, an op with no known
// launch) take their place in launch order by host time.  A training loop issues
// the same multiset of tokens every iteration, so:
//   1. every token name with enough occurrences is tried as an anchor: the segments between
//      its consecutive occurrences are hashed as multisets (order-free, so threads that
//      interleave differently each step still match, O(N) with prefix sums); the anchor whose
//      segments agree most (>= match_threshold) and occur most often gives the period.  A
//      period without a kernel (copies and syncs only: the parameter copies of
//      `model.to("cuda")` before a loop) is set-up, never a loop iteration;
//   2. where the step ends:
//      a. a period holding optimizer kernels (analysis/model/optimizer_names.h) ends after the
//         largest run of them (the optimizer step: "the step a user means is one optimizer
//         step"), wherever the loop syncs -- one `.item()` per iteration or ten give the same
//         steps;
//      b. otherwise at a token that occurs exactly once per period: a blocking sync first (a
//         step usually ends by waiting for its result), then the one followed by the longest
//         host pause (the loop top: data loading, logging);
//   3. boundaries are placed at the end of every step end; the first step starts one period
//      of tokens before the first step end, moved back by the typical host pause after a step
//      end (the loop's own top-of-step host work, e.g. data loading), but never before the
//      input began (note_input_start()).  When fewer than a period of tokens precede the first
//      step end, the input began inside that step: it is partial and gets no boundary (its
//      work lies outside every step).  What comes before the first step is set-up.
// Once locked, every new step end closes a step.  Emitted as kStepBoundary markers:
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
  bool is_copy = false;       // a memcpy or memset (not a kernel)
  bool is_optimizer = false;  // an optimizer kernel (analysis/model/optimizer_names.h)
};

// How the detector ends a step (StepDetectionSummary, the report's step_detection section).
enum class StepEndRule : uint8_t {
  kNone = 0,
  kOptimizer,  // after the largest run of optimizer kernels in each period (2a)
  kSync,       // at a blocking sync that occurs once per period (2b)
  kToken,      // at a token that occurs once per period, before the loop's host pause (2b)
};
const char* to_string(StepEndRule rule);

struct StepDetectorOptions {
  int min_repeats = 3;            // identical segments needed to lock
  double match_threshold = 0.75;  // share of segments equal to the most common one
  double min_explained = 0.5;     // share of the tokens from the anchor's first on inside such segments
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
  StepEndRule step_end_rule() const { return rule_; }
  size_t period_tokens() const { return period_; }
  // How sure the lock is: the share of the anchor's segments equal to the period (1 = every
  // iteration launched the same work), and the share of all tokens inside such segments.
  double match_share() const { return match_share_; }
  double explained_share() const { return explained_share_; }
  size_t tokens_held() const { return tokens_.size(); }
  int64_t boundaries_emitted() const { return emitted_; }

 private:
  bool try_lock(std::vector<DetectorToken>& ready, std::vector<Marker>& out, bool final);
  void emit(TimeNs ts, uint32_t thread, std::vector<Marker>& out);
  // kOptimizer: the ready tokens (launch order) through the optimizer-run state machine; a run
  // of at least min_run_ optimizer tokens that a later token ends is a step end.
  void scan_optimizer_runs(const std::vector<DetectorToken>& ready, bool final,
                           std::vector<Marker>& out);
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
  StepEndRule rule_ = StepEndRule::kNone;
  size_t period_ = 0;
  double match_share_ = 0;
  double explained_share_ = 0;
  // kOptimizer: the shortest run that ends a step, and the run in progress (its length and
  // last token), carried from one poll to the next.
  size_t min_run_ = 0;
  size_t run_len_ = 0;
  DetectorToken run_last_{};
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
