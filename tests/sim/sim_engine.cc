// Simulation engine of the fake CUDA driver (libcuda.so.1).
//
// Holds the virtual GPU (devices, primary contexts, streams, graphs), the shared nanosecond
// clock, cuInit's injection loading and the sim runtime API of sim_cuda.h.  It knows nothing
// about CUPTI buffers: every API call is reported to an optional SimTracer (the fake CUPTI
// registers one when it is loaded) as ENTER -> (timeline computed under the engine lock) -> EXIT
// with the GPU ops it produced.
//
// Files: sim_engine_state.h (the state the files share), sim_engine_calls.cc (the traced sim
// runtime calls that make GPU work), sim_engine_driver.cc (cuInit, injection loading, driver
// queries), this file (clock, engine state, tracer interface, sim runtime setup and knobs).
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "sim_engine_state.h"

using namespace sim_engine;  // NOLINT(build/namespaces): this library's own internals

namespace {

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  if (end == v) return fallback;
  return static_cast<uint64_t>(x);
}

}  // namespace

namespace sim_engine {

int RealClockGettime(clockid_t clock, timespec* ts) {
  using ClockFn = int (*)(clockid_t, timespec*);
  static const ClockFn real = reinterpret_cast<ClockFn>(dlsym(RTLD_NEXT, "clock_gettime"));
  if (real != nullptr) return real(clock, ts);
  return static_cast<int>(syscall(SYS_clock_gettime, clock, ts));
}

uint64_t RealtimeNs() {
  timespec ts{};
  RealClockGettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Engine::Configure() {
  clock.Configure();
  launch_cost.store(EnvU64("GPUACCT_SIM_LAUNCH_COST_NS", 4000));
  latency.store(EnvU64("GPUACCT_SIM_LAUNCH_LATENCY_NS", 5000));
  device_memory.store(EnvU64("GPUACCT_SIM_DEVICE_MEMORY", kDefaultDeviceMemory));
  const char* ids = std::getenv("GPUACCT_SIM_NESTED_IDS");
  int mode = SIM_NESTED_SHARED_ID;
  if (ids != nullptr && std::strcmp(ids, "runtime") == 0) mode = SIM_NESTED_OP_CARRIES_RUNTIME_ID;
  if (ids != nullptr && std::strcmp(ids, "driver") == 0) mode = SIM_NESTED_OP_CARRIES_DRIVER_ID;
  nested_ids.store(mode);
}

Engine& E() {
  static Engine* engine = new Engine();
  return *engine;
}

const char* Intern(const char* name) {
  static std::mutex* mu = new std::mutex();
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(*mu);
  return names->emplace(name != nullptr ? name : "").first->c_str();
}

simStream_st* NewStreamLocked(Engine& e, int device, uint32_t id) {
  auto s = std::make_unique<simStream_st>();
  s->device = device;
  s->id = id;
  s->free_at = 0;
  simStream_st* raw = s.get();
  e.streams.push_back(std::move(s));
  e.live_streams.insert(raw);
  return raw;
}

}  // namespace sim_engine

// ---- exported: engine <-> tracer ----------------------------------------------------------------

extern "C" {

SIM_EXPORT void simInternalSetTracer(const SimTracer* tracer) {
  E().tracer.store(tracer, std::memory_order_release);
}

SIM_EXPORT int simInternalContextInfo(CUcontext context, uint32_t* device, uint32_t* context_id) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  for (const auto& c : e.contexts) {
    if (CtxHandle(c.get()) == context) {
      if (device != nullptr) *device = static_cast<uint32_t>(c->device);
      if (context_id != nullptr) *context_id = c->id;
      return 1;
    }
  }
  return 0;
}

SIM_EXPORT int simInternalStreamInfo(CUstream stream, uint32_t* device, uint32_t* stream_id) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  auto* s = reinterpret_cast<simStream_st*>(stream);
  if (stream == nullptr && !e.default_streams.empty()) s = e.default_streams[0];
  if (FindStream(e, s) == nullptr) return 0;
  if (device != nullptr) *device = static_cast<uint32_t>(s->device);
  if (stream_id != nullptr) *stream_id = s->id;
  return 1;
}
}  // extern "C"

// ---- exported: sim runtime API (sim_cuda.h) ----------------------------------------------------

extern "C" {

SIM_EXPORT int simInit(int num_devices) {
  if (num_devices <= 0 || num_devices > 64) return SIM_ERR_INVALID;
  // GPUACCT_SIM_CONTEXTS_BEFORE_INJECTION=1: the contexts exist before the injected library is
  // initialised (no CONTEXT_CREATED callback reaches it), as for a profiler attached after the
  // program made them.
  const char* before = std::getenv("GPUACCT_SIM_CONTEXTS_BEFORE_INJECTION");
  const bool contexts_first = before != nullptr && std::strcmp(before, "1") == 0;
  if (!contexts_first) cuInit(0);
  Engine& e = E();
  std::vector<CUcontext> created;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    if (e.initialized) return SIM_OK;
    e.num_devices = num_devices;
    e.contexts.clear();
    e.default_streams.clear();
    for (int d = 0; d < num_devices; ++d) {
      auto c = std::make_unique<SimContext>();
      c->device = d;
      c->id = static_cast<uint32_t>(d + 1);
      created.push_back(CtxHandle(c.get()));
      e.contexts.push_back(std::move(c));
      e.default_streams.push_back(NewStreamLocked(e, d, kDefaultStreamId));
    }
    e.initialized = true;
  }
  if (contexts_first) {
    cuInit(0);
    return SIM_OK;
  }
  const SimTracer* tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr) {
    for (CUcontext c : created) tracer->resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, c, nullptr);
  }
  return SIM_OK;
}

SIM_EXPORT void simShutdown(void) {
  Engine& e = E();
  std::vector<CUcontext> ctxs;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    if (!e.initialized) return;
    for (const auto& c : e.contexts) ctxs.push_back(CtxHandle(c.get()));
  }
  const SimTracer* tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr) {
    for (CUcontext c : ctxs)
      tracer->resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, c, nullptr);
  }
  std::lock_guard<std::mutex> lock(e.mu);
  // Contexts stay allocated (a client may still map a late record's context id); only the
  // initialized flag drops, so further API calls fail with SIM_ERR_NOT_INITIALIZED.
  e.initialized = false;
}

SIM_EXPORT void simReset(void) {
  Engine& e = E();
  {
    std::lock_guard<std::mutex> lock(e.mu);
    e.initialized = false;
    e.num_devices = 0;
    e.contexts.clear();
    e.streams.clear();
    e.live_streams.clear();
    e.default_streams.clear();
    e.graphs.clear();
    e.live_graphs.clear();
    e.next_stream_id = kFirstStreamId;
    e.next_graph_id = 1;
    e.next_node_id = 1;
    e.kernels.store(0);
    e.launch_calls.store(0);
    e.next_correlation.store(1);
    e.Configure();
  }
  ClearCounterPlan();
  const SimTracer* tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr) tracer->reset();
}

SIM_EXPORT int simNumDevices(void) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.initialized ? e.num_devices : 0;
}

SIM_EXPORT simStream_t simDefaultStream(int device) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  if (!e.initialized || device < 0 || device >= e.num_devices) return nullptr;
  return e.default_streams[static_cast<size_t>(device)];
}

SIM_EXPORT uint32_t simStreamId(simStream_t stream) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  simStream_st* s = FindStream(e, stream);
  return s != nullptr ? s->id : 0;
}

SIM_EXPORT int simStreamDevice(simStream_t stream) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  simStream_st* s = FindStream(e, stream);
  return s != nullptr ? s->device : -1;
}

SIM_EXPORT void simSetNestedIds(simNestedIds mode) {
  E().nested_ids.store(static_cast<int>(mode));
}

SIM_EXPORT simGraph_t simGraphCreate(void) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  auto g = std::make_unique<simGraph_st>();
  g->id = e.next_graph_id++;
  simGraph_st* raw = g.get();
  e.graphs.push_back(std::move(g));
  e.live_graphs.insert(raw);
  return raw;
}

SIM_EXPORT int simGraphAddKernel(simGraph_t graph, const char* name, uint64_t gpu_ns) {
  const char* interned = Intern(name);
  Engine& e = E();
  {
    std::lock_guard<std::mutex> lock(e.mu);
    if (e.live_graphs.count(graph) == 0) return SIM_ERR_INVALID;
    graph->nodes.push_back({interned, gpu_ns, e.next_node_id++});
  }
  // As CUPTI reports a node built (CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED), outside the lock.
  const SimTracer* tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr && tracer->graph_node != nullptr) {
    tracer->graph_node(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, reinterpret_cast<CUgraph>(graph));
  }
  return SIM_OK;
}

SIM_EXPORT uint32_t simGraphId(simGraph_t graph) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.live_graphs.count(graph) != 0 ? graph->id : 0;
}

SIM_EXPORT void simHostWork(uint64_t ns) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  e.clock.Advance(ns);
}

SIM_EXPORT uint64_t simNow(void) {
  return E().clock.Now();
}

SIM_EXPORT simClockMode simGetClockMode(void) {
  return E().clock.hybrid() ? SIM_CLOCK_HYBRID : SIM_CLOCK_VIRTUAL;
}

SIM_EXPORT void simSetLaunchCost(uint64_t ns) {
  E().launch_cost.store(ns);
}
SIM_EXPORT uint64_t simGetLaunchCost(void) {
  return E().launch_cost.load();
}
SIM_EXPORT void simSetLaunchLatency(uint64_t ns) {
  E().latency.store(ns);
}
SIM_EXPORT uint64_t simGetLaunchLatency(void) {
  return E().latency.load();
}
SIM_EXPORT uint64_t simKernelsLaunched(void) {
  return E().kernels.load();
}
SIM_EXPORT uint64_t simLaunchCalls(void) {
  return E().launch_calls.load();
}
SIM_EXPORT uint64_t simDeviceMemory(void) {
  return E().device_memory.load();
}

SIM_EXPORT int64_t simClockOffset(void) {
  return E().clock.planted_offset();
}

// A simulated host name (GPUACCT_SIM_HOSTNAME), so that rank processes of one machine look like
// several hosts to whatever asks (a profiler's report names its host).  Interposed like
// clock_gettime below; read on every call, so simReset is not needed to change it.
SIM_EXPORT int gethostname(char* name, size_t len) noexcept {
  const char* planted = std::getenv("GPUACCT_SIM_HOSTNAME");
  if (planted == nullptr || *planted == '\0') {
    using HostFn = int (*)(char*, size_t);
    static const HostFn real = reinterpret_cast<HostFn>(dlsym(RTLD_NEXT, "gethostname"));
    if (real == nullptr) {
      errno = ENOSYS;
      return -1;
    }
    return real(name, len);
  }
  const size_t n = std::strlen(planted);
  if (n + 1 > len) {  // as glibc: ENAMETOOLONG when it does not fit
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(name, planted, n + 1);
  return 0;
}

// The process's CLOCK_REALTIME is the sim clock (sim_cuda.h): host-side code that takes its
// timestamps with the ordinary clock (a profiler's host records, a program's own timing) lives on
// the same timeline as the simulated GPU and the fake CUPTI, as on a real machine.  Every other
// clock is the real one.  gettimeofday() and time() are not interposed.
SIM_EXPORT int clock_gettime(clockid_t clock, struct timespec* ts) noexcept {
  if (clock != CLOCK_REALTIME) return RealClockGettime(clock, ts);
  const uint64_t now = E().clock.Now();
  ts->tv_sec = static_cast<time_t>(now / 1000000000ull);
  ts->tv_nsec = static_cast<long>(now % 1000000000ull);
  return 0;
}

}  // extern "C"
