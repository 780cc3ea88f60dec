// The fake driver's traced sim runtime calls (sim_cuda.h): each runs as ENTER -> timeline under
// the engine lock -> EXIT with its GPU ops, reported to the tracer (kernel launches, nested
// launches, copies, memset, synchronization, streams and graph launches).
#include <cuda_runtime_api.h>
#include <cupti_activity.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_runtime_api_meta.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "sim_engine_state.h"

using namespace sim_engine;  // NOLINT(build/namespaces): this library's own internals

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
  rt.nests_driver = 1;
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

}  // namespace

extern "C" {

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

SIM_EXPORT uint64_t simNextOpStart(simStream_t stream) {
  Engine& e = E();
  std::lock_guard<std::mutex> lock(e.mu);
  simStream_st* s = e.initialized ? FindStream(e, stream) : nullptr;
  if (s == nullptr) return 0;
  return std::max(s->free_at, e.clock.Now() + e.latency.load(std::memory_order_relaxed));
}

SIM_EXPORT int simLaunchKernelUntil(simStream_t stream, const char* name, uint64_t end_ns,
                                    uint64_t* start_ns) {
  if (stream == nullptr) return SIM_ERR_INVALID;
  const char* interned = Intern(name);
  cudaLaunchKernel_v7000_params rt{};
  rt.func = interned;
  rt.gridDim = dim3(1, 1, 1);
  rt.blockDim = dim3(1, 1, 1);
  rt.stream = reinterpret_cast<cudaStream_t>(stream);
  uint64_t started = 0;
  const int rc = RunApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                        stream, -1, interned, &rt,
                        [&](Engine& e, SimApiCall& call, std::vector<SimGpuOp>& ops) {
                          simStream_st* s = FindStream(e, stream);
                          if (s == nullptr) return static_cast<int>(SIM_ERR_INVALID);
                          SimGpuOp op = BaseOp(e, call, *s, SIM_OP_KERNEL);
                          op.name = interned;
                          const uint64_t start = std::max(
                              s->free_at, call.start + e.latency.load(std::memory_order_relaxed));
                          Schedule(e, call, *s, end_ns > start ? end_ns - start : 0, op);
                          started = op.start;
                          ops.push_back(op);
                          e.kernels.fetch_add(1, std::memory_order_relaxed);
                          e.launch_calls.fetch_add(1, std::memory_order_relaxed);
                          e.clock.Advance(e.launch_cost.load(std::memory_order_relaxed));
                          return static_cast<int>(SIM_OK);
                        });
  if (rc == SIM_OK && start_ns != nullptr) *start_ns = started;
  return rc;
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

}  // extern "C"
