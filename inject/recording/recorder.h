// Per-thread host rings and the O(1) emit functions used by the C API, NVTX and CUPTI API
// callbacks.  The worker drains the rings (Runtime).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "analysis/model/events.h"
#include "cupti_hooks/api_table.h"
#include "cupti_hooks/collector.h"
#include "inject/config.h"
#include "inject/recording/host_ring.h"

namespace gpuacct::inject {

struct ThreadState {
  explicit ThreadState(size_t capacity) : ring(capacity) {}
  HostRing ring;
  uint32_t tid = 0;          // gettid()
  uint32_t pthread_low = 0;  // low 32 bits of pthread_self(): CUPTI's default thread id
  uint32_t index = 0;        // registry slot
  uint64_t range_counter = 0;
  int api_depth = 0;  // nesting of traced CUDA calls (runtime -> driver)
  bool outer_call_runtime = false;  // the outermost traced call open is a runtime call
  // With calls timed by callbacks: the driver call nested in the open runtime call (the
  // runtime's cuLaunchKernel): its span, correlation id and traced-api index; start 0: none.
  int64_t nested_start = 0;
  int64_t nested_end = 0;
  uint32_t nested_correlation = 0;
  uint16_t nested_index = 0;
  int64_t last_api_exit = 0;
  int64_t last_stack_ts = 0;
  // Launch callbacks seen while recording (issue 17 §2: does every runtime launch reach the
  // driver-domain callbacks?  docs/overhead.md).  Only the thread using the state writes them
  // (a relaxed load and store, no locked instruction); the worker reads them.  They keep
  // counting across a recycled state's owners: the worker takes differences.
  std::atomic<uint64_t> runtime_launch_callbacks{0};
  std::atomic<uint64_t> driver_launch_callbacks{0};
  std::atomic<uint64_t> driver_launch_callbacks_nested{0};  // inside a traced runtime call
  std::atomic<int64_t> exit_ns{0};    // when the thread exited (set before `orphaned`)
  std::atomic<bool> orphaned{false};  // the thread exited; the worker recycles after draining
};

// What the worker learns of a thread's CUPTI identity.  CUPTI's default thread id (when
// cuptiSetThreadIdType(SYSTEM) is refused) is the low 32 bits of pthread_self(), which the C
// library hands to a new thread once an old one is gone: the id names `tid` from its first call
// (`ns`, `exited` false) until it exits (`ns`, `exited` true).
struct ThreadIdEvent {
  uint32_t pthread_low = 0;
  uint32_t tid = 0;
  int64_t ns = 0;
  bool exited = false;
};

// 0 = not started, 1 = recording, 2 = stopped (finished, disabled, or a fork child).
inline constexpr int kModeIdle = 0, kModeRecording = 1, kModeStopped = 2;
extern std::atomic<int> g_mode;

// Set from Config when the runtime starts; the defaults are Config's.
struct HotConfig {
  size_t ring_capacity = kDefaultRingRecords;
  bool stacks = kDefaultStacks;
  // A launch after a host pause this long: capture its site.
  int64_t pause_threshold_ns = AccountingConfig{}.host_pause_threshold_ns;
  int64_t sync_threshold_ns = 50'000;         // blocking sync this long: capture site
  int64_t stack_min_interval_ns = 1'000'000;  // per thread, bounds unwinding cost
  // The traced calls are timed by their callbacks and written to the rings (kApiCall records;
  // cupti::ApiSource::kCallbacks): copies then get the full enter / exit path too.
  bool api_calls = false;
  // Wakes the worker (a write to its pipe), called when a ring fills past half with API calls,
  // so a burst of launches is drained before the ring is full.  Not per launch: at most once
  // per half a ring of records.
  void (*wake_worker)() = nullptr;
};
extern HotConfig g_hot;

// Starts the runtime on first use (defined in runtime.cc).  False if it cannot record.
bool start_lazily();

// The calling thread's state; created (one allocation) on the thread's first call.
ThreadState* current_thread();

// Emits one record stamped `ts` when recording (starting the library on its first use).
// `name` may be null.  O(1), no lock, no allocation after the first call.
//
// `ts` is now_ns() read by the entry point (C API, NVTX callback) before anything else: the
// first call of a process starts the library and the first call of a thread creates its state
// (milliseconds on a busy machine), and a mark must carry the time it was made, not the time
// set-up ended (a step opened before cuInit came out 0.38 ms short).
void emit(int64_t ts, HostRecType type, int64_t value, const char* name, uint32_t aux = 0,
          uint8_t kind = 0);
// The same without the recording check (tests).
void emit_at(int64_t ts, HostRecType type, int64_t value, const char* name, uint32_t aux,
             uint8_t kind);
// Next id for nvtxRangeStart on this thread (unique process-wide).  May start the library:
// read the clock before calling it.
uint64_t next_range_id();

// CUPTI API callback hooks (launch / sync calls; copies too without SYSTEM thread ids, only to
// make the thread's state): see CollectorHooks.
void hook_api_enter(HostApiKind kind, cupti::ApiDomain domain, uint64_t* scratch);
void hook_api_exit(HostApiKind kind, uint64_t* scratch, const cupti::ApiCallExit& call);

// Registry, for the worker.
class Registry {
 public:
  static Registry& get();
  // A thread's state, made on its first call (a mark, or the ENTER callback of its first
  // traced CUDA call: before CUPTI has any record of it).  Logs the thread's start, and the exit
  // of any gone thread that had the same pthread id (it must have exited for the id to be
  // reused), so the worker learns both before it parses a record of the new thread.
  ThreadState* acquire(uint32_t tid, uint32_t pthread_low);
  // Snapshot of live states (pointers stay valid: states are never freed).
  void snapshot(std::vector<ThreadState*>& out);
  // Returns a drained orphan to the free list.
  void recycle(ThreadState* s);
  // The thread events logged since the last call (in order), into `out` (replaced).  Every
  // state in an earlier snapshot() has its start in them or in an earlier call's.
  void take_thread_events(std::vector<ThreadIdEvent>& out);

 private:
  std::mutex mu_;
  std::vector<ThreadState*> live_;
  std::vector<ThreadState*> free_;
  std::vector<ThreadIdEvent> events_;  // taken by the worker every collect
  uint32_t next_index_ = 0;
};

}  // namespace gpuacct::inject
