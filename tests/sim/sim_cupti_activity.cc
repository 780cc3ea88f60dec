// The fake CUPTI's exported activity API: kinds, buffer callbacks, flushes, record iteration,
// attributes, external correlation, thread ids, timestamps and cuptiFinalize.
#include <cstring>

#include "sim_cupti_state.h"

using namespace sim_cupti;  // NOLINT(build/namespaces): this library's own internals

namespace {
bool KindKnown(CUpti_ActivityKind kind) {
  return kind > CUPTI_ACTIVITY_KIND_INVALID && kind < CUPTI_ACTIVITY_KIND_COUNT;
}

CUptiResult SetKind(CUpti_ActivityKind kind, bool on) {
  if (!KindKnown(kind)) return CUPTI_ERROR_INVALID_KIND;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.kind_enabled[kind].store(on ? 1 : 0);
  // The RUNTIME / DRIVER kinds switch every API on or off, overriding earlier per-cbid choices.
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    for (auto& c : s.runtime_api) c.store(on ? 1 : 0);
  } else if (kind == CUPTI_ACTIVITY_KIND_DRIVER) {
    for (auto& c : s.driver_api) c.store(on ? 1 : 0);
  }
  if (on) StartWorkerLocked(s);
  return CUPTI_SUCCESS;
}
}  // namespace

CUPTI_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  SIM_FAULT_POINT();
  S().counts.kind_switches.fetch_add(1, std::memory_order_relaxed);
  return SetKind(kind, true);
}

CUPTI_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  SIM_FAULT_POINT();
  S().counts.kind_switches.fetch_add(1, std::memory_order_relaxed);
  return SetKind(kind, false);
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableContext(CUcontext context, CUpti_ActivityKind kind) {
  SIM_FAULT_POINT();
  (void)context;  // the sim does not scope activity per context
  return SetKind(kind, true);
}

CUPTI_EXPORT CUptiResult cuptiActivityDisableContext(CUcontext context, CUpti_ActivityKind kind) {
  SIM_FAULT_POINT();
  (void)context;
  return SetKind(kind, false);
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind kind) {
  return cuptiActivityEnable(kind);
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  SIM_FAULT_POINT();
  if (cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  S().counts.api_filter_switches.fetch_add(1, std::memory_order_relaxed);
  S().runtime_api[cbid].store(enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  SIM_FAULT_POINT();
  if (cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  S().counts.api_filter_switches.fetch_add(1, std::memory_order_relaxed);
  S().driver_api[cbid].store(enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  SIM_FAULT_POINT();
  if (funcBufferRequested == nullptr || funcBufferCompleted == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.request = funcBufferRequested;
  s.complete = funcBufferCompleted;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  SIM_FAULT_POINT();
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.request == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
  }
  Place((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0 ? PlaceMode::kForced : PlaceMode::kFlush);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityFlush(CUcontext context, uint32_t streamId, uint32_t flag) {
  (void)context;
  (void)streamId;
  return cuptiActivityFlushAll(flag);
}

CUPTI_EXPORT CUptiResult cuptiActivityFlushPeriod(uint32_t time) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.flush_period_ms = time;
  if (time != 0) StartWorkerLocked(s);
  s.worker_cv.notify_all();
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                    CUpti_Activity** record) {
  SIM_FAULT_POINT();
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(buffer);
  const uintptr_t end = begin + validBufferSizeBytes;
  uintptr_t pos;
  if (*record == nullptr) {
    pos = (begin + 7u) & ~static_cast<uintptr_t>(7u);  // records start 8-aligned (see Place)
  } else {
    const uintptr_t cur = reinterpret_cast<uintptr_t>(*record);
    if (cur < begin || cur + sizeof(CUpti_Activity) > end) return CUPTI_ERROR_INVALID_PARAMETER;
    const size_t size = RecordSize((*record)->kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    pos = cur + size;
  }
  if (pos + sizeof(CUpti_Activity) > end) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  CUpti_ActivityKind kind;
  std::memcpy(&kind, reinterpret_cast<const void*>(pos), sizeof(kind));
  const size_t size = RecordSize(kind);
  if (size == 0 || pos + size > end) return CUPTI_ERROR_INVALID_KIND;
  *record = reinterpret_cast<CUpti_Activity*>(pos);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
                                                           size_t* dropped) {
  SIM_FAULT_POINT();
  (void)context;
  (void)streamId;
  if (dropped == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  // One global queue: the count is reset on read, so summing per-context queries stays correct.
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  *dropped = static_cast<size_t>(s.dropped);
  s.dropped = 0;
  return CUPTI_SUCCESS;
}

namespace {
size_t AttrSize(CUpti_ActivityAttribute attr) {
  switch (attr) {
    case CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER:
    case CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED:
    case CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER:
      return sizeof(uint8_t);
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_CDP:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_SIZE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_POOL_LIMIT:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE:
    case CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE_DEVICE_GRAPHS:
      return sizeof(size_t);
    default:
      return 0;
  }
}
}  // namespace

CUPTI_EXPORT CUptiResult cuptiActivityGetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize,
                                                   void* value) {
  SIM_FAULT_POINT();
  const size_t need = AttrSize(attr);
  if (valueSize == nullptr || value == nullptr || need == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  if (*valueSize < need) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint64_t v = s.attrs[attr];
  if (need == sizeof(uint8_t)) {
    const uint8_t b = static_cast<uint8_t>(v);
    std::memcpy(value, &b, 1);
  } else {
    const size_t z = static_cast<size_t>(v);
    std::memcpy(value, &z, sizeof(z));
  }
  *valueSize = need;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* valueSize,
                                                   void* value) {
  SIM_FAULT_POINT();
  const size_t need = AttrSize(attr);
  if (valueSize == nullptr || value == nullptr || need == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  if (*valueSize < need) return CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (need == sizeof(uint8_t)) {
    uint8_t b;
    std::memcpy(&b, value, 1);
    s.attrs[attr] = b;
  } else {
    size_t z;
    std::memcpy(&z, value, sizeof(z));
    s.attrs[attr] = z;
  }
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                                uint64_t id) {
  SIM_FAULT_POINT();
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID ||
      kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  t_external[kind].push_back(id);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                               uint64_t* lastId) {
  SIM_FAULT_POINT();
  if (kind <= CUPTI_EXTERNAL_CORRELATION_KIND_INVALID ||
      kind >= CUPTI_EXTERNAL_CORRELATION_KIND_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (t_external[kind].empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (lastId != nullptr) *lastId = t_external[kind].back();
  t_external[kind].pop_back();
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  SIM_FAULT_POINT();
  if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT &&
      type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  S().thread_id_type.store(type);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  if (type == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *type = static_cast<CUpti_ActivityThreadIdType>(S().thread_id_type.load());
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiActivityEnableLatencyTimestamps(uint8_t enable) {
  SIM_FAULT_POINT();
  S().latency_timestamps.store(enable != 0);
  return CUPTI_SUCCESS;
}

// Accepted for compatibility; they change nothing the sim models.
CUPTI_EXPORT CUptiResult cuptiActivityEnableLaunchAttributes(uint8_t) {
  return CUPTI_SUCCESS;
}
CUPTI_EXPORT CUptiResult cuptiActivityEnableDeviceGraph(uint8_t) {
  return CUPTI_SUCCESS;
}
CUPTI_EXPORT CUptiResult cuptiActivityEnableAllocationSource(uint8_t) {
  return CUPTI_SUCCESS;
}
CUPTI_EXPORT CUptiResult cuptiActivityEnableAllSyncRecords(uint8_t) {
  return CUPTI_SUCCESS;
}
CUPTI_EXPORT CUptiResult cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t) {
  return CUPTI_SUCCESS;
}
// HW trace is Blackwell-only; the simulated GPU is not one.
CUPTI_EXPORT CUptiResult cuptiActivityEnableHWTrace(uint8_t enable) {
  return enable != 0 ? CUPTI_ERROR_NOT_SUPPORTED : CUPTI_SUCCESS;
}
// From now on every timestamp (records made from here on, cuptiGetTimestamp) is on the client's
// clock: the sim clock shifted by (callback() - sim clock), measured at each record, which is
// exact when the callback reads the host clock (the sim clock, sim_cuda.h).
CUPTI_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
  SIM_FAULT_POINT();
  if (fn == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  S().timestamp_cb.store(fn, std::memory_order_release);
  return CUPTI_SUCCESS;
}

// The graph's id, as its records carry it (simGraphId).
CUPTI_EXPORT CUptiResult cuptiGetGraphId(CUgraph graph, uint32_t* pId) {
  SIM_FAULT_POINT();
  if (graph == nullptr || pId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *pId = simGraphId(reinterpret_cast<simGraph_t>(graph));
  return *pId != 0 ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

CUPTI_EXPORT CUptiResult cuptiFinalize(void) {
  SIM_FAULT_POINT();
  State& s = S();
  // Deliver everything (forced), give back the empty current buffer, then detach.
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.request == nullptr) {
      ResetLocked(s);
      return CUPTI_SUCCESS;
    }
  }
  Place(PlaceMode::kForced);
  {
    std::lock_guard<std::recursive_mutex> fill(s.fill_mu);
    QueueCurrent(s, true);
    QueueHeldBuffers(s, true);
  }
  Deliver();
  std::lock_guard<std::recursive_mutex> fill(s.fill_mu);
  std::lock_guard<std::recursive_mutex> deliver(s.deliver_mu);
  std::lock_guard<std::mutex> lock(s.mu);
  ResetLocked(s);
  return CUPTI_SUCCESS;
}
