// Simulation engine of the fake CUDA driver (libcuda.so.1).
//
// Holds the virtual GPU (devices, primary contexts, streams, graphs), the shared nanosecond
// clock, cuInit's injection loading and the sim runtime API of sim_cuda.h.  It knows nothing
// about CUPTI buffers: every API call is reported to an optional SimTracer (the fake CUPTI
// registers one when it is loaded) as ENTER -> (timeline computed under the engine lock) -> EXIT
// with the GPU ops it produced.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <generated_cuda_runtime_api_meta.h>
#include <pthread.h>
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
#include <thread>
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

namespace {

// Same layout as cuLaunchKernel_params in generated_cuda_meta.h, which cannot be included here:
// it needs the internal pre-v2 typedefs (CUdeviceptr_v1) that cuda.h only declares for the
// driver's own build.
struct CuLaunchKernelParams {
  CUfunction f;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  void** kernelParams;
  void** extra;
};

constexpr uint32_t kDefaultStreamId = 7;  // what real CUPTI reports for the legacy NULL stream
constexpr uint32_t kFirstStreamId = 13;

struct SimContext {
  int device = 0;
  uint32_t id = 0;
};

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  if (end == v) return fallback;
  return static_cast<uint64_t>(x);
}

// The C library's clock_gettime (this library interposes the symbol, see the end of the file).
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

// One clock for the host and the GPU (and cuptiGetTimestamp).  now = base + offset, where base
// is CLOCK_REALTIME frozen at configure() (virtual) or read live (hybrid), and offset collects
// every virtual advance.  Readers need no lock; writers hold the engine mutex, so advance_to is
// race-free against other writers.
class SimClock {
 public:
  void Configure() {
    const char* m = std::getenv("GPUACCT_SIM_CLOCK");
    hybrid_.store(m != nullptr && std::strcmp(m, "hybrid") == 0, std::memory_order_relaxed);
    base_.store(RealtimeNs(), std::memory_order_relaxed);
    offset_.store(0, std::memory_order_release);
  }
  uint64_t Now() const {
    uint64_t base = hybrid_.load(std::memory_order_relaxed) ? RealtimeNs()
                                                            : base_.load(std::memory_order_relaxed);
    return base + offset_.load(std::memory_order_acquire);
  }
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
  void Configure() {
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
};

// Never destroyed: CUPTI clients call cuptiGetTimestamp (-> this clock) from atexit handlers and
// static destructors whose order relative to ours is unknowable.
Engine& E() {
  static Engine* engine = new Engine();
  return *engine;
}

// Kernel names must stay valid for the life of the process (CUPTI clients keep the pointer).
const char* Intern(const char* name) {
  static std::mutex* mu = new std::mutex();
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(*mu);
  return names->emplace(name != nullptr ? name : "").first->c_str();
}

simStream_st* FindStream(Engine& e, simStream_t s) {
  return e.live_streams.count(s) != 0 ? s : nullptr;
}

// ---- cuInit and the injection library -------------------------------------------------------

std::mutex g_init_mu;
std::atomic<int> g_init_state{0};  // 0 = not yet, 1 = in progress, 2 = done
std::thread::id g_init_thread;

void LoadInjection() {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path == nullptr || *path == '\0' || std::strcmp(path, "none") == 0) return;
  // Like the real driver: local symbol scope, so the client's symbols stay private.
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "[sim libcuda] cannot load CUDA_INJECTION64_PATH=%s: %s\n", path,
                 dlerror());
    return;
  }
  using InitFn = int (*)(void);
  auto fn = reinterpret_cast<InitFn>(dlsym(handle, "InitializeInjection"));
  if (fn == nullptr) {
    std::fprintf(stderr, "[sim libcuda] %s has no InitializeInjection\n", path);
    return;
  }
  if (fn() == 0) std::fprintf(stderr, "[sim libcuda] InitializeInjection in %s returned 0\n", path);
}

// ---- API plumbing -----------------------------------------------------------------------------

CUcontext CtxHandle(SimContext* c) {
  return reinterpret_cast<CUcontext>(c);
}
CUstream StreamHandle(simStream_st* s) {
  return reinterpret_cast<CUstream>(s);
}

// Runs one traced API call: correlation id, ENTER callback, the timeline `body` under the engine
// lock (which sets host/GPU times and appends GPU ops), EXIT callback + records.
// `body(Engine&, SimApiCall&, std::vector<SimGpuOp>&) -> int` returns a SIM_* code.
// Fills a call's identity and context (of the stream's device, or of `device`).  SIM_OK or the
// error the call fails with before it starts.
int BindCall(Engine& e, SimApiCall& call, CUpti_CallbackDomain domain, uint32_t cbid,
             simStream_t stream, int device, const char* symbol, const void* params,
             int* api_result) {
  call.domain = domain;
  call.cbid = cbid;
  call.symbol_name = symbol;
  call.params = params;
  *api_result = 0;  // cudaSuccess / CUDA_SUCCESS
  call.return_value = api_result;
  std::lock_guard<std::mutex> lock(e.mu);
  if (!e.initialized) return SIM_ERR_NOT_INITIALIZED;
  if (stream != nullptr) {
    simStream_st* s = FindStream(e, stream);
    if (s == nullptr) return SIM_ERR_INVALID;
    device = s->device;
  }
  if (device < 0 || device >= e.num_devices) return SIM_ERR_INVALID;
  SimContext* ctx = e.contexts[static_cast<size_t>(device)].get();
  call.context = CtxHandle(ctx);
  call.context_id = ctx->id;
  return SIM_OK;
}

template <typename Body>
int RunApi(CUpti_CallbackDomain domain, uint32_t cbid, simStream_t stream, int device,
           const char* symbol, const void* params, Body&& body) {
  Engine& e = E();
  SimApiCall call{};
  int api_result = 0;
  const int bound = BindCall(e, call, domain, cbid, stream, device, symbol, params, &api_result);
  if (bound != SIM_OK) return bound;
  call.correlation_id = e.next_correlation.fetch_add(1, std::memory_order_relaxed);
  const SimTracer* tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr) tracer->api_enter(&call);

  std::vector<SimGpuOp> ops;
  int rc;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    call.start = e.clock.Now();
    if (!e.initialized) {
      rc = SIM_ERR_NOT_INITIALIZED;
    } else {
      rc = body(e, call, ops);
    }
    call.end = e.clock.Now();
  }
  if (rc != SIM_OK) api_result = 1;  // cudaErrorInvalidValue / CUDA_ERROR_INVALID_VALUE
  tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr) tracer->api_exit(&call, ops.data(), ops.size());
  return rc;
}

SimGpuOp BaseOp(const Engine& e, const SimApiCall& call, const simStream_st& s, SimOpKind kind) {
  SimGpuOp op{};
  op.kind = kind;
  op.device = static_cast<uint32_t>(s.device);
  op.context_id = e.contexts[static_cast<size_t>(s.device)]->id;
  op.stream_id = s.id;
  op.correlation_id = call.correlation_id;
  op.queued = call.start;
  return op;
}

// Places an op of `ns` on the stream: starts at max(stream free, API start + latency).
void Schedule(Engine& e, const SimApiCall& call, simStream_st& s, uint64_t ns, SimGpuOp& op) {
  uint64_t start = std::max(s.free_at, call.start + e.latency.load(std::memory_order_relaxed));
  op.start = start;
  op.end = start + ns;
  s.free_at = op.end;
}

int LaunchImpl(CUpti_CallbackDomain domain, simStream_t stream, const char* name, uint64_t ns) {
  const char* interned = Intern(name);
  cudaLaunchKernel_v7000_params rt{};
  CuLaunchKernelParams drv{};
  const void* params = nullptr;
  uint32_t cbid;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    rt.func = interned;
    rt.gridDim = dim3(1, 1, 1);
    rt.blockDim = dim3(1, 1, 1);
    rt.stream = reinterpret_cast<cudaStream_t>(stream);
    params = &rt;
    cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  } else {
    drv.gridDimX = drv.gridDimY = drv.gridDimZ = 1;
    drv.blockDimX = drv.blockDimY = drv.blockDimZ = 1;
    drv.hStream = StreamHandle(stream);
    params = &drv;
    cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  }
  return RunApi(domain, cbid, stream, -1, interned, params,
                [&](Engine& e, SimApiCall& call, std::vector<SimGpuOp>& ops) {
                  simStream_st* s = FindStream(e, stream);
                  if (s == nullptr) return static_cast<int>(SIM_ERR_INVALID);
                  SimGpuOp op = BaseOp(e, call, *s, SIM_OP_KERNEL);
                  op.name = interned;
                  Schedule(e, call, *s, ns, op);
                  ops.push_back(op);
                  e.kernels.fetch_add(1, std::memory_order_relaxed);
                  e.launch_calls.fetch_add(1, std::memory_order_relaxed);
                  e.clock.Advance(e.launch_cost.load(std::memory_order_relaxed));
                  return static_cast<int>(SIM_OK);
                });
}

// cudaLaunchKernel making its cuLaunchKernel (sim_cuda.h): two calls, one nested in the other,
// each with its ENTER / EXIT callbacks and API record, the kernel submitted by the inner one.
int LaunchNestedImpl(simStream_t stream, const char* name, uint64_t ns, uint64_t pre,
                     uint64_t tail) {
  Engine& e = E();
  const char* interned = Intern(name);
  cudaLaunchKernel_v7000_params rt_params{};
  rt_params.func = interned;
  rt_params.gridDim = dim3(1, 1, 1);
  rt_params.blockDim = dim3(1, 1, 1);
  rt_params.stream = reinterpret_cast<cudaStream_t>(stream);
  CuLaunchKernelParams drv_params{};
  drv_params.gridDimX = drv_params.gridDimY = drv_params.gridDimZ = 1;
  drv_params.blockDimX = drv_params.blockDimY = drv_params.blockDimZ = 1;
  drv_params.hStream = StreamHandle(stream);
  SimApiCall rt{};
  SimApiCall drv{};
  int rt_result = 0;
  int drv_result = 0;
  int rc =
      BindCall(e, rt, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
               stream, -1, interned, &rt_params, &rt_result);
  if (rc == SIM_OK) {
    rc = BindCall(e, drv, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
                  stream, -1, interned, &drv_params, &drv_result);
  }
  if (rc != SIM_OK) return rc;
  const int ids = e.nested_ids.load(std::memory_order_relaxed);
  rt.correlation_id = e.next_correlation.fetch_add(1, std::memory_order_relaxed);
  drv.correlation_id = ids == SIM_NESTED_SHARED_ID
                           ? rt.correlation_id
                           : e.next_correlation.fetch_add(1, std::memory_order_relaxed);
  const bool op_on_runtime = ids == SIM_NESTED_OP_CARRIES_RUNTIME_ID;

  const SimTracer* tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr) tracer->api_enter(&rt);
  {
    std::lock_guard<std::mutex> lock(e.mu);
    rt.start = e.clock.Now();
    e.clock.Advance(pre);
  }
  tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr) tracer->api_enter(&drv);
  std::vector<SimGpuOp> ops;
  {
    std::lock_guard<std::mutex> lock(e.mu);
    drv.start = e.clock.Now();
    simStream_st* s = e.initialized ? FindStream(e, stream) : nullptr;
    if (s == nullptr) {
      rc = SIM_ERR_INVALID;
    } else {
      SimGpuOp op = BaseOp(e, drv, *s, SIM_OP_KERNEL);  // submitted by the driver call
      op.correlation_id = op_on_runtime ? rt.correlation_id : drv.correlation_id;
      op.name = interned;
      Schedule(e, drv, *s, ns, op);
      ops.push_back(op);
      e.kernels.fetch_add(1, std::memory_order_relaxed);
      e.launch_calls.fetch_add(1, std::memory_order_relaxed);
      e.clock.Advance(e.launch_cost.load(std::memory_order_relaxed));
    }
    drv.end = e.clock.Now();
  }
  if (rc != SIM_OK) drv_result = rt_result = 1;
  tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr)
    tracer->api_exit(&drv, op_on_runtime ? nullptr : ops.data(), op_on_runtime ? 0 : ops.size());
  {
    std::lock_guard<std::mutex> lock(e.mu);
    e.clock.Advance(tail);
    rt.end = e.clock.Now();
  }
  tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr)
    tracer->api_exit(&rt, op_on_runtime ? ops.data() : nullptr, op_on_runtime ? ops.size() : 0);
  return rc;
}

int CopyImpl(simStream_t stream, simMemcpyKind kind, uint64_t bytes, uint64_t ns, int pageable,
             bool async_api) {
  if (kind < SIM_MEMCPY_H2D || kind > SIM_MEMCPY_P2P) return SIM_ERR_INVALID;
  // Params for the callback (addresses are fake but stable and non-null).
  static char fake_host, fake_dev;
  cudaMemcpyAsync_v3020_params p_async{};
  cudaMemcpy_v3020_params p_sync{};
  cudaMemcpyPeerAsync_v4000_params p_peer{};
  const cudaMemcpyKind ck = kind == SIM_MEMCPY_H2D   ? cudaMemcpyHostToDevice
                            : kind == SIM_MEMCPY_D2H ? cudaMemcpyDeviceToHost
                                                     : cudaMemcpyDeviceToDevice;
  void* dst = kind == SIM_MEMCPY_D2H ? &fake_host : &fake_dev;
  const void* src = kind == SIM_MEMCPY_H2D ? &fake_host : &fake_dev;
  const void* params;
  uint32_t cbid;
  if (kind == SIM_MEMCPY_P2P) {
    p_peer = {dst, 0, src, 0, bytes, reinterpret_cast<cudaStream_t>(stream)};
    params = &p_peer;
    cbid = async_api ? CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000
                     : CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000;
  } else if (async_api) {
    p_async = {dst, src, bytes, ck, reinterpret_cast<cudaStream_t>(stream)};
    params = &p_async;
    cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
  } else {
    p_sync = {dst, src, bytes, ck};
    params = &p_sync;
    cbid = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020;
  }
  return RunApi(
      CUPTI_CB_DOMAIN_RUNTIME_API, cbid, stream, -1, nullptr, params,
      [&](Engine& e, SimApiCall& call, std::vector<SimGpuOp>& ops) {
        simStream_st* s = FindStream(e, stream);
        if (s == nullptr) return static_cast<int>(SIM_ERR_INVALID);
        SimGpuOp op = BaseOp(e, call, *s, SIM_OP_MEMCPY);
        op.bytes = bytes;
        op.async = async_api ? 1 : 0;
        const uint8_t host_kind =
            pageable ? CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE : CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
        op.src_device = op.dst_device = op.device;
        op.src_context_id = op.dst_context_id = op.context_id;
        switch (kind) {
          case SIM_MEMCPY_H2D:
            op.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
            op.src_kind = host_kind;
            op.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
            break;
          case SIM_MEMCPY_D2H:
            op.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
            op.src_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
            op.dst_kind = host_kind;
            break;
          case SIM_MEMCPY_D2D:
            op.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
            op.src_kind = op.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
            break;
          case SIM_MEMCPY_P2P: {
            op.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
            op.src_kind = op.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
            const int peer = (s->device + 1) % e.num_devices;
            op.dst_device = static_cast<uint32_t>(peer);
            op.dst_context_id = e.contexts[static_cast<size_t>(peer)]->id;
            break;
          }
        }
        Schedule(e, call, *s, ns, op);
        ops.push_back(op);
        // Synchronous for the host: cudaMemcpy always; pageable host memory for H2D/D2H, since
        // the driver stages through a pinned buffer and returns only when it is done.
        const bool host_blocks =
            !async_api || (pageable && (kind == SIM_MEMCPY_H2D || kind == SIM_MEMCPY_D2H));
        const uint64_t api_done = call.start + e.launch_cost.load(std::memory_order_relaxed);
        e.clock.AdvanceTo(host_blocks ? std::max(api_done, op.end) : api_done);
        return static_cast<int>(SIM_OK);
      });
}

int SyncStreamImpl(simStream_t stream) {
  cudaStreamSynchronize_v3020_params p{reinterpret_cast<cudaStream_t>(stream)};
  return RunApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                stream, -1, nullptr, &p, [&](Engine& e, SimApiCall& call, std::vector<SimGpuOp>&) {
                  simStream_st* s = FindStream(e, stream);
                  if (s == nullptr) return static_cast<int>(SIM_ERR_INVALID);
                  call.sync_type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
                  call.sync_stream_id = s->id;
                  call.sync_stream = StreamHandle(s);
                  e.clock.AdvanceTo(s->free_at);
                  return static_cast<int>(SIM_OK);
                });
}

int SyncDeviceImpl(int device) {
  return RunApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
                nullptr, device, nullptr, nullptr,
                [&](Engine& e, SimApiCall& call, std::vector<SimGpuOp>&) {
                  uint64_t done = 0;
                  for (const auto& s : e.streams) {
                    if (s->device == device) done = std::max(done, s->free_at);
                  }
                  call.sync_type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
                  call.sync_stream_id = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
                  e.clock.AdvanceTo(done);
                  return static_cast<int>(SIM_OK);
                });
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

}  // namespace

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

// ---- exported: the few real driver entry points a client may call -----------------------------

SIM_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (g_init_state.load(std::memory_order_acquire) == 2) return CUDA_SUCCESS;
  // InitializeInjection may itself call cuInit (or any driver API): that nested call must
  // return at once instead of deadlocking on g_init_mu.
  if (g_init_state.load(std::memory_order_acquire) == 1 &&
      g_init_thread == std::this_thread::get_id()) {
    return CUDA_SUCCESS;
  }
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_init_state.load(std::memory_order_acquire) == 0) {
    g_init_thread = std::this_thread::get_id();
    g_init_state.store(1, std::memory_order_release);
    (void)E();  // configure the clock before the client's first cuptiGetTimestamp
    LoadInjection();
    g_init_state.store(2, std::memory_order_release);
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (g_init_state.load() != 2) return CUDA_ERROR_NOT_INITIALIZED;
  *count = simNumDevices();
  return CUDA_SUCCESS;
}

// Device queries need cuInit, not a live context: like the real driver they keep working
// after the contexts are destroyed (simShutdown), e.g. from a profiler's exit handler.
static int DevicesKnown() {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.num_devices;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= DevicesKnown()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= DevicesKnown()) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "gpuacct simulated GPU %d", dev);
  return CUDA_SUCCESS;
}

// An H100-like device: 132 SMs, compute capability 9.0; other attributes are not simulated.
SIM_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice dev) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= DevicesKnown()) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 132;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

SIM_EXPORT CUresult cuDeviceTotalMem(size_t* bytes, CUdevice dev) {  // cuDeviceTotalMem_v2
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= DevicesKnown()) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = static_cast<size_t>(E().device_memory.load());
  return CUDA_SUCCESS;
}

// The sim has no per-thread current context: every thread sees device 0's primary context.
SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  *ctx = e.contexts.empty() ? nullptr : CtxHandle(e.contexts[0].get());
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *str = error == CUDA_SUCCESS ? "no error" : "simulated CUDA error";
  return CUDA_SUCCESS;
}

// ---- exported: sim runtime API (sim_cuda.h) ----------------------------------------------------

SIM_EXPORT int simInit(int num_devices) {
  if (num_devices <= 0 || num_devices > 64) return SIM_ERR_INVALID;
  cuInit(0);
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
  const SimTracer* tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr) tracer->reset();
}

SIM_EXPORT int simNumDevices(void) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.initialized ? e.num_devices : 0;
}

SIM_EXPORT simStream_t simStreamCreate(int device) {
  Engine& e = E();
  simStream_st* created = nullptr;
  int rc = RunApi(CUPTI_CB_DOMAIN_RUNTIME_API,
                  CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithFlags_v5000, nullptr, device,
                  nullptr, nullptr, [&](Engine& eng, SimApiCall&, std::vector<SimGpuOp>&) {
                    created = NewStreamLocked(eng, device, eng.next_stream_id++);
                    return static_cast<int>(SIM_OK);
                  });
  if (rc != SIM_OK || created == nullptr) return nullptr;
  const SimTracer* tracer = e.tracer.load(std::memory_order_acquire);
  if (tracer != nullptr) {
    CUcontext ctx;
    {
      std::lock_guard<std::mutex> lock(e.mu);
      if (device < 0 || static_cast<size_t>(device) >= e.contexts.size()) return created;
      ctx = CtxHandle(e.contexts[static_cast<size_t>(device)].get());
    }
    tracer->resource(CUPTI_CBID_RESOURCE_STREAM_CREATED, ctx, StreamHandle(created));
  }
  return created;
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

SIM_EXPORT int simLaunchKernel(simStream_t stream, const char* name, uint64_t gpu_ns) {
  if (stream == nullptr) return SIM_ERR_INVALID;
  return LaunchImpl(CUPTI_CB_DOMAIN_RUNTIME_API, stream, name, gpu_ns);
}

SIM_EXPORT int simCuLaunchKernel(simStream_t stream, const char* name, uint64_t gpu_ns) {
  if (stream == nullptr) return SIM_ERR_INVALID;
  return LaunchImpl(CUPTI_CB_DOMAIN_DRIVER_API, stream, name, gpu_ns);
}

SIM_EXPORT int simLaunchKernelNested(simStream_t stream, const char* name, uint64_t gpu_ns,
                                     uint64_t pre_ns, uint64_t tail_ns) {
  if (stream == nullptr) return SIM_ERR_INVALID;
  return LaunchNestedImpl(stream, name, gpu_ns, pre_ns, tail_ns);
}

SIM_EXPORT void simSetNestedIds(simNestedIds mode) {
  E().nested_ids.store(static_cast<int>(mode));
}

SIM_EXPORT int simNcclAllReduce(simStream_t stream, uint64_t gpu_ns) {
  return simLaunchKernel(stream, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", gpu_ns);
}

SIM_EXPORT int simMemcpyAsync(simStream_t stream, simMemcpyKind kind, uint64_t bytes,
                              uint64_t gpu_ns, int pageable) {
  if (stream == nullptr) return SIM_ERR_INVALID;
  return CopyImpl(stream, kind, bytes, gpu_ns, pageable, true);
}

SIM_EXPORT int simMemcpy(simStream_t stream, simMemcpyKind kind, uint64_t bytes, uint64_t gpu_ns) {
  if (stream == nullptr) return SIM_ERR_INVALID;
  return CopyImpl(stream, kind, bytes, gpu_ns, 1, false);
}

SIM_EXPORT int simMemsetAsync(simStream_t stream, uint64_t bytes, uint64_t gpu_ns) {
  if (stream == nullptr) return SIM_ERR_INVALID;
  static char fake_dev;
  cudaMemsetAsync_v3020_params p{&fake_dev, 0, bytes, reinterpret_cast<cudaStream_t>(stream)};
  return RunApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, stream,
                -1, nullptr, &p, [&](Engine& e, SimApiCall& call, std::vector<SimGpuOp>& ops) {
                  simStream_st* s = FindStream(e, stream);
                  if (s == nullptr) return static_cast<int>(SIM_ERR_INVALID);
                  SimGpuOp op = BaseOp(e, call, *s, SIM_OP_MEMSET);
                  op.bytes = bytes;
                  op.async = 1;
                  op.dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
                  Schedule(e, call, *s, gpu_ns, op);
                  ops.push_back(op);
                  e.clock.Advance(e.launch_cost.load(std::memory_order_relaxed));
                  return static_cast<int>(SIM_OK);
                });
}

SIM_EXPORT int simStreamSynchronize(simStream_t stream) {
  if (stream == nullptr) return SIM_ERR_INVALID;
  return SyncStreamImpl(stream);
}

SIM_EXPORT int simDeviceSynchronize(int device) {
  if (device >= 0) return SyncDeviceImpl(device);
  const int n = simNumDevices();
  if (n == 0) return SIM_ERR_NOT_INITIALIZED;
  for (int d = 0; d < n; ++d) {
    int rc = SyncDeviceImpl(d);
    if (rc != SIM_OK) return rc;
  }
  return SIM_OK;
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
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.live_graphs.count(graph) == 0) return SIM_ERR_INVALID;
  graph->nodes.push_back({interned, gpu_ns, e.next_node_id++});
  return SIM_OK;
}

SIM_EXPORT uint32_t simGraphId(simGraph_t graph) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.live_graphs.count(graph) != 0 ? graph->id : 0;
}

SIM_EXPORT int simGraphLaunch(simStream_t stream, simGraph_t graph) {
  if (stream == nullptr || graph == nullptr) return SIM_ERR_INVALID;
  cudaGraphLaunch_v10000_params p{reinterpret_cast<cudaGraphExec_t>(graph),
                                  reinterpret_cast<cudaStream_t>(stream)};
  return RunApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                stream, -1, nullptr, &p,
                [&](Engine& e, SimApiCall& call, std::vector<SimGpuOp>& ops) {
                  simStream_st* s = FindStream(e, stream);
                  if (s == nullptr || e.live_graphs.count(graph) == 0) {
                    return static_cast<int>(SIM_ERR_INVALID);
                  }
                  ops.reserve(graph->nodes.size());
                  for (const auto& n : graph->nodes) {
                    // Real CUPTI: graph kernels carry the cudaGraphLaunch correlation id.
                    SimGpuOp op = BaseOp(e, call, *s, SIM_OP_KERNEL);
                    op.name = n.name;
                    op.graph_id = graph->id;
                    op.graph_node_id = n.node_id;
                    Schedule(e, call, *s, n.ns, op);
                    ops.push_back(op);
                  }
                  e.kernels.fetch_add(graph->nodes.size(), std::memory_order_relaxed);
                  e.launch_calls.fetch_add(1, std::memory_order_relaxed);
                  e.clock.Advance(e.launch_cost.load(std::memory_order_relaxed));
                  return static_cast<int>(SIM_OK);
                });
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
