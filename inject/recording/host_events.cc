#include "inject/recording/host_events.h"

#include <algorithm>
#include <bit>
#include <string_view>

#include "analysis/model/json_text.h"

namespace gpuacct::inject {

HostEventProcessor::HostEventProcessor(NameTable& names, NamePatterns step_patterns,
                                       NamePatterns data_patterns)
    : names_(names),
      step_patterns_(std::move(step_patterns)),
      data_patterns_(std::move(data_patterns)) {}

const char* HostEventProcessor::step_source() const {
  if (capi_steps_ && nvtx_steps_) return "capi+nvtx";
  if (capi_steps_) return "capi";
  if (nvtx_steps_) return "nvtx";
  return "none";
}

NameId HostEventProcessor::intern(const HostRecord& r) {
  std::string_view name(r.name, r.len);
  // Cut to the ring's name size on the hot path, maybe inside a character: drop it, so a long
  // non-ASCII name stays text instead of ending in "\xHH" (analysis/model/json_text.h).
  if ((r.flags & kNameTruncated) != 0) name = utf8_without_cut_character(name);
  return names_.intern(name);
}

void HostEventProcessor::classify(const HostRecord& r, Open* o) {
  // A truncated name only matches patterns that end in '*' (the text seen is a prefix).
  std::string_view name(r.name, r.len);
  int64_t number = -1;
  const bool truncated = (r.flags & kNameTruncated) != 0;
  auto ok = [&](const NamePatterns& p) {
    if (!p.match(name, &number)) return false;
    if (!truncated) return true;
    for (const auto& pat : p.patterns()) {
      if (!pat.empty() && pat.back() == '*' && glob_match(pat, name)) return true;
    }
    return false;
  };
  if (ok(step_patterns_)) {
    o->kind = RangeKind::kStep;
    o->number = number;
    o->keep = true;
  } else if (ok(data_patterns_)) {
    o->kind = RangeKind::kData;
    o->keep = true;
  } else {
    o->kind = RangeKind::kUser;
    o->keep = false;  // other NVTX ranges (emit_nvtx ops, NCCL) are not kept
  }
  if (o->keep) o->name = intern(r);
}

void HostEventProcessor::close(const Open& o, TimeNs end, uint32_t tid, EventBatch& out) {
  if (!o.keep) return;
  HostRange range;
  range.start = o.start;
  range.end = std::max(end, o.start);
  range.number = o.number;
  range.thread = tid;
  range.name = o.name;
  range.kind = o.kind;
  if (o.untraced) mark_step_untraced(range);
  out.ranges.push_back(range);
}

void HostEventProcessor::push(OpenStack& stack, const Open& o, size_t cap, Stats& stats) {
  if (stack.open.size() < cap && stack.dropped_open == 0) {
    stack.open.push_back(o);
    return;
  }
  ++stack.dropped_open;
  if (o.keep) stats.add(Stat::host_ranges_dropped);
}

void HostEventProcessor::pop(OpenStack& stack, TimeNs end, uint32_t tid, EventBatch& out) {
  if (stack.dropped_open > 0) {  // the innermost push was dropped: this pop is its
    --stack.dropped_open;
    return;
  }
  if (stack.open.empty()) return;
  close(stack.open.back(), end, tid, out);
  stack.open.pop_back();
}

// C API steps: begin / end ranges, marks, FLOPs.
void HostEventProcessor::capi_step(const HostRecord& r, uint32_t tid, EventBatch& out) {
  switch (r.type) {
    case HostRecType::kStepBegin:
    case HostRecType::kStepEnd: {
      explicit_steps_ = capi_steps_ = true;
      if (step_open_) {
        close(step_, r.ts, step_tid_, out);
        step_open_ = false;
      }
      if (r.type == HostRecType::kStepBegin) {
        step_ = Open{};
        step_.start = r.ts;
        step_.number = r.value >= 0 ? r.value : next_number_;
        next_number_ = step_.number + 1;
        step_.kind = RangeKind::kStep;
        step_.keep = true;
        step_.name = names_.intern("step");
        step_.untraced = r.kind == kStepUntracedKind;
        step_tid_ = tid;
        step_open_ = true;
      }
      break;
    }
    case HostRecType::kStepMark: {
      explicit_steps_ = capi_steps_ = true;
      if (step_open_) {  // a begin/end step is open: the mark ends it
        close(step_, r.ts, step_tid_, out);
        step_open_ = false;
      }
      Marker m;
      m.ts = r.ts;
      m.kind = MarkerKind::kStepBoundary;
      m.number = r.value >= 0 ? r.value : next_number_;
      next_number_ = m.number + 1;
      m.thread = tid;
      m.name = names_.intern("step");
      if (r.kind == kStepUntracedKind) mark_step_untraced(m);
      out.markers.push_back(m);
      break;
    }
    case HostRecType::kStepFlops: {
      Marker m;
      m.ts = r.ts;
      m.kind = MarkerKind::kStepFlops;
      m.value = std::bit_cast<double>(r.value);
      m.thread = tid;
      out.markers.push_back(m);
      break;
    }
    case HostRecType::kStepWork: {
      Marker m;
      m.ts = r.ts;
      m.kind = r.kind == static_cast<uint8_t>(WorkUnit::kSamples) ? MarkerKind::kStepSamples
                                                                  : MarkerKind::kStepTokens;
      m.value = std::bit_cast<double>(r.value);
      m.thread = tid;
      out.markers.push_back(m);
      break;
    }
    default:
      return;
  }
}

// NVTX ranges and marks, classified by the step / data patterns.
void HostEventProcessor::nvtx(const HostRecord& r, uint32_t tid, EventBatch& out, Stats& stats) {
  switch (r.type) {
    case HostRecType::kNvtxPush: {
      Open o;
      o.start = r.ts;
      classify(r, &o);
      if (o.kind == RangeKind::kStep) explicit_steps_ = nvtx_steps_ = true;
      push(nvtx_stacks_[{tid, r.aux}], o, kMaxNvtxNesting, stats);
      break;
    }
    case HostRecType::kNvtxPop: {
      auto it = nvtx_stacks_.find({tid, r.aux});
      if (it != nvtx_stacks_.end()) pop(it->second, r.ts, tid, out);
      break;
    }
    case HostRecType::kNvtxStart: {
      Open o;
      o.start = r.ts;
      classify(r, &o);
      if (o.kind == RangeKind::kStep) explicit_steps_ = nvtx_steps_ = true;
      if (!o.keep) break;
      if (started_.size() < kMaxStartedRanges) {
        started_[static_cast<uint64_t>(r.value)] = o;
      } else {
        stats.add(Stat::host_ranges_dropped);  // its nvtxRangeEnd finds nothing
      }
      break;
    }
    case HostRecType::kNvtxEnd: {
      auto it = started_.find(static_cast<uint64_t>(r.value));
      if (it == started_.end()) break;
      close(it->second, r.ts, tid, out);
      started_.erase(it);
      break;
    }
    case HostRecType::kNvtxMark: {
      Open o;
      classify(r, &o);
      if (o.kind != RangeKind::kStep) break;
      explicit_steps_ = nvtx_steps_ = true;
      Marker m;
      m.ts = r.ts;
      m.kind = MarkerKind::kStepBoundary;
      m.number = o.number >= 0 ? o.number : next_number_;
      next_number_ = m.number + 1;
      m.thread = tid;
      m.name = o.name;
      out.markers.push_back(m);
      break;
    }
    default:
      return;
  }
}

void HostEventProcessor::process(std::vector<TimedRecord>& records, EventBatch& out,
                                 SiteTable* sites, Stats& stats) {
  std::stable_sort(records.begin(), records.end(),
                   [](const TimedRecord& a, const TimedRecord& b) { return a.rec.ts < b.rec.ts; });
  for (const TimedRecord& tr : records) {
    const HostRecord& r = tr.rec;
    const uint32_t tid = tr.tid;
    switch (r.type) {
      case HostRecType::kStepBegin:
      case HostRecType::kStepEnd:
      case HostRecType::kStepMark:
      case HostRecType::kStepFlops:
      case HostRecType::kStepWork:
        capi_step(r, tid, out);
        break;
      case HostRecType::kNvtxPush:
      case HostRecType::kNvtxPop:
      case HostRecType::kNvtxStart:
      case HostRecType::kNvtxEnd:
      case HostRecType::kNvtxMark:
        nvtx(r, tid, out, stats);
        break;
      case HostRecType::kDataPush:
      case HostRecType::kUserPush: {
        Open o;
        o.start = r.ts;
        o.kind = r.type == HostRecType::kDataPush ? RangeKind::kData : RangeKind::kUser;
        o.keep = true;
        o.name = intern(r);
        auto& stack = r.type == HostRecType::kDataPush ? data_stacks_[tid] : user_stacks_[tid];
        push(stack, o, kMaxNestedRanges, stats);
        break;
      }
      case HostRecType::kDataPop:
      case HostRecType::kUserPop: {
        pop(r.type == HostRecType::kDataPop ? data_stacks_[tid] : user_stacks_[tid], r.ts, tid,
            out);
        break;
      }
      case HostRecType::kStack:
        if (sites != nullptr && tr.nframes > 0) {
          const SiteKind kind = r.kind == static_cast<uint8_t>(StackKind::kSync)
                                    ? SiteKind::kSync
                                    : SiteKind::kLaunchAfterPause;
          if (!sites->add(kind, tr.frames, tr.nframes, r.value)) {
            stats.add(Stat::native_sites_dropped);
          }
        }
        break;
      case HostRecType::kStackFrames:
      case HostRecType::kApiCall:  // taken by the pipeline (the parser's add_timed_call)
        break;
    }
  }
}

void HostEventProcessor::finish(Stats& stats) {
  if (step_open_) {
    stats.add(Stat::incomplete_trailing_step);
    step_open_ = false;
  }
}

}  // namespace gpuacct::inject
