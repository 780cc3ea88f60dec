// The sim self-tests' CUPTI client (sim_test_client.h): loading the fake CUPTI, the client's
// buffer and API callbacks, and the injection path every cuInit of the test process sees.
#include "sim_test_client.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace sim_test {

namespace {

// Runs before main(): the first cuInit (whichever test triggers it) must see the variable.
const bool kInjectEnvSet = [] {
  setenv("CUDA_INJECTION64_PATH", SIM_TEST_INJECT_PATH, 1);
  return true;
}();

}  // namespace

Cupti& C() {
  static Cupti c = [] {
    Cupti x;
    x.handle = dlopen(SIM_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
    if (x.handle == nullptr) return x;
#define SIM_LOAD(name) x.name = reinterpret_cast<decltype(x.name)>(dlsym(x.handle, #name))
    SIM_LOAD(cuptiGetVersion);
    SIM_LOAD(cuptiGetTimestamp);
    SIM_LOAD(cuptiSubscribe);
    SIM_LOAD(cuptiSubscribe_v2);
    SIM_LOAD(cuptiUnsubscribe);
    SIM_LOAD(cuptiEnableCallback);
    SIM_LOAD(cuptiEnableDomain);
    SIM_LOAD(cuptiActivityEnableDriverApi);
    SIM_LOAD(cuptiGetGraphId);
    SIM_LOAD(cuptiActivityEnable);
    SIM_LOAD(cuptiActivityDisable);
    SIM_LOAD(cuptiActivityEnableRuntimeApi);
    SIM_LOAD(cuptiActivityRegisterCallbacks);
    SIM_LOAD(cuptiActivityFlushAll);
    SIM_LOAD(cuptiActivityFlushPeriod);
    SIM_LOAD(cuptiActivityGetNextRecord);
    SIM_LOAD(cuptiActivityGetNumDroppedRecords);
    SIM_LOAD(cuptiActivityPushExternalCorrelationId);
    SIM_LOAD(cuptiActivityPopExternalCorrelationId);
    SIM_LOAD(cuptiActivitySetAttribute);
    SIM_LOAD(cuptiActivityGetAttribute);
    SIM_LOAD(cuptiGetCallbackName);
    SIM_LOAD(cuptiGetResultString);
    SIM_LOAD(cuptiFinalize);
    SIM_LOAD(cuptiGetContextId);
    SIM_LOAD(cuptiGetDeviceId);
    SIM_LOAD(cuptiActivityRegisterTimestampCallback);
#undef SIM_LOAD
    return x;
  }();
  return c;
}

ClientState g;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  std::lock_guard<std::mutex> lock(g.mu);
  ++g.requested;
  if (g.refuse) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    return;
  }
  *size = g.buffer_size;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, g.buffer_size));
  *max_records = g.max_records;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<Rec> got;
  CUpti_Activity* r = nullptr;
  while (C().cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    size_t sz = 0;
    switch (r->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        sz = sizeof(CUpti_ActivityKernel10);
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        sz = sizeof(CUpti_ActivityMemcpy6);
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY2:
        sz = sizeof(CUpti_ActivityMemcpyPtoP4);
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        sz = sizeof(CUpti_ActivityMemset4);
        break;
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER:
        sz = sizeof(CUpti_ActivityAPI);
        break;
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
        sz = sizeof(CUpti_ActivitySynchronization2);
        break;
      case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
        sz = sizeof(CUpti_ActivityGraphTrace2);
        break;
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
        sz = sizeof(CUpti_ActivityExternalCorrelation);
        break;
      default:
        ADD_FAILURE() << "unexpected kind " << r->kind;
        break;
    }
    const uint8_t* p = reinterpret_cast<const uint8_t*>(r);
    got.push_back({r->kind, std::vector<uint8_t>(p, p + sz), 0});
  }
  std::lock_guard<std::mutex> lock(g.mu);
  for (Rec& x : got) {
    x.buffer_index = g.completed;
    g.records.push_back(std::move(x));
  }
  ++g.completed;
  if (valid == 0) ++g.empty_completed;
  std::free(buffer);
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  CallbackEvent ev{domain, cbid, -1, 0, "", "", 0, std::this_thread::get_id()};
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* d = static_cast<const CUpti_CallbackData*>(data);
    ev.site = d->callbackSite;
    ev.correlation_id = d->correlationId;
    ev.function = d->functionName ? d->functionName : "";
    ev.symbol = d->symbolName ? d->symbolName : "";
    // correlationData is shared between ENTER and EXIT of one call.
    if (d->callbackSite == CUPTI_API_ENTER) *d->correlationData = 0xC0FFEE;
    if (d->callbackSite == CUPTI_API_EXIT) {
      EXPECT_EQ(*d->correlationData, 0xC0FFEEu);
    }
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    // The graph, as NVIDIA's cuda_graphs_trace sample reads it; its id in correlation_id.
    const auto* rd = static_cast<const CUpti_ResourceData*>(data);
    const auto* gd = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
    uint32_t id = 0;
    if (gd != nullptr && C().cuptiGetGraphId(gd->graph, &id) == CUPTI_SUCCESS) {
      ev.correlation_id = id;
    }
  }
  C().cuptiGetTimestamp(&ev.timestamp);
  std::lock_guard<std::mutex> lock(g.mu);
  g.callbacks.push_back(ev);
}

}  // namespace sim_test
