#include "inject/recording/recorder.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "inject/clock.h"
#include "inject/recording/native_stacks.h"

namespace gpuacct::inject {

std::atomic<int> g_mode{kModeIdle};
HotConfig g_hot;

namespace {

thread_local ThreadState* t_state = nullptr;

struct ExitGuard {
  ThreadState* state = nullptr;
  ~ExitGuard() {
    if (state != nullptr) {
      // No lock here (a fork child's exit could wait on a lock a parent thread held): the
      // worker reads the time when it sees the orphan, acquire() when the id comes back.
      state->exit_ns.store(now_ns(), std::memory_order_relaxed);
      state->orphaned.store(true, std::memory_order_release);
    }
    t_state = nullptr;
  }
};

ThreadState* create_state() {
  const auto tid = static_cast<uint32_t>(syscall(SYS_gettid));
  const auto pt =
      static_cast<uint32_t>(reinterpret_cast<uintptr_t>(reinterpret_cast<void*>(pthread_self())));
  ThreadState* s = Registry::get().acquire(tid, pt);
  if (s == nullptr) return nullptr;
  static thread_local ExitGuard guard;
  guard.state = s;
  t_state = s;
  return s;
}

inline bool recording() {
  const int m = g_mode.load(std::memory_order_relaxed);
  if (m == kModeRecording) return true;
  if (m == kModeStopped) return false;
  return start_lazily();
}

}  // namespace

Registry& Registry::get() {
  static Registry* r = new Registry();  // never destroyed
  return *r;
}

ThreadState* Registry::acquire(uint32_t tid, uint32_t pthread_low) {
  const int64_t now = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  for (const ThreadState* gone : live_) {
    if (gone->pthread_low == pthread_low && gone->orphaned.load(std::memory_order_acquire)) {
      events_.push_back(
          {pthread_low, gone->tid, gone->exit_ns.load(std::memory_order_relaxed), true});
    }
  }
  events_.push_back({pthread_low, tid, now, false});
  ThreadState* s = nullptr;
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
  } else {
    size_t cap = 1;
    while (cap < g_hot.ring_capacity) cap <<= 1;
    s = new (std::nothrow) ThreadState(cap);
    if (s == nullptr) return nullptr;
    s->index = next_index_++;
  }
  s->tid = tid;
  s->pthread_low = pthread_low;
  s->api_depth = 0;
  s->last_api_exit = 0;
  s->last_stack_ts = 0;
  s->exit_ns.store(0, std::memory_order_relaxed);
  s->orphaned.store(false, std::memory_order_relaxed);
  live_.push_back(s);
  return s;
}

void Registry::snapshot(std::vector<ThreadState*>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  out.assign(live_.begin(), live_.end());
}

void Registry::take_thread_events(std::vector<ThreadIdEvent>& out) {
  out.clear();
  std::lock_guard<std::mutex> lock(mu_);
  out.swap(events_);
}

void Registry::recycle(ThreadState* s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(live_.begin(), live_.end(), s);
  if (it == live_.end()) return;
  live_.erase(it);
  free_.push_back(s);
}

ThreadState* current_thread() {
  ThreadState* s = t_state;
  if (s != nullptr) return s;
  return create_state();
}

void emit_at(int64_t ts, HostRecType type, int64_t value, const char* name, uint32_t aux,
             uint8_t kind) {
  ThreadState* s = current_thread();
  if (s == nullptr) return;
  const int64_t i = s->ring.try_reserve(1);
  if (i < 0) return;  // full: counted by the ring
  HostRecord& r = s->ring.slot(static_cast<uint64_t>(i));
  r.ts = ts;
  r.value = value;
  r.type = type;
  r.kind = kind;
  r.aux = aux;
  r.flags = 0;
  if (name != nullptr) {
    const size_t n = strnlen(name, kHostNameBytes + 1);
    const size_t m = n > kHostNameBytes ? kHostNameBytes : n;
    std::memcpy(r.name, name, m);
    r.len = static_cast<uint8_t>(m);
    if (n > kHostNameBytes) r.flags |= kNameTruncated;
  } else {
    r.len = 0;
  }
  s->ring.publish(1);
}

void emit(int64_t ts, HostRecType type, int64_t value, const char* name, uint32_t aux,
          uint8_t kind) {
  if (!recording()) return;
  emit_at(ts, type, value, name, aux, kind);
}

uint64_t next_range_id() {
  // Not recording (stopped, a fork child): no thread state -- its first creation locks and
  // allocates.  NVTX treats 0 as "no range".
  if (!recording()) return 0;
  ThreadState* s = current_thread();
  if (s == nullptr) return 0;
  return (static_cast<uint64_t>(s->index + 1) << 40) | (++s->range_counter & ((1ull << 40) - 1));
}

namespace {

void emit_stack(ThreadState* s, int64_t ts, StackKind kind, int64_t value) {
  uint64_t frames[kMaxFrames];
  const int n = capture_stack(frames, kMaxFrames);
  if (n <= 0) return;
  const int64_t i = s->ring.try_reserve(1 + kStackSlots);
  if (i < 0) return;
  HostRecord& h = s->ring.slot(static_cast<uint64_t>(i));
  h.ts = ts;
  h.value = value;
  h.type = HostRecType::kStack;
  h.kind = static_cast<uint8_t>(kind);
  h.aux = static_cast<uint32_t>(n);
  h.len = 0;
  h.flags = 0;
  for (int slot = 0; slot < kStackSlots; ++slot) {
    HostRecord& c = s->ring.slot(static_cast<uint64_t>(i) + 1 + static_cast<uint64_t>(slot));
    c.type = HostRecType::kStackFrames;
    c.ts = ts;
    c.len = 0;
    for (int k = 0; k < kFramesPerSlot; ++k) {
      const int f = slot * kFramesPerSlot + k;
      c.frames[k] = f < n ? frames[f] : 0;
    }
  }
  s->ring.publish(1 + kStackSlots);
}

}  // namespace

namespace {

void bump(std::atomic<uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void count_launch_callback(ThreadState& s, cupti::ApiDomain domain) {
  if (domain == cupti::ApiDomain::kRuntime) {
    bump(s.runtime_launch_callbacks);
    return;
  }
  bump(s.driver_launch_callbacks);
  if (s.api_depth > 0 && s.outer_call_runtime) bump(s.driver_launch_callbacks_nested);
}

// One kApiCall record: O(1), no lock, no allocation.  It leaves an eighth of the ring to the
// marks and ranges (a flood of calls drops calls, counted, before it drops a step mark); every
// half a ring of records written wakes the worker (one pipe write per half ring).
void emit_api_call(ThreadState* s, int64_t start, int64_t end, HostApiKind kind,
                   const cupti::ApiCallExit& call) {
  const int64_t i = s->ring.try_reserve(1, s->ring.capacity() / 8);
  if (i < 0) return;
  HostRecord& r = s->ring.slot(static_cast<uint64_t>(i));
  r.ts = start;
  r.value = end;
  r.type = HostRecType::kApiCall;
  r.kind = static_cast<uint8_t>(kind);
  r.aux = call.failed ? 0 : call.correlation_id;
  r.flags = 0;
  r.len = 0;
  std::memcpy(r.name + kApiCallIndexAt, &call.traced_index, sizeof(call.traced_index));
  if (s->nested_start != 0) {
    // The driver call nested in it: when the work was submitted (the accountant's submission
    // time), and the id its ops may carry instead -- a kernel's id is "identical to the
    // correlation ID in the driver or runtime API activity record that launched the kernel"
    // (CUpti_ActivityKernel10), without saying which of a nest's two.
    r.flags = kApiCallNested;
    const uint32_t nested = call.failed ? 0 : s->nested_correlation;
    std::memcpy(r.name + kApiCallNestedIndexAt, &s->nested_index, sizeof(s->nested_index));
    std::memcpy(r.name + kApiCallNestedIdAt, &nested, sizeof(nested));
    std::memcpy(r.name + kApiCallNestedStartAt, &s->nested_start, sizeof(s->nested_start));
    std::memcpy(r.name + kApiCallNestedEndAt, &s->nested_end, sizeof(s->nested_end));
  }
  s->ring.publish(1);
  const uint64_t half = s->ring.capacity() / 2;
  if ((static_cast<uint64_t>(i) & (half - 1)) == 0 && i != 0 && g_hot.wake_worker != nullptr) {
    g_hot.wake_worker();
  }
}

}  // namespace

// Nesting: a driver call made inside a traced runtime call (the runtime's cuLaunchKernel under
// cudaLaunchKernel) is the runtime call's and costs no clock read.  Any other call entered while
// one is open is a new outermost call: the open one's exit was not seen (its callbacks were
// switched off mid-call by GPUACCT_SAMPLE, or it began before recording did).
void hook_api_enter(HostApiKind kind, cupti::ApiDomain domain, uint64_t* scratch) {
  if (g_mode.load(std::memory_order_relaxed) != kModeRecording) return;
  if (kind == HostApiKind::kCopy && !g_hot.api_calls) {
    // Traced only so that the thread has a state, and its id is known, before CUPTI records
    // the call (without SYSTEM thread ids: Registry::acquire).
    current_thread();
    return;
  }
  // The clock is read before the thread's state is made (its first call: that locks and
  // allocates), and otherwise only past the depth check, so that a driver call nested in a
  // runtime call costs no clock read (the nested budget, docs/injection.md).
  ThreadState* s = t_state;
  int64_t now = 0;
  if (s == nullptr) {
    now = now_ns();
    s = current_thread();
    if (s == nullptr) return;
  }
  if (kind == HostApiKind::kLaunch) count_launch_callback(*s, domain);
  if (s->api_depth != 0 && s->outer_call_runtime && domain == cupti::ApiDomain::kDriver) {
    // A driver call inside a runtime call.  Timed only when calls are written (a clock read
    // each side), and only the one directly inside.
    if (++s->api_depth == 2 && g_hot.api_calls) {
      s->nested_start = now != 0 ? now : now_ns();
      s->nested_end = s->nested_start;
    }
    return;
  }
  s->api_depth = 1;
  s->nested_start = 0;
  s->outer_call_runtime = domain == cupti::ApiDomain::kRuntime;
  if (now == 0) now = now_ns();
  if (scratch != nullptr) *scratch = static_cast<uint64_t>(now);
  if (kind == HostApiKind::kLaunch && g_hot.stacks && s->last_api_exit != 0 &&
      now - s->last_api_exit > g_hot.pause_threshold_ns &&
      now - s->last_stack_ts > g_hot.stack_min_interval_ns) {
    s->last_stack_ts = now;
    emit_stack(s, now, StackKind::kLaunchAfterPause, now - s->last_api_exit);
  }
}

void hook_api_exit(HostApiKind kind, uint64_t* scratch, const cupti::ApiCallExit& call) {
  if (g_mode.load(std::memory_order_relaxed) != kModeRecording) return;
  if (kind == HostApiKind::kCopy && !g_hot.api_calls) return;
  ThreadState* s = current_thread();
  if (s == nullptr) return;
  if (s->api_depth > 1) {
    --s->api_depth;
    if (s->api_depth == 1 && s->nested_start != 0) {  // the one directly inside
      s->nested_end = now_ns();
      s->nested_correlation = call.correlation_id;
      s->nested_index = call.traced_index;
    }
    return;
  }
  // Depth 0: the call's enter was not seen (recording began inside it); no span to write.
  const bool entered = s->api_depth == 1;
  s->api_depth = 0;
  const int64_t now = now_ns();
  s->last_api_exit = now;
  const int64_t start = scratch != nullptr ? static_cast<int64_t>(*scratch) : 0;
  if (entered && g_hot.api_calls && start != 0) emit_api_call(s, start, now, kind, call);
  if (kind == HostApiKind::kSync && g_hot.stacks && start != 0) {
    const int64_t dur = now - start;
    if (dur > g_hot.sync_threshold_ns && now - s->last_stack_ts > g_hot.stack_min_interval_ns) {
      s->last_stack_ts = now;
      emit_stack(s, now, StackKind::kSync, dur);
    }
  }
}

}  // namespace gpuacct::inject
