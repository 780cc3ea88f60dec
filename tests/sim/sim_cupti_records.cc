// The fake CUPTI's engine hooks: each API call's ENTER / EXIT callbacks, its records (external
// correlation, API, synchronization) and its GPU ops' records, filled field by field on CUPTI's
// clock and queued as pending; the resource callbacks and simReset.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sim_cupti_state.h"

namespace sim_cupti {

namespace {

// The CUPTI work of the launch call this thread is in (State::Counts): the callbacks delivered
// and the records made for it, a driver launch nested in a runtime one included.
struct LaunchWork {
  int depth = 0;
  uint64_t callbacks = 0;
  uint64_t records = 0;
};
thread_local LaunchWork t_work;

void RaiseMax(std::atomic<uint64_t>& m, uint64_t v) {
  uint64_t cur = m.load(std::memory_order_relaxed);
  while (v > cur && !m.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

bool IsLaunch(CUpti_CallbackDomain domain, uint32_t cbid) {
  if (cbid >= kMaxCbid || domain < 1 || domain >= CUPTI_CB_DOMAIN_SIZE) return false;
  const char* name = Names().plain[domain][cbid];
  return name != nullptr && std::strstr(name, "Launch") != nullptr;
}

// Adds one record (drop faults, delay draw).  Caller holds s.mu.
void PushLocked(State& s, const AnyRecord& rec, uint64_t complete_at, uint64_t lane, uint64_t owner,
                bool may_delay) {
  ++s.produced;
  if (rec.base.kind < CUPTI_ACTIVITY_KIND_COUNT) {
    s.counts.records[rec.base.kind].fetch_add(1, std::memory_order_relaxed);
  }
  if (t_work.depth > 0) ++t_work.records;
  if (s.produced <= s.faults.drop_first ||
      (s.faults.drop_every != 0 && s.produced % s.faults.drop_every == 0) ||
      (s.request == nullptr && s.pending.size() >= kMaxPendingWithoutBuffers)) {
    ++s.dropped;
    return;
  }
  Pending p;
  p.complete_at = complete_at;
  p.lane = lane;
  p.owner = owner;
  p.delay = 0;
  if (may_delay && s.delay_pct != 0 && SplitMix(s.rng) % 100 < s.delay_pct) {
    p.delay = static_cast<uint8_t>(1 + SplitMix(s.rng) % 2);
  }
  p.held_index = 0;
  p.rec = rec;
  s.pending.push_back(p);
  if (s.hold_buffer_records != 0) ++s.owner_pending[owner];
}

bool KindOn(State& s, CUpti_ActivityKind k) {
  return s.kind_enabled[k].load(std::memory_order_relaxed) != 0;
}

// One API callback of `call`, or of the driver call inside it (`inner`: the driver domain's
// launch callback a runtime launch fires inside its own; GPUACCT_SIM_INNER_DRIVER).
void InvokeApiCallback(SimApiCall* call, CUpti_ApiCallbackSite site, bool inner = false) {
  State& s = S();
  const CUpti_CallbackDomain domain = inner ? CUPTI_CB_DOMAIN_DRIVER_API : call->domain;
  const uint32_t cbid = !inner ? call->cbid
                        : call->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000
                            ? static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch)
                            : static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  if (cbid >= kMaxCbid || domain < 1 || domain >= CUPTI_CB_DOMAIN_SIZE) return;
  CUpti_CallbackFunc cb = s.callback.load(std::memory_order_acquire);
  if (cb == nullptr || !s.cb_enabled[domain][cbid].load(std::memory_order_relaxed)) {
    return;
  }
  s.counts.callbacks[domain].fetch_add(1, std::memory_order_relaxed);
  if (t_work.depth > 0) ++t_work.callbacks;
  const NameTables& names = Names();
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.functionName = names.plain[domain][cbid];
  data.functionParams = inner ? nullptr : call->params;
  data.functionReturnValue = call->return_value;
  data.symbolName = call->symbol_name;
  data.context = call->context;
  data.contextUid = call->context_id;
  data.correlationData = inner ? &call->inner_correlation_data : &call->correlation_data;
  // The inner call's id: the runtime call's (whether real CUPTI gives it one of its own is not
  // documented; nothing the library accounts reads it).
  data.correlationId = call->correlation_id;
  cb(s.userdata.load(std::memory_order_acquire), domain, cbid, &data);
}

// A runtime launch that makes no driver call of the engine's own: real CUDA makes one, and
// CUPTI fires its driver callbacks (the H200's nested = runtime).
bool HasInnerDriverCall(const SimApiCall* call) {
  return S().inner_driver_callbacks && call->domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
         call->nests_driver == 0 && IsLaunch(call->domain, call->cbid);
}

void HookApiEnter(SimApiCall* call) {
  if (IsLaunch(call->domain, call->cbid) && t_work.depth++ == 0) {
    t_work.callbacks = 0;
    t_work.records = 0;
  }
  InvokeApiCallback(call, CUPTI_API_ENTER);
  if (HasInnerDriverCall(call)) InvokeApiCallback(call, CUPTI_API_ENTER, true);
}

// The launch call of this thread ends: its work counted (State::Counts).
void EndLaunch(State& s, const SimApiCall* call) {
  if (!IsLaunch(call->domain, call->cbid) || t_work.depth == 0 || --t_work.depth != 0) return;
  State::Counts& c = s.counts;
  c.launches.fetch_add(1, std::memory_order_relaxed);
  c.launch_callbacks.fetch_add(t_work.callbacks, std::memory_order_relaxed);
  c.launch_records.fetch_add(t_work.records, std::memory_order_relaxed);
  if (t_work.callbacks + t_work.records > 0) {
    c.launches_with_work.fetch_add(1, std::memory_order_relaxed);
  }
  RaiseMax(c.max_launch_callbacks, t_work.callbacks);
  RaiseMax(c.max_launch_records, t_work.records);
}

// The fields CUPTI's memcpy and peer-to-peer memcpy records share.
template <typename CopyRecord>
void FillCopyCommon(CopyRecord& m, const SimGpuOp& op, int64_t clock_shift) {
  m.copyKind = op.copy_kind;
  m.srcKind = op.src_kind;
  m.dstKind = op.dst_kind;
  m.flags = op.async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
  m.bytes = op.bytes;
  m.start = static_cast<uint64_t>(static_cast<int64_t>(op.start) + clock_shift);
  m.end = static_cast<uint64_t>(static_cast<int64_t>(op.end) + clock_shift);
  m.deviceId = op.device;
  m.contextId = op.context_id;
  m.streamId = op.stream_id;
}

// A record timestamp on CUPTI's clock.
uint64_t OnCuptiClock(uint64_t sim_time, int64_t shift) {
  return static_cast<uint64_t>(static_cast<int64_t>(sim_time) + shift);
}

// SYNCHRONIZE domain: the sync finished, before the API returns.
void NotifySynchronized(State& s, const SimApiCall* call) {
  if (call->sync_type == 0) return;
  const uint32_t scb = call->sync_type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE
                           ? CUPTI_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED
                           : CUPTI_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED;
  CUpti_CallbackFunc cb = s.callback.load(std::memory_order_acquire);
  if (cb != nullptr && s.cb_enabled[CUPTI_CB_DOMAIN_SYNCHRONIZE][scb].load()) {
    CUpti_SynchronizeData sd{call->context, call->sync_stream};
    cb(s.userdata.load(std::memory_order_acquire), CUPTI_CB_DOMAIN_SYNCHRONIZE, scb, &sd);
  }
}

// The call's own records (external correlation, API, synchronization).  s.mu held.
void PushApiRecordsLocked(State& s, const SimApiCall* call, uint32_t tid, uint64_t host_lane,
                          int64_t shift) {
  auto at = [shift](uint64_t sim_time) { return OnCuptiClock(sim_time, shift); };
  const bool runtime = call->domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const CUpti_ActivityKind api_kind =
      runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
  const bool api_on = call->cbid < kMaxCbid &&
                      (runtime ? s.runtime_api[call->cbid] : s.driver_api[call->cbid]).load() != 0;
  if (api_on) {
    if (KindOn(s, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
      // Real CUPTI: the API record is preceded by one record per kind with an open region.
      for (int k = 1; k < CUPTI_EXTERNAL_CORRELATION_KIND_SIZE; ++k) {
        if (t_external[k].empty()) continue;
        AnyRecord r{};
        r.ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
        r.ext.externalKind = static_cast<CUpti_ExternalCorrelationKind>(k);
        r.ext.externalId = t_external[k].back();
        r.ext.correlationId = call->correlation_id;
        PushLocked(s, r, call->end, host_lane, host_lane, false);
      }
    }
    AnyRecord r{};
    r.api.kind = api_kind;
    r.api.cbid = call->cbid;
    r.api.start = at(call->start);
    r.api.end = at(call->end);
    r.api.processId = static_cast<uint32_t>(getpid());
    r.api.threadId = tid;
    r.api.correlationId = call->correlation_id;
    r.api.returnValue = static_cast<uint32_t>(*static_cast<int*>(call->return_value));
    PushLocked(s, r, call->end, host_lane, host_lane, true);
  }
  if (call->sync_type != 0 && KindOn(s, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) {
    AnyRecord r{};
    r.sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.sync.type = static_cast<CUpti_ActivitySynchronizationType>(call->sync_type);
    r.sync.start = at(call->start);
    r.sync.end = at(call->end);
    r.sync.correlationId = call->correlation_id;
    r.sync.contextId = call->context_id;
    r.sync.streamId = call->sync_stream_id;
    r.sync.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    r.sync.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    PushLocked(s, r, call->end, host_lane, host_lane, true);
  }
}

// The activity record of one GPU op, as the enabled kinds ask; false when none is enabled.
bool FillOpRecord(State& s, const SimGpuOp& op, bool runtime, int64_t shift, AnyRecord* r) {
  auto at = [shift](uint64_t sim_time) { return OnCuptiClock(sim_time, shift); };
  const bool conc = KindOn(s, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  const bool serial = KindOn(s, CUPTI_ACTIVITY_KIND_KERNEL);
  const bool latency = s.latency_timestamps.load();
  if (op.kind == SIM_OP_KERNEL) {
    if (!conc && !serial) return false;
    CUpti_ActivityKernel10& k = r->kernel;
    k.kind = conc ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
    k.start = at(op.start);
    k.end = at(op.end);
    k.completed = at(op.end);
    k.deviceId = op.device;
    k.contextId = op.context_id;
    k.streamId = op.stream_id;
    k.gridX = k.gridY = k.gridZ = 1;
    k.blockX = k.blockY = k.blockZ = 1;
    k.registersPerThread = 32;
    k.correlationId = op.correlation_id;
    k.gridId = static_cast<int64_t>(op.correlation_id);
    k.name = op.name;
    if (latency) {
      k.queued = at(op.queued);
      k.submitted = at(op.queued);
    }
    k.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
    k.graphNodeId = op.graph_node_id;
    k.graphId = op.graph_id;
    k.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
    k.shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_DEFAULT;
  } else if (op.kind == SIM_OP_MEMCPY) {
    const bool p2p = op.copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    if (p2p && KindOn(s, CUPTI_ACTIVITY_KIND_MEMCPY2)) {
      CUpti_ActivityMemcpyPtoP4& m = r->p2p;
      m.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
      FillCopyCommon(m, op, shift);
      m.srcDeviceId = op.src_device;
      m.srcContextId = op.src_context_id;
      m.dstDeviceId = op.dst_device;
      m.dstContextId = op.dst_context_id;
      m.correlationId = op.correlation_id;
      m.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
    } else if (KindOn(s, CUPTI_ACTIVITY_KIND_MEMCPY)) {
      CUpti_ActivityMemcpy6& m = r->memcpy;
      m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      FillCopyCommon(m, op, shift);
      m.correlationId = op.correlation_id;
      m.runtimeCorrelationId = runtime ? op.correlation_id : 0;
      m.graphNodeId = op.graph_node_id;
      m.graphId = op.graph_id;
      m.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
      m.copyCount = 1;
    } else {
      return false;
    }
  } else if (op.kind == SIM_OP_MEMSET) {
    if (!KindOn(s, CUPTI_ACTIVITY_KIND_MEMSET)) return false;
    CUpti_ActivityMemset4& m = r->memset;
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.value = 0;
    m.bytes = op.bytes;
    m.start = at(op.start);
    m.end = at(op.end);
    m.deviceId = op.device;
    m.contextId = op.context_id;
    m.streamId = op.stream_id;
    m.correlationId = op.correlation_id;
    m.flags = op.async ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.graphNodeId = op.graph_node_id;
    m.graphId = op.graph_id;
    m.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
  } else {
    return false;
  }
  return true;
}

// GRAPH_TRACE: a graph launch's ops as one record, from the first node's start to the last
// node's end, instead of a record per node ("without giving visibility about the execution of
// its nodes", CUpti_ActivityGraphTrace2).  Kernels launched outside graphs keep their
// CONCURRENT_KERNEL records (GRAPH_TRACE enabled beside it replaces only graph nodes' records:
// Nsight Systems' --cuda-graph-trace=graph, tracy PR #1330).  s.mu held.
void PushGraphTraceLocked(State& s, const SimApiCall* call, const SimGpuOp* ops, size_t num_ops,
                          uint64_t host_lane, int64_t shift) {
  AnyRecord r{};
  CUpti_ActivityGraphTrace2& g = r.graph;
  g.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
  g.correlationId = call->correlation_id;
  uint64_t start = ops[0].start;
  uint64_t end = ops[0].end;
  for (size_t i = 1; i < num_ops; ++i) {
    start = std::min(start, ops[i].start);
    end = std::max(end, ops[i].end);
  }
  g.start = OnCuptiClock(start, shift);
  g.end = OnCuptiClock(end, shift);
  g.deviceId = g.endDeviceId = ops[0].device;
  g.contextId = g.endContextId = ops[0].context_id;
  g.graphId = ops[0].graph_id;
  g.streamId = ops[0].stream_id;
  const uint64_t lane = (static_cast<uint64_t>(ops[0].device) << 32) | ops[0].stream_id;
  if (s.faults.untimed_every != 0 && ++s.gpu_records % s.faults.untimed_every == 0) {
    ClearGpuTimes(r);
  }
  PushLocked(s, r, end, lane, host_lane, true);
}

void HookApiExit(SimApiCall* call, const SimGpuOp* ops, size_t num_ops) {
  State& s = S();
  NotifySynchronized(s, call);
  if (HasInnerDriverCall(call)) InvokeApiCallback(call, CUPTI_API_EXIT, true);
  InvokeApiCallback(call, CUPTI_API_EXIT);

  const int tid_type = s.thread_id_type.load(std::memory_order_relaxed);
  const uint32_t tid = ThreadIdFor(tid_type);
  const uint64_t host_lane = kHostLaneBit | tid;
  const int64_t shift = CuptiClockShift(s);
  bool place = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    PushApiRecordsLocked(s, call, tid, host_lane, shift);
    const bool runtime = call->domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    const bool graph_spans = KindOn(s, CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    if (graph_spans && num_ops > 0 && ops[0].graph_id != 0) {
      PushGraphTraceLocked(s, call, ops, num_ops, host_lane, shift);
      num_ops = 0;
    }
    for (size_t i = 0; i < num_ops; ++i) {
      const SimGpuOp& op = ops[i];
      const uint64_t lane = (static_cast<uint64_t>(op.device) << 32) | op.stream_id;
      AnyRecord r{};
      if (!FillOpRecord(s, op, runtime, shift, &r)) continue;
      // Real CUPTI may deliver a complete GPU record with 0 timestamps: "no timing information
      // could be collected for lack of device memory" (cupti_activity.h,
      // cuptiActivityGetNextRecord).
      if (s.faults.untimed_every != 0 && ++s.gpu_records % s.faults.untimed_every == 0) {
        ClearGpuTimes(r);
      }
      PushLocked(s, r, op.end, lane, host_lane, true);
    }
    if (s.request != nullptr && s.pending.size() >= s.next_threshold) place = true;
  }
  if (s.hold_buffer_records != 0) LendHeldBuffers(host_lane);
  EndLaunch(s, call);
  if (place) Place(PlaceMode::kThreshold);
}

void HookResource(uint32_t cbid, CUcontext ctx, CUstream stream) {
  State& s = S();
  CUpti_CallbackFunc cb = s.callback.load(std::memory_order_acquire);
  if (cb == nullptr || cbid >= kMaxCbid || !s.cb_enabled[CUPTI_CB_DOMAIN_RESOURCE][cbid].load()) {
    return;
  }
  s.counts.callbacks[CUPTI_CB_DOMAIN_RESOURCE].fetch_add(1, std::memory_order_relaxed);
  CUpti_ResourceData rd{};
  rd.context = ctx;
  rd.resourceHandle.stream = stream;
  rd.resourceDescriptor = nullptr;
  cb(s.userdata.load(std::memory_order_acquire), CUPTI_CB_DOMAIN_RESOURCE, cbid, &rd);
}

void HookGraphNode(uint32_t cbid, CUgraph graph) {
  State& s = S();
  CUpti_CallbackFunc cb = s.callback.load(std::memory_order_acquire);
  if (cb == nullptr || cbid >= kMaxCbid || !s.cb_enabled[CUPTI_CB_DOMAIN_RESOURCE][cbid].load()) {
    return;
  }
  s.counts.callbacks[CUPTI_CB_DOMAIN_RESOURCE].fetch_add(1, std::memory_order_relaxed);
  // As NVIDIA's cuda_graphs_trace sample reads it: CUpti_GraphData in resourceDescriptor.
  CUpti_GraphData gd{};
  gd.graph = graph;
  CUpti_ResourceData rd{};
  rd.resourceDescriptor = &gd;
  cb(s.userdata.load(std::memory_order_acquire), CUPTI_CB_DOMAIN_RESOURCE, cbid, &rd);
}

void HookReset() {
  State& s = S();
  std::lock_guard<std::recursive_mutex> fill(s.fill_mu);
  std::lock_guard<std::recursive_mutex> deliver(s.deliver_mu);
  std::lock_guard<std::mutex> lock(s.mu);
  ResetLocked(s);
  s.current = ClientBuffer();
  s.held_buffers.clear();  // abandoned with their client, as the current one
  s.owner_pending.clear();
  s.Configure();
  ResetPmSampling();
}

}  // namespace

const SimTracer kTracer = {HookApiEnter, HookApiExit, HookResource, HookReset, HookGraphNode};

}  // namespace sim_cupti
