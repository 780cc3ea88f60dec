// Fake CUPTI (libcupti.so.13) for the simulated device: the exported general and callback API
// (version, result strings, timestamps, ids, subscription, callback domains and names).
//
// Implements the callback and activity APIs a tracing client uses, with the CUDA 13.0 header
// structs filled field by field (the real headers are included, so layouts are exact).  Records
// come from the engine in libcuda.so.1 through the SimTracer hooks and are delivered the way real
// CUPTI delivers them: into client buffers (bufferRequested), handed back through
// bufferCompleted when full, on cuptiActivityFlushAll, on the periodic flush and at
// cuptiFinalize / exit -- deliberately out of global order and partly late (seeded).
//
// Files: sim_cupti_state.{h,cc} (state, locks, knobs, faults), sim_cupti_records.cc (engine
// hooks -> records), sim_cupti_delivery.cc (buffers, delivery, worker), sim_cupti_activity.cc
// (activity API), this file (general and callback API).
#include <cstdio>
#include <string>

#include "sim_cupti_state.h"

using namespace sim_cupti;  // NOLINT(build/namespaces): this library's own internals

namespace {

const char* ResultString(CUptiResult r) {
  switch (r) {
    case CUPTI_SUCCESS:
      return "CUPTI_SUCCESS";
    case CUPTI_ERROR_INVALID_PARAMETER:
      return "CUPTI_ERROR_INVALID_PARAMETER";
    case CUPTI_ERROR_INVALID_DEVICE:
      return "CUPTI_ERROR_INVALID_DEVICE";
    case CUPTI_ERROR_INVALID_CONTEXT:
      return "CUPTI_ERROR_INVALID_CONTEXT";
    case CUPTI_ERROR_INVALID_OPERATION:
      return "CUPTI_ERROR_INVALID_OPERATION";
    case CUPTI_ERROR_OUT_OF_MEMORY:
      return "CUPTI_ERROR_OUT_OF_MEMORY";
    case CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT:
      return "CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT";
    case CUPTI_ERROR_API_NOT_IMPLEMENTED:
      return "CUPTI_ERROR_API_NOT_IMPLEMENTED";
    case CUPTI_ERROR_MAX_LIMIT_REACHED:
      return "CUPTI_ERROR_MAX_LIMIT_REACHED";
    case CUPTI_ERROR_NOT_READY:
      return "CUPTI_ERROR_NOT_READY";
    case CUPTI_ERROR_NOT_INITIALIZED:
      return "CUPTI_ERROR_NOT_INITIALIZED";
    case CUPTI_ERROR_QUEUE_EMPTY:
      return "CUPTI_ERROR_QUEUE_EMPTY";
    case CUPTI_ERROR_INVALID_KIND:
      return "CUPTI_ERROR_INVALID_KIND";
    case CUPTI_ERROR_NOT_SUPPORTED:
      return "CUPTI_ERROR_NOT_SUPPORTED";
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
      return "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
    case CUPTI_ERROR_UNKNOWN:
      return "CUPTI_ERROR_UNKNOWN";
    default:
      return nullptr;
  }
}

}  // namespace

// =================================================================================================
// Exported CUPTI API
// =================================================================================================

CUPTI_EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  SIM_FAULT_POINT();
  if (version == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* s = ResultString(result);
  if (s == nullptr) {
    *str = nullptr;
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  *str = s;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetErrorMessage(CUptiResult result, const char** str) {
  return cuptiGetResultString(result, str);
}

CUPTI_EXPORT CUptiResult cuptiGetLastError(void) {
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  SIM_FAULT_POINT();
  if (timestamp == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = static_cast<uint64_t>(static_cast<int64_t>(simNow()) + CuptiClockShift(S()));
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetContextId(CUcontext context, uint32_t* contextId) {
  SIM_FAULT_POINT();
  if (contextId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  return simInternalContextInfo(context, nullptr, contextId) ? CUPTI_SUCCESS
                                                             : CUPTI_ERROR_INVALID_CONTEXT;
}

CUPTI_EXPORT CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t* deviceId) {
  SIM_FAULT_POINT();
  if (deviceId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (context == nullptr) {
    if (cuCtxGetCurrent(&context) != CUDA_SUCCESS || context == nullptr) {
      return CUPTI_ERROR_INVALID_CONTEXT;
    }
  }
  return simInternalContextInfo(context, deviceId, nullptr) ? CUPTI_SUCCESS
                                                            : CUPTI_ERROR_INVALID_CONTEXT;
}

CUPTI_EXPORT CUptiResult cuptiGetStreamId(CUcontext context, CUstream stream, uint32_t* streamId) {
  SIM_FAULT_POINT();
  (void)context;
  if (streamId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  return simInternalStreamInfo(stream, nullptr, streamId) ? CUPTI_SUCCESS
                                                          : CUPTI_ERROR_INVALID_STREAM;
}

CUPTI_EXPORT CUptiResult cuptiGetStreamIdEx(CUcontext context, CUstream stream,
                                            uint8_t perThreadStream, uint32_t* streamId) {
  (void)perThreadStream;
  return cuptiGetStreamId(context, stream, streamId);
}

CUPTI_EXPORT CUptiResult cuptiDeviceSupported(CUdevice dev, int* support) {
  if (support == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (dev < 0 || dev >= simNumDevices()) return CUPTI_ERROR_INVALID_DEVICE;
  *support = 1;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiComputeCapabilitySupported(int major, int minor, int* support) {
  (void)minor;
  if (support == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *support = major >= 7 ? 1 : 0;
  return CUPTI_SUCCESS;
}

// ---- callbacks --------------------------------------------------------------------------------

namespace {
CUptiResult SubscribeImpl(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                          void* userdata, CUpti_SubscriberParams* params) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (params != nullptr && params->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.faults.subscribe_refused || s.subscribed) {
    if (params != nullptr && params->oldSubscriberName != nullptr &&
        params->oldSubscriberSize > 0) {
      const std::string old = s.subscribed ? "CUPTI for " + s.subscriber_name
                                           : std::string("Nsight Systems (simulated)");
      std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", old.c_str());
    }
    *subscriber = nullptr;
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  s.subscribed = true;
  s.subscriber_name =
      params != nullptr && params->subscriberName != nullptr
          ? std::string(params->subscriberName).substr(0, CUPTI_SUBSCRIBER_NAME_MAX_LEN)
          : std::string("client");
  s.userdata.store(userdata, std::memory_order_release);
  s.callback.store(callback, std::memory_order_release);
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&s);
  return CUPTI_SUCCESS;
}
}  // namespace

CUPTI_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                        CUpti_CallbackFunc callback, void* userdata) {
  SIM_FAULT_POINT();
  return SubscribeImpl(subscriber, callback, userdata, nullptr);
}

CUPTI_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                           CUpti_CallbackFunc callback, void* userdata,
                                           CUpti_SubscriberParams* pParams) {
  SIM_FAULT_POINT();
  return SubscribeImpl(subscriber, callback, userdata, pParams);
}

CUPTI_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ValidSubscriber(s, subscriber)) return CUPTI_ERROR_INVALID_PARAMETER;
  s.subscribed = false;
  s.callback.store(nullptr, std::memory_order_release);
  // userdata stays: a callback already past its load of `callback` still gets the value it
  // was subscribed with.
  for (auto& d : s.cb_enabled) {
    for (auto& c : d) c.store(0);
  }
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiSupportedDomains(size_t* domainCount,
                                               CUpti_DomainTable* domainTable) {
  if (domainCount == nullptr || domainTable == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  static CUpti_CallbackDomain domains[] = {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API,
                                           CUPTI_CB_DOMAIN_RESOURCE,   CUPTI_CB_DOMAIN_SYNCHRONIZE,
                                           CUPTI_CB_DOMAIN_NVTX,       CUPTI_CB_DOMAIN_STATE};
  *domainCount = sizeof(domains) / sizeof(domains[0]);
  *domainTable = domains;
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                               CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  State& s = S();
  if (enable == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ValidSubscriber(s, subscriber) || cbid >= DomainCbidLimit(domain)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  *enable = s.cb_enabled[domain][cbid].load();
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                             CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ValidSubscriber(s, subscriber) || cbid >= DomainCbidLimit(domain)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  s.counts.callback_switches.fetch_add(1, std::memory_order_relaxed);
  s.cb_enabled[domain][cbid].store(enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const size_t limit = DomainCbidLimit(domain);
  if (!ValidSubscriber(s, subscriber) || limit == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  s.counts.callback_switches.fetch_add(1, std::memory_order_relaxed);
  for (size_t c = 0; c < limit; ++c) s.cb_enabled[domain][c].store(enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  SIM_FAULT_POINT();
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!ValidSubscriber(s, subscriber)) return CUPTI_ERROR_INVALID_PARAMETER;
  for (int d = 1; d < CUPTI_CB_DOMAIN_SIZE; ++d) {
    const size_t limit = DomainCbidLimit(static_cast<CUpti_CallbackDomain>(d));
    for (size_t c = 0; c < limit; ++c) s.cb_enabled[d][c].store(enable != 0 ? 1 : 0);
  }
  return CUPTI_SUCCESS;
}

CUPTI_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                              const char** name) {
  SIM_FAULT_POINT();
  if (name == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *name = nullptr;
  if ((domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) ||
      cbid >= kMaxCbid) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  *name = Names().full[domain][cbid];
  return *name != nullptr ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}
