// The fake CUPTI's delivery: pending records placed into client buffers (bufferRequested) in a
// seeded, per-lane order; full buffers handed back (bufferCompleted) by the worker thread, on a
// flush, the periodic flush and at exit; and the library's load / exit hooks.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "sim_cupti_state.h"

namespace sim_cupti {

namespace {

// Asks the client for a buffer (fill_mu held, mu not held).  Returns false when refused.
bool RequestBuffer(State& s, CUpti_BuffersCallbackRequestFunc request) {
  uint8_t* buf = nullptr;
  size_t size = 0;
  size_t max_records = 0;
  request(&buf, &size, &max_records);
  bool refuse_fault;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.buffer_requests;
    refuse_fault = s.faults.buffer_refused < 0 || s.buffer_requests <= s.faults.buffer_refused;
    if (buf != nullptr && refuse_fault) {
      // Simulated refusal: give the client its buffer straight back, empty, so it can free it.
      s.done.push_back({buf, size, 0});
    }
  }
  if (buf == nullptr || refuse_fault) return false;
  const size_t pad = (8 - (reinterpret_cast<uintptr_t>(buf) & 7u)) & 7u;
  if (size < pad + sizeof(CUpti_ActivityAPI)) {
    // Too small to hold anything: return it empty rather than loop asking for more.
    std::lock_guard<std::mutex> lock(s.mu);
    s.done.push_back({buf, size, 0});
    return false;
  }
  s.current = ClientBuffer{buf, size, pad, 0, max_records};
  return true;
}

// GPUACCT_SIM_HOLD_BUFFERS: which per-thread buffers still wait.  Real CUPTI puts a record in
// a buffer when it is made (a kernel's at its launch, on the launching thread's buffer with
// CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, default 1) and hands a buffer back only once
// every record in it is complete: cuptiActivityFlushAll(0) "doesn't return buffers which have
// one or more incomplete records", the periodic flush returns only full, complete buffers
// (cupti_activity.h, cuptiActivityFlushAll / cuptiActivityFlushPeriod).  So one kernel still
// queued holds back every record its thread made since its buffer began -- API records too.
// Each owner's pending records, in production order, fill buffers of `size` records; the
// last one is partly filled.
struct HeldBuffers {
  uint64_t size = 0;  // 0: records go one by one (the default)
  // Per owner, per buffer: 1 when it must wait (a record not ready, or, on a periodic or
  // threshold pass, not full).
  std::unordered_map<uint64_t, std::vector<uint8_t>> wait;
  bool waits(uint64_t owner, uint64_t nth) const {
    const auto it = wait.find(owner);
    const uint64_t b = nth / size;
    return it != wait.end() && b < it->second.size() && it->second[b] != 0;
  }
};

template <typename CompleteNow>
HeldBuffers HoldBuffers(const State& s, PlaceMode mode, CompleteNow&& complete_now) {
  HeldBuffers h;
  if (s.hold_buffer_records == 0 || mode == PlaceMode::kForced) return h;
  h.size = s.hold_buffer_records;
  std::unordered_map<uint64_t, uint64_t> count;
  for (const Pending& p : s.pending) {
    const uint64_t b = count[p.owner]++ / h.size;
    std::vector<uint8_t>& w = h.wait[p.owner];
    if (w.size() <= b) w.resize(b + 1, 0);
    if (!complete_now(p) || p.delay != 0) w[b] = 1;
  }
  // Only FlushAll(0) hands back a partly filled buffer.
  if (mode != PlaceMode::kFlush) {
    for (auto& [owner, w] : h.wait) {
      if (count[owner] % h.size != 0) w.back() = 1;
    }
  }
  return h;
}

// Orders a batch the way a real trace arrives: per-lane order kept (a stream's or a thread's
// records stay in their order), lanes interleaved in random-length chunks.
void MessyOrder(State& s, std::vector<Pending>& batch) {
  if (!s.shuffle || batch.size() < 2) return;
  std::vector<uint64_t> lane_keys;
  std::unordered_map<uint64_t, std::vector<size_t>> lanes;
  for (size_t i = 0; i < batch.size(); ++i) {
    auto it = lanes.find(batch[i].lane);
    if (it == lanes.end()) {
      lane_keys.push_back(batch[i].lane);
      it = lanes.emplace(batch[i].lane, std::vector<size_t>()).first;
    }
    it->second.push_back(i);
  }
  std::vector<size_t> cursor(lane_keys.size(), 0);
  std::vector<size_t> active(lane_keys.size());
  for (size_t i = 0; i < active.size(); ++i) active[i] = i;
  std::vector<Pending> out;
  out.reserve(batch.size());
  while (!active.empty()) {
    const size_t pick = static_cast<size_t>(SplitMix(s.rng) % active.size());
    const size_t li = active[pick];
    const std::vector<size_t>& idx = lanes[lane_keys[li]];
    size_t chunk = 1 + static_cast<size_t>(SplitMix(s.rng) % 16);
    while (chunk-- > 0 && cursor[li] < idx.size()) out.push_back(batch[idx[cursor[li]++]]);
    if (cursor[li] == idx.size()) {
      active[pick] = active.back();
      active.pop_back();
    }
  }
  batch.swap(out);
}

void WorkerMain() {
  State& s = S();
  auto next_periodic = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    const uint32_t period = s.flush_period_ms;
    if (period != 0) {
      s.worker_cv.wait_until(lock, next_periodic, [&] { return s.worker_stop || !s.done.empty(); });
    } else {
      s.worker_cv.wait_for(lock, std::chrono::milliseconds(200), [&] {
        return s.worker_stop || !s.done.empty() || s.flush_period_ms != 0;
      });
    }
    if (s.worker_stop) return;
    const auto now = std::chrono::steady_clock::now();
    const bool periodic = s.flush_period_ms != 0 && now >= next_periodic;
    if (s.flush_period_ms != 0 && now >= next_periodic) {
      next_periodic = now + std::chrono::milliseconds(s.flush_period_ms);
    } else if (s.flush_period_ms == 0) {
      next_periodic = now;
    }
    lock.unlock();
    if (periodic) Place(PlaceMode::kPeriodic);  // delivers full buffers only
    Deliver();
    lock.lock();
  }
}

}  // namespace

void ClearGpuTimes(AnyRecord& r) {
  switch (r.base.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      r.kernel.start = r.kernel.end = r.kernel.completed = 0;
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      r.memcpy.start = r.memcpy.end = 0;
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      r.p2p.start = r.p2p.end = 0;
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      r.memset.start = r.memset.end = 0;
      break;
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
      r.graph.start = r.graph.end = 0;
      break;
    default:
      break;
  }
}

void LendHeldBuffers(uint64_t owner) {
  State& s = S();
  std::lock_guard<std::recursive_mutex> fill(s.fill_mu);
  CUpti_BuffersCallbackRequestFunc request;
  uint64_t needed;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    request = s.request;
    const auto it = s.owner_pending.find(owner);
    const uint64_t n = it == s.owner_pending.end() ? 0 : it->second;
    needed =
        s.hold_buffer_records == 0 ? 0 : (n + s.hold_buffer_records - 1) / s.hold_buffer_records;
  }
  if (request == nullptr) return;
  std::deque<ClientBuffer>& lent = s.held_buffers[owner];
  while (lent.size() < needed) {
    ClientBuffer saved = s.current;
    s.current = ClientBuffer();
    const bool got = RequestBuffer(s, request);
    if (got) lent.push_back(s.current);
    s.current = saved;
    if (!got) return;  // refused: its records go to the current buffer when ready
  }
}

// Every owner with records pending gets the buffers they need (fill_mu held, mu not held).
void LendToWaitingOwners(State& s) {
  std::vector<uint64_t> owners;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& [owner, n] : s.owner_pending) {
      if (n > 0) owners.push_back(owner);
    }
  }
  for (uint64_t owner : owners) LendHeldBuffers(owner);
}

void QueueHeldBuffers(State& s, bool even_empty) {
  for (auto& [owner, lent] : s.held_buffers) {
    for (auto it = lent.begin(); it != lent.end();) {
      if (it->count == 0 && !even_empty) {
        ++it;
        continue;
      }
      std::swap(s.current, *it);
      QueueCurrent(s, true);
      std::swap(s.current, *it);
      it = lent.erase(it);
    }
  }
}

void QueueCurrent(State& s, bool even_empty) {
  if (s.current.buf == nullptr) return;
  if (s.current.count == 0 && !even_empty) return;
  std::lock_guard<std::mutex> lock(s.mu);
  s.done.push_back({s.current.buf, s.current.size, s.current.count == 0 ? 0 : s.current.used});
  s.current = ClientBuffer();
}

void Place(PlaceMode mode) {
  State& s = S();
  std::unique_lock<std::recursive_mutex> fill(s.fill_mu);
  std::vector<Pending> batch;
  CUpti_BuffersCallbackRequestFunc request;
  bool zero_incomplete;
  uint64_t now;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    request = s.request;
    if (request == nullptr) return;
    zero_incomplete = s.forced_zero_incomplete;
    now = simNow();
    const bool flush_point = mode != PlaceMode::kThreshold;
    // A GPU record (not on a host lane) waits out the delivery lag once complete.
    auto complete_now = [&](const Pending& p) {
      const uint64_t lag = (p.lane & kHostLaneBit) != 0 ? 0 : s.gpu_delivery_lag_ns;
      return p.complete_at + lag <= now;
    };
    const HeldBuffers held = HoldBuffers(s, mode, complete_now);
    std::unordered_map<uint64_t, uint64_t> nth;  // per owner: records seen (held buffers)
    std::deque<Pending> keep;
    for (Pending& p : s.pending) {
      const bool complete = complete_now(p);
      const uint64_t nth_of_owner = nth[p.owner]++;
      const bool in_held = held.size != 0 && held.waits(p.owner, nth_of_owner);
      if (mode == PlaceMode::kForced || (complete && p.delay == 0 && !in_held)) {
        if (s.hold_buffer_records != 0) {
          p.held_index = nth_of_owner / s.hold_buffer_records;
          auto owned = s.owner_pending.find(p.owner);
          if (owned != s.owner_pending.end() && owned->second > 0) --owned->second;
        }
        batch.push_back(p);
      } else {
        if (complete && flush_point && p.delay > 0) --p.delay;
        keep.push_back(p);
      }
    }
    s.pending.swap(keep);
    s.next_threshold = s.pending.size() + kThresholdStep;
    MessyOrder(s, batch);
  }
  bool refused = false;
  for (Pending& p : batch) {
    // The record goes into its owner's held buffer when it has one (the buffer swapped in as
    // the current one for this record).
    auto held = s.held_buffers.find(p.owner);
    const bool into_held = held != s.held_buffers.end() && p.held_index < held->second.size();
    ClientBuffer* target = into_held ? &held->second[p.held_index] : nullptr;
    if (into_held) std::swap(s.current, *target);
    if (mode == PlaceMode::kForced && zero_incomplete && p.complete_at > now) {
      // Like real CUPTI: a forced flush hands out unfinished GPU records with 0 timestamps.
      ClearGpuTimes(p.rec);
    }
    const size_t size = RecordSize(p.rec.base.kind);
    ClientBuffer& cur = s.current;
    const bool full =
        cur.buf != nullptr &&
        (cur.used + size > cur.size || (cur.max_records != 0 && cur.count >= cur.max_records));
    if (full) QueueCurrent(s, false);
    if (s.current.buf == nullptr && !refused && !RequestBuffer(s, request)) refused = true;
    if (s.current.buf == nullptr || s.current.used + size > s.current.size) {
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.dropped;  // no buffer (refused) or one too small for this record
    } else {
      std::memcpy(s.current.buf + s.current.used, &p.rec, size);
      s.current.used += size;
      ++s.current.count;
    }
    if (into_held) std::swap(s.current, *target);
  }
  if (mode == PlaceMode::kFlush || mode == PlaceMode::kForced) QueueCurrent(s, false);
  // A held buffer that got records got all it will: it goes back now.
  QueueHeldBuffers(s, false);
  if (s.hold_buffer_records != 0) LendToWaitingOwners(s);
  fill.unlock();
  if (mode == PlaceMode::kThreshold) {
    // Full buffers go back from CUPTI's own thread, as with the real library.
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.done.empty()) {
      StartWorkerLocked(s);
      s.worker_cv.notify_one();
    }
  } else {
    Deliver();
  }
}

void Deliver() {
  State& s = S();
  std::lock_guard<std::recursive_mutex> deliver(s.deliver_mu);
  for (;;) {
    Completed c;
    CUpti_BuffersCallbackCompleteFunc complete;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.done.empty()) return;
      c = s.done.front();
      s.done.pop_front();
      complete = s.complete;
    }
    if (complete != nullptr) complete(nullptr, 0, c.buf, c.size, c.valid);
  }
}

void StartWorkerLocked(State& s) {
  if (s.worker_started) return;
  s.worker_started = true;
  s.worker_stop = false;
  s.worker = std::thread(WorkerMain);
}

namespace {

// The process that loaded the library; a fork child inherits the state but none of the
// threads, so its exit must not join the parent's worker or take locks a parent thread held.
pid_t g_load_pid = 0;

void AtExit() {
  if (getpid() != g_load_pid) return;
  State& s = S();
  // Hand over what the client left behind (nothing, if it flushed and disabled at exit).
  bool leftovers;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    leftovers = s.request != nullptr && (!s.pending.empty() || !s.done.empty());
  }
  {
    std::lock_guard<std::recursive_mutex> fill(s.fill_mu);
    leftovers = leftovers || s.current.count != 0;
  }
  if (leftovers) Place(PlaceMode::kForced);
  std::thread worker;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.worker_stop = true;
    s.worker_cv.notify_all();
    worker.swap(s.worker);
  }
  if (worker.joinable()) worker.join();
  WriteCounts(s);
}

__attribute__((constructor)) void OnLoad() {
  g_load_pid = getpid();
  (void)S();
  (void)Names();
  simInternalSetTracer(&kTracer);
  std::atexit(AtExit);
}

}  // namespace

}  // namespace sim_cupti
