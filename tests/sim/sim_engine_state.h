// Internal to the fake driver (libcuda.so.1): the virtual GPU's state (devices, contexts,
// streams, graphs), the shared clock and the engine lock, shared by its translation units
// (engine core, traced API calls, driver entry points).  Nothing here is exported.
#ifndef GPUACCT_TESTS_SIM_SIM_ENGINE_STATE_H_
#define GPUACCT_TESTS_SIM_SIM_ENGINE_STATE_H_

#include <cuda.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "sim_cuda.h"
#include "sim_internal.h"

// Opaque handle types of sim_cuda.h.  A simStream_st* doubles as the CUstream / cudaStream_t
// handed to CUPTI clients (they never dereference it).
struct simStream_st {
  int device = 0;
  uint32_t id = 0;
  uint64_t free_at = 0;  // GPU time when the last op queued on this stream completes
};

struct simGraph_st {
  struct Node {
    const char* name;
    uint64_t ns;
    uint64_t node_id;
  };
  uint32_t id = 0;
  std::vector<Node> nodes;
};

namespace sim_engine {

constexpr uint32_t kDefaultStreamId = 7;  // what real CUPTI reports for the legacy NULL stream
constexpr uint32_t kFirstStreamId = 13;

struct SimContext {
  int device = 0;
  uint32_t id = 0;
};

// The C library's clock_gettime (libcuda.so.1 interposes the symbol, see sim_engine.cc).
int RealClockGettime(clockid_t clock, timespec* ts);
// CLOCK_REALTIME as the C library reads it, in ns.
uint64_t RealtimeNs();

// One clock for the host and the GPU (and cuptiGetTimestamp).  now = base + offset, where base
// is CLOCK_REALTIME frozen at configure() (virtual) or read live (hybrid), and offset collects
// every virtual advance.  Readers need no lock; writers hold the engine mutex, so advance_to is
// race-free against other writers.
//
// Several sim processes can share one timeline (tests/sim/fake_nccl: ranks of a simulated job):
// GPUACCT_SIM_CLOCK_BASE_NS starts every virtual clock at the same value instead of
// CLOCK_REALTIME, and GPUACCT_SIM_CLOCK_OFFSET_NS (signed) is this process's planted host clock
// error: added to everything it reads (host and GPU times alike, as a host whose clock is off
// and whose GPU timestamps are converted with it).  The "true" time is Now() - planted offset.
class SimClock {
 public:
  void Configure() {
    const char* m = std::getenv("GPUACCT_SIM_CLOCK");
    hybrid_.store(m != nullptr && std::strcmp(m, "hybrid") == 0, std::memory_order_relaxed);
    const char* b = std::getenv("GPUACCT_SIM_CLOCK_BASE_NS");
    const uint64_t base = b != nullptr && *b != '\0' ? std::strtoull(b, nullptr, 10) : 0;
    base_.store(base != 0 ? base : RealtimeNs(), std::memory_order_relaxed);
    const char* o = std::getenv("GPUACCT_SIM_CLOCK_OFFSET_NS");
    planted_.store(o != nullptr && *o != '\0' ? std::strtoll(o, nullptr, 10) : 0,
                   std::memory_order_relaxed);
    offset_.store(0, std::memory_order_release);
  }
  uint64_t Now() const {
    uint64_t base = hybrid_.load(std::memory_order_relaxed) ? RealtimeNs()
                                                            : base_.load(std::memory_order_relaxed);
    // Unsigned wrap-around adds a negative planted offset.
    return base + offset_.load(std::memory_order_acquire) +
           static_cast<uint64_t>(planted_.load(std::memory_order_relaxed));
  }
  int64_t planted_offset() const { return planted_.load(std::memory_order_relaxed); }
  bool hybrid() const { return hybrid_.load(std::memory_order_relaxed); }
  void Advance(uint64_t ns) { offset_.fetch_add(ns, std::memory_order_acq_rel); }
  void AdvanceTo(uint64_t t) {
    uint64_t n = Now();
    if (t > n) Advance(t - n);
  }

 private:
  std::atomic<bool> hybrid_{false};
  std::atomic<uint64_t> base_{0};
  std::atomic<uint64_t> offset_{0};
  std::atomic<int64_t> planted_{0};
};

struct Engine {
  std::mutex mu;  // guards everything below except the atomics
  SimClock clock;
  bool initialized = false;
  int num_devices = 0;
  std::vector<std::unique_ptr<SimContext>> contexts;  // index = device
  std::vector<std::unique_ptr<simStream_st>> streams;
  std::unordered_set<const simStream_st*> live_streams;
  std::vector<simStream_st*> default_streams;  // index = device
  std::vector<std::unique_ptr<simGraph_st>> graphs;
  std::unordered_set<const simGraph_st*> live_graphs;
  uint32_t next_stream_id = kFirstStreamId;
  uint32_t next_graph_id = 1;
  uint64_t next_node_id = 1;

  std::atomic<uint64_t> launch_cost{4000};
  std::atomic<uint64_t> latency{5000};
  std::atomic<uint64_t> kernels{0};
  std::atomic<uint64_t> launch_calls{0};
  std::atomic<uint32_t> next_correlation{1};
  std::atomic<int> nested_ids{SIM_NESTED_SHARED_ID};
  std::atomic<uint64_t> device_memory{kDefaultDeviceMemory};
  std::atomic<const SimTracer*> tracer{nullptr};

  static constexpr uint64_t kDefaultDeviceMemory = 80ull << 30;

  Engine() { Configure(); }
  // (Re-)reads the knobs from the environment and restarts the clock.
  void Configure();
};

// Never destroyed: CUPTI clients call cuptiGetTimestamp (-> this clock) from atexit handlers and
// static destructors whose order relative to ours is unknowable.
Engine& E();

// Kernel names must stay valid for the life of the process (CUPTI clients keep the pointer).
const char* Intern(const char* name);

// The live stream `s`, or nullptr.  e.mu held.
inline simStream_st* FindStream(Engine& e, simStream_t s) {
  return e.live_streams.count(s) != 0 ? s : nullptr;
}

inline CUcontext CtxHandle(SimContext* c) {
  return reinterpret_cast<CUcontext>(c);
}
inline CUstream StreamHandle(simStream_st* s) {
  return reinterpret_cast<CUstream>(s);
}

// A new stream of `device` with CUPTI stream id `id`.  e.mu held.
simStream_st* NewStreamLocked(Engine& e, int device, uint32_t id);

// Forgets every planted counter (simReset; sim_engine_counters.cc).
void ClearCounterPlan();

}  // namespace sim_engine

#endif  // GPUACCT_TESTS_SIM_SIM_ENGINE_STATE_H_
