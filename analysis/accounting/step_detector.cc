#include "analysis/accounting/step_detector.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace gpuacct {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t token_hash(const DetectorToken& t) {
  return mix((static_cast<uint64_t>(t.name) << 1) | (t.is_sync ? 1u : 0u));
}

TimeNs median(std::vector<TimeNs> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

// Puts tokens in launch order: those with an order (correlation id) by it, and those without
// (order 0: an uncorrelated sync call or op) where their host time places them among the
// others -- before the first ordered token that started later.  Sorting order-0 tokens by
// their order would put every one of them first: a loop whose syncs carry no correlation id
// would then look like a burst of syncs followed by a run of kernels.
void sort_launch_order(std::vector<DetectorToken>& v) {
  auto by_order = [](const DetectorToken& a, const DetectorToken& b) {
    return std::tie(a.order, a.start, a.end, a.name) < std::tie(b.order, b.start, b.end, b.name);
  };
  auto by_time = [](const DetectorToken& a, const DetectorToken& b) {
    return std::tie(a.start, a.end, a.name) < std::tie(b.start, b.end, b.name);
  };
  const auto unordered_end =
      std::partition(v.begin(), v.end(), [](const DetectorToken& t) { return t.order == 0; });
  if (unordered_end == v.begin()) {
    std::sort(v.begin(), v.end(), by_order);
    return;
  }
  std::vector<DetectorToken> timed(v.begin(), unordered_end);
  std::vector<DetectorToken> ordered(unordered_end, v.end());
  std::sort(timed.begin(), timed.end(), by_time);
  std::sort(ordered.begin(), ordered.end(), by_order);
  v.clear();
  size_t j = 0;
  for (const DetectorToken& t : ordered) {
    while (j < timed.size() && timed[j].start < t.start) v.push_back(timed[j++]);
    v.push_back(t);
  }
  v.insert(v.end(), timed.begin() + static_cast<std::ptrdiff_t>(j), timed.end());
}

}  // namespace

const char* to_string(StepEndRule rule) {
  switch (rule) {
    case StepEndRule::kOptimizer:
      return "optimizer";
    case StepEndRule::kSync:
      return "sync";
    case StepEndRule::kToken:
      return "token";
    case StepEndRule::kNone:
      break;
  }
  return "none";
}

bool StepDetector::after_last_end(const DetectorToken& t) const {
  if (!have_last_end_) return true;
  if (t.order != 0 && last_order_ != 0) return t.order > last_order_;
  return t.start > last_start_;
}

void StepDetector::consumed_end(const DetectorToken& t) {
  have_last_end_ = true;
  last_order_ = t.order;
  last_start_ = t.start;
}

StepDetector::StepDetector(StepDetectorOptions options) : opt_(options) {}

void StepDetector::add(const DetectorToken& token) {
  if (gave_up_) return;
  if (locked_) {
    // Ending steps at optimizer runs needs every token (a run ends at the next token that is
    // not an optimizer kernel); the other rules only the step-ending token.
    if (rule_ != StepEndRule::kOptimizer &&
        (token.name != end_name_ || token.is_sync != end_is_sync_))
      return;
    if (!after_last_end(token)) return;
  }
  tokens_.push_back(token);
}

void StepDetector::emit(TimeNs ts, uint32_t thread, std::vector<Marker>& out) {
  if (emitted_ > 0 && ts < last_boundary_) return;  // never go back in time
  Marker m;
  m.ts = ts;
  m.kind = MarkerKind::kStepBoundary;
  m.number = emitted_;
  m.thread = thread;
  out.push_back(m);
  last_boundary_ = ts;
  ++emitted_;
}

std::vector<Marker> StepDetector::poll(TimeNs watermark, bool final) {
  std::vector<Marker> out;
  if (gave_up_) return out;
  if (tokens_.empty()) {
    // The input ended on an optimizer run: it ends the last step.
    if (final && locked_ && rule_ == StepEndRule::kOptimizer) scan_optimizer_runs({}, true, out);
    return out;
  }
  // Split into ready (ended before the watermark) and the rest.
  std::vector<DetectorToken> ready;
  std::vector<DetectorToken> later;
  ready.reserve(tokens_.size());
  for (const DetectorToken& t : tokens_) {
    if (final || t.end < watermark) {
      ready.push_back(t);
    } else {
      later.push_back(t);
    }
  }
  sort_launch_order(ready);
  if (!locked_) {
    if (!try_lock(ready, out, final)) {
      if (final || tokens_.size() > opt_.max_tokens) {
        gave_up_ = true;
        tokens_.clear();
        tokens_.shrink_to_fit();
      }
      return out;
    }
    // Locked: keep only the future tokens the rule still needs.
    tokens_.clear();
    for (const DetectorToken& t : later) {
      if (!after_last_end(t)) continue;
      if (rule_ == StepEndRule::kOptimizer || (t.name == end_name_ && t.is_sync == end_is_sync_))
        tokens_.push_back(t);
    }
    return out;
  }
  if (rule_ == StepEndRule::kOptimizer) {
    scan_optimizer_runs(ready, final, out);
    tokens_ = std::move(later);
    return out;
  }
  for (const DetectorToken& t : ready) {
    if (!after_last_end(t)) continue;
    emit(t.end, t.thread, out);
    consumed_end(t);
  }
  tokens_ = std::move(later);
  return out;
}

// A run of optimizer kernels ends at the first later token that is not one (a copy, a sync,
// the next iteration's first kernel); a run at least min_run_ long ends a step there.  State
// (the run in progress) carries over between polls, so tokens delivered in any chunks give the
// same boundaries; at the end a run still open ends the last step.
void StepDetector::scan_optimizer_runs(const std::vector<DetectorToken>& ready, bool final,
                                       std::vector<Marker>& out) {
  for (const DetectorToken& t : ready) {
    if (!after_last_end(t)) continue;
    if (t.is_optimizer) {
      ++run_len_;
      run_last_ = t;
    } else {
      if (run_len_ >= min_run_) emit(run_last_.end, run_last_.thread, out);
      run_len_ = 0;
    }
    consumed_end(t);
  }
  if (final && run_len_ >= min_run_) {
    emit(run_last_.end, run_last_.thread, out);
    run_len_ = 0;
  }
}

namespace {

// The tokens ready for a lock attempt, indexed: multiset hashes of any [a, b) and where each
// name occurs.
struct TokenIndex {
  // prefix[b] - prefix[a] is the multiset hash of [a, b).
  std::vector<uint64_t> prefix;
  std::unordered_map<NameId, std::vector<uint32_t>> positions;
  std::unordered_map<NameId, bool> sync_of;

  explicit TokenIndex(const std::vector<DetectorToken>& ready) : prefix(ready.size() + 1, 0) {
    for (size_t i = 0; i < ready.size(); ++i) {
      prefix[i + 1] = prefix[i] + token_hash(ready[i]);
      positions[ready[i].name].push_back(static_cast<uint32_t>(i));
      sync_of[ready[i].name] = ready[i].is_sync;
    }
  }
  uint64_t hash(size_t a, size_t b) const { return prefix[b] - prefix[a]; }
};

// The anchor: the name whose segments (one occurrence to the next) repeat best.
struct Anchor {
  NameId name = kNoName;
  size_t count = 0;
  bool has_sync = false;
  int explained_pct = -1;  // in 2 % buckets
  uint64_t mode = 0;
  size_t mode_len = 0;
  size_t mode_begin = 0;
  double match = 0;      // share of segments equal to the mode
  double explained = 0;  // share of tokens inside such segments
};

// The anchor candidate `name` gives, or none (count 0) when its segments do not repeat enough.
Anchor anchor_of(NameId name, const std::vector<uint32_t>& pos, const TokenIndex& index,
                 const std::vector<DetectorToken>& ready, const StepDetectorOptions& opt,
                 std::unordered_map<uint64_t, uint32_t>& freq) {
  Anchor none;
  freq.clear();
  uint64_t mode = 0;
  uint32_t mode_n = 0;
  for (size_t j = 0; j + 1 < pos.size(); ++j) {
    const uint32_t c = ++freq[index.hash(pos[j], pos[j + 1])];
    if (c > mode_n) {
      mode_n = c;
      mode = index.hash(pos[j], pos[j + 1]);
    }
  }
  const double score = static_cast<double>(mode_n) / static_cast<double>(pos.size() - 1);
  if (mode_n < static_cast<uint32_t>(opt.min_repeats) || score < opt.match_threshold) return none;
  Anchor cand;
  cand.name = name;
  cand.count = pos.size();
  cand.mode = mode;
  for (size_t j = 0; j + 1 < pos.size(); ++j) {
    if (index.hash(pos[j], pos[j + 1]) == mode) {
      cand.mode_begin = pos[j];
      cand.mode_len = pos[j + 1] - pos[j];
      break;
    }
  }
  bool has_kernel = false;
  for (size_t i = cand.mode_begin; i < cand.mode_begin + cand.mode_len; ++i) {
    cand.has_sync = cand.has_sync || ready[i].is_sync;
    has_kernel = has_kernel || (!ready[i].is_sync && !ready[i].is_copy);
  }
  // A one-token period is a burst of one op, not a loop iteration; a period whose repeats
  // cover less than half of the run is a sub-pattern (a layer), not the step.  A period with
  // no kernel (copies and syncs: a model's parameters copied in one by one before its loop,
  // a checkpoint loaded) is set-up, not a loop iteration.
  if (cand.mode_len < 2 || !has_kernel) return none;
  // Over the tokens from the anchor's first occurrence on: what comes before the loop (set-up:
  // hundreds of parameter copies, a checkpoint loaded) does not make it less of a loop.
  const double explained = static_cast<double>(mode_n) * static_cast<double>(cand.mode_len) /
                           static_cast<double>(ready.size() - pos.front());
  if (explained < opt.min_explained) return none;
  cand.explained_pct = static_cast<int>(explained * 50.0);
  cand.explained = explained;
  cand.match = score;
  return cand;
}

// 1. Every name with enough occurrences is tried.  Ranking: a period that contains a blocking
// sync first (a per-layer sub-period never holds the step's sync), then the share of tokens
// inside the most common segment (a sub-period leaves the step's other tokens unexplained),
// then more occurrences (shorter period).
Anchor find_anchor(const TokenIndex& index, const std::vector<DetectorToken>& ready,
                   const StepDetectorOptions& opt) {
  const size_t min_occ = static_cast<size_t>(opt.min_repeats) + 1;
  const auto rank = [](const Anchor& a) {
    return std::make_tuple(a.has_sync ? 1 : 0, a.explained_pct, a.count);
  };
  Anchor best;
  std::unordered_map<uint64_t, uint32_t> freq;
  for (const auto& [name, pos] : index.positions) {
    if (pos.size() < min_occ) continue;
    const Anchor cand = anchor_of(name, pos, index, ready, opt, freq);
    if (cand.count == 0) continue;
    if (best.count == 0 || rank(cand) > rank(best)) best = cand;
  }
  return best;
}

struct StepEnd {
  NameId name;
  bool sync;
  TimeNs gap;  // median host pause after it
  size_t first_pos;
};

bool similar_gap(TimeNs a, TimeNs b) {
  const TimeNs d = a > b ? a - b : b - a;
  return d <= 1000 + std::max(a, b) / 20;
}

// 2. The step-ending token: once per period; a blocking sync first, then the one followed by
// the longest host pause, then the one that comes last in the first period.  False if none.
bool choose_step_end(const Anchor& anchor, const TokenIndex& index,
                     const std::vector<DetectorToken>& ready, StepEnd* chosen) {
  const size_t n = ready.size();
  const size_t seg_begin = anchor.mode_begin, seg_len = anchor.mode_len;
  std::unordered_map<NameId, uint32_t> in_segment;
  for (size_t i = seg_begin; i < seg_begin + seg_len; ++i) ++in_segment[ready[i].name];
  std::vector<StepEnd> cands;
  for (const auto& [name, k] : in_segment) {
    if (k != 1) continue;
    const std::vector<uint32_t>& pos = index.positions.at(name);
    if (pos.size() + 1 < anchor.count || pos.size() > anchor.count + 1) continue;
    std::vector<TimeNs> gaps;
    gaps.reserve(pos.size());
    for (uint32_t p : pos) {
      if (p + 1 < n) {
        gaps.push_back(std::max<TimeNs>(0, saturating_sub(ready[p + 1].start, ready[p].end)));
      }
    }
    cands.push_back(StepEnd{name, index.sync_of.at(name), median(std::move(gaps)), pos.front()});
  }
  if (cands.empty()) return false;
  // The first period starts at the anchor's first occurrence minus whatever precedes it in
  // the period; among equals prefer the candidate that comes last in that first period.
  std::sort(cands.begin(), cands.end(), [&](const StepEnd& a, const StepEnd& b) {
    if (a.sync != b.sync) return a.sync;
    if (!similar_gap(a.gap, b.gap)) return a.gap > b.gap;
    return a.first_pos > b.first_pos;
  });
  // Among equally good ones, "last in the first period": first occurrence below the earliest
  // candidate's first occurrence + one period.
  size_t pick = 0;
  size_t earliest = cands[0].first_pos;
  for (const StepEnd& c : cands) earliest = std::min(earliest, c.first_pos);
  for (size_t i = 0; i < cands.size(); ++i) {
    const StepEnd& c = cands[i];
    if (c.sync != cands[0].sync || !similar_gap(c.gap, cands[0].gap)) break;
    if (c.first_pos < earliest + seg_len) {
      pick = i;
      break;
    }
  }
  *chosen = cands[pick];
  return true;
}

// 2a. The runs of optimizer kernels among the ready tokens (launch order): where each run
// of at least min_run tokens ends (the position of its last token).  min_run is half the
// longest run: gradient clipping's foreach norm or the scaler's unscale, a launch or two before
// the optimizer's own run, do not end a step.  A run still open at the last ready token is not
// known to have ended yet: not counted.
struct OptimizerRuns {
  size_t min_run = 0;
  std::vector<size_t> ends;
};

OptimizerRuns optimizer_runs(const std::vector<DetectorToken>& ready) {
  OptimizerRuns out;
  std::vector<std::pair<size_t, size_t>> runs;  // (last position, length)
  size_t len = 0;
  for (size_t i = 0; i < ready.size(); ++i) {
    if (ready[i].is_optimizer) {
      ++len;
      continue;
    }
    if (len > 0) runs.emplace_back(i - 1, len);
    len = 0;
  }
  size_t longest = 0;
  for (const auto& r : runs) longest = std::max(longest, r.second);
  if (longest == 0) return out;
  out.min_run = (longest + 1) / 2;
  for (const auto& r : runs) {
    if (r.second >= out.min_run) out.ends.push_back(r.first);
  }
  return out;
}

}  // namespace

bool StepDetector::try_lock(std::vector<DetectorToken>& ready, std::vector<Marker>& out,
                            bool final) {
  const size_t n = ready.size();
  const size_t min_occ = static_cast<size_t>(opt_.min_repeats) + 1;
  if (n < 2 * min_occ) return false;

  const TokenIndex index(ready);
  const Anchor anchor = find_anchor(index, ready, opt_);
  if (anchor.count == 0) return false;
  if (!anchor.has_sync && !final) {
    // Too early to settle on a period without a sync: the step's sync may simply not have
    // been seen enough times yet (the first repetitions of a long step are all kernels).
    size_t syncs = 0;
    for (const DetectorToken& t : ready) syncs += t.is_sync ? 1 : 0;
    if (syncs > 0 || n < opt_.min_tokens_without_sync) return false;
  }
  const size_t seg_len = anchor.mode_len;
  if (seg_len == 0) return false;

  // 2a: a period with optimizer kernels ends after its largest run of them -- when the runs
  // that long come once per period (as many as the anchor's segments, give or take one).
  bool period_has_optimizer = false;
  for (size_t i = anchor.mode_begin; i < anchor.mode_begin + seg_len; ++i)
    period_has_optimizer = period_has_optimizer || ready[i].is_optimizer;
  const OptimizerRuns runs = period_has_optimizer ? optimizer_runs(ready) : OptimizerRuns{};
  const size_t periods = anchor.count - 1;
  const bool by_optimizer = !runs.ends.empty() && runs.ends.size() + 1 >= periods &&
                            runs.ends.size() <= periods + 1;
  // The step ends (positions in `ready`) and the typical host pause after one.
  std::vector<uint32_t> ends;
  TimeNs gap = 0;
  if (by_optimizer) {
    std::vector<TimeNs> gaps;
    for (size_t p : runs.ends) {
      ends.push_back(static_cast<uint32_t>(p));
      if (p + 1 < n) gaps.push_back(std::max<TimeNs>(0, saturating_sub(ready[p + 1].start, ready[p].end)));
    }
    gap = median(std::move(gaps));
    rule_ = StepEndRule::kOptimizer;
    min_run_ = runs.min_run;
    end_name_ = ready[runs.ends.front()].name;
    end_is_sync_ = false;
  } else {
    StepEnd chosen{};
    if (!choose_step_end(anchor, index, ready, &chosen)) return false;
    const std::vector<uint32_t>& bpos = index.positions.at(chosen.name);
    ends.assign(bpos.begin(), bpos.end());
    gap = chosen.gap;
    rule_ = chosen.sync ? StepEndRule::kSync : StepEndRule::kToken;
    end_name_ = chosen.name;
    end_is_sync_ = chosen.sync;
  }

  locked_ = true;
  period_ = seg_len;
  match_share_ = anchor.match;
  explained_share_ = anchor.explained;

  // 3. Boundaries.  Step 0 = the period of tokens ending with the first step end, beginning
  // one typical host pause before its first token -- but not before the input began.  With
  // less than a period before the first step end the input began inside step 0: no boundary
  // opens it.
  const size_t p0 = ends.front();
  leading_partial_ = p0 + 1 < seg_len;
  if (!leading_partial_) {
    const size_t first = p0 + 1 - seg_len;
    TimeNs b0 = saturating_sub(ready[first].start, gap);
    if (first > 0) b0 = std::max(b0, ready[first - 1].end);
    if (has_input_start_) b0 = std::max(b0, input_start_);
    emit(b0, ready[p0].thread, out);
  }
  if (rule_ == StepEndRule::kOptimizer) {
    // The same state machine the later polls run, from the first token: the run in progress
    // at the last ready token carries over.
    scan_optimizer_runs(ready, final, out);
    return true;
  }
  for (uint32_t p : ends) {
    emit(ready[p].end, ready[p].thread, out);
    consumed_end(ready[p]);
  }
  return true;
}

}  // namespace gpuacct
