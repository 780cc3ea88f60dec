// Self-tests of the simulated device: a tiny CUPTI client (dlopens the fake libcupti.so.13 by
// path, like libgpuacct does by name) drives the sim and checks timeline, correlation, delivery
// and fault semantics; plus cuInit's injection loading and the scenario programs' planted truth.
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sim_cuda.h"

namespace {

// Runs before main(): the first cuInit (whichever test triggers it) must see the variable.
const bool kInjectEnvSet = [] {
  setenv("CUDA_INJECTION64_PATH", SIM_TEST_INJECT_PATH, 1);
  return true;
}();

constexpr uint64_t kUs = 1000;

// ---- the fake client ---------------------------------------------------------------------------

struct Cupti {
  void* handle = nullptr;
#define SIM_FN(name) decltype(&::name) name = nullptr
  SIM_FN(cuptiGetVersion);
  SIM_FN(cuptiGetTimestamp);
  SIM_FN(cuptiSubscribe);
  SIM_FN(cuptiSubscribe_v2);
  SIM_FN(cuptiUnsubscribe);
  SIM_FN(cuptiEnableCallback);
  SIM_FN(cuptiEnableDomain);
  SIM_FN(cuptiActivityEnable);
  SIM_FN(cuptiActivityDisable);
  SIM_FN(cuptiActivityEnableRuntimeApi);
  SIM_FN(cuptiActivityRegisterCallbacks);
  SIM_FN(cuptiActivityFlushAll);
  SIM_FN(cuptiActivityFlushPeriod);
  SIM_FN(cuptiActivityGetNextRecord);
  SIM_FN(cuptiActivityGetNumDroppedRecords);
  SIM_FN(cuptiActivityPushExternalCorrelationId);
  SIM_FN(cuptiActivityPopExternalCorrelationId);
  SIM_FN(cuptiActivitySetAttribute);
  SIM_FN(cuptiActivityGetAttribute);
  SIM_FN(cuptiGetCallbackName);
  SIM_FN(cuptiGetResultString);
  SIM_FN(cuptiFinalize);
  SIM_FN(cuptiGetContextId);
  SIM_FN(cuptiGetDeviceId);
  SIM_FN(cuptiActivityRegisterTimestampCallback);
#undef SIM_FN
};

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

// A delivered record, copied out of the client buffer.
struct Rec {
  CUpti_ActivityKind kind;
  std::vector<uint8_t> bytes;
  size_t buffer_index;
  template <typename T>
  const T& as() const {
    return *reinterpret_cast<const T*>(bytes.data());
  }
};

struct CallbackEvent {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  int site;  // API_ENTER / API_EXIT, -1 for non-API domains
  uint32_t correlation_id;
  std::string function;
  std::string symbol;
  uint64_t timestamp;
  std::thread::id thread;
};

struct ClientState {
  std::mutex mu;
  std::vector<Rec> records;
  std::vector<CallbackEvent> callbacks;
  size_t buffer_size = 64 * 1024;
  size_t max_records = 0;
  bool refuse = false;
  size_t requested = 0;
  size_t completed = 0;
  size_t empty_completed = 0;
};
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
  C().cuptiGetTimestamp(&ev.timestamp);
  std::lock_guard<std::mutex> lock(g.mu);
  g.callbacks.push_back(ev);
}

const CUpti_ActivityKind kWantedKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(C().handle, nullptr) << dlerror();
    for (const char* v :
         {"GPUACCT_SIM_FAULTS", "GPUACCT_SIM_SEED", "GPUACCT_SIM_DELAY_PCT", "GPUACCT_SIM_SHUFFLE",
          "GPUACCT_SIM_CLOCK", "GPUACCT_SIM_FORCED_INCOMPLETE", "GPUACCT_SIM_CUPTI_CLOCK",
          "GPUACCT_SIM_NESTED_IDS", "GPUACCT_SIM_DEVICE_MEMORY"}) {
      unsetenv(v);
    }
    setenv("GPUACCT_SIM_DELAY_PCT", "0", 1);  // tests opt into late records explicitly
    ResetAll();
  }
  void TearDown() override { simReset(); }

  // Re-reads the environment into the sim and the fake CUPTI, clears the client.
  void ResetAll(int devices = 2) {
    simReset();
    {
      std::lock_guard<std::mutex> lock(g.mu);
      g.records.clear();
      g.callbacks.clear();
      g.buffer_size = 64 * 1024;
      g.max_records = 0;
      g.refuse = false;
      g.requested = g.completed = g.empty_completed = 0;
    }
    ASSERT_EQ(simInit(devices), SIM_OK);
  }

  // The usual client setup: subscribe, callbacks on the runtime domain, activity kinds, buffers.
  void Attach(bool subscribe = true) {
    if (subscribe) {
      ASSERT_EQ(C().cuptiSubscribe(&sub_, OnCallback, nullptr), CUPTI_SUCCESS);
      ASSERT_EQ(C().cuptiEnableDomain(1, sub_, CUPTI_CB_DOMAIN_RUNTIME_API), CUPTI_SUCCESS);
      ASSERT_EQ(C().cuptiEnableDomain(1, sub_, CUPTI_CB_DOMAIN_RESOURCE), CUPTI_SUCCESS);
    }
    ASSERT_EQ(C().cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted), CUPTI_SUCCESS);
    for (CUpti_ActivityKind k : kWantedKinds) ASSERT_EQ(C().cuptiActivityEnable(k), CUPTI_SUCCESS);
  }

  std::vector<Rec> Records() {
    std::lock_guard<std::mutex> lock(g.mu);
    return g.records;
  }
  std::vector<Rec> Records(CUpti_ActivityKind kind) {
    std::vector<Rec> out;
    for (Rec& r : Records()) {
      if (r.kind == kind) out.push_back(r);
    }
    return out;
  }

  CUpti_SubscriberHandle sub_ = nullptr;
};

// ---- cuInit / injection
// ---------------------------------------------------------------------------

TEST_F(SimTest, CuInitLoadsInjectionExactlyOnce) {
  using CuInit = int (*)(unsigned);
  auto cu_init = reinterpret_cast<CuInit>(dlsym(RTLD_DEFAULT, "cuInit"));
  ASSERT_NE(cu_init, nullptr);
  EXPECT_EQ(cu_init(0), 0);
  EXPECT_EQ(cu_init(0), 0);
  EXPECT_NE(cu_init(1), 0);  // flags must be 0
  ResetAll();
  void* h = dlopen(SIM_TEST_INJECT_PATH, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr) << "cuInit did not load CUDA_INJECTION64_PATH";
  auto calls = reinterpret_cast<int (*)()>(dlsym(h, "sim_test_inject_calls"));
  ASSERT_NE(calls, nullptr);
  EXPECT_EQ(calls(), 1);
  // Loaded with RTLD_LOCAL: its symbols are not global.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "sim_test_inject_calls"), nullptr);
  dlclose(h);
}

// ---- timeline ----------------------------------------------------------------------------------

TEST_F(SimTest, StreamOrderAndCrossStreamConcurrency) {
  Attach();
  simStream_t a = simStreamCreate(0);
  simStream_t b = simStreamCreate(0);
  const uint64_t t0 = simNow();
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(simLaunchKernel(a, "ka", 100 * kUs), SIM_OK);
    ASSERT_EQ(simLaunchKernel(b, "kb", 100 * kUs), SIM_OK);
  }
  EXPECT_EQ(simNow(), t0 + 10 * 4 * kUs);  // launch cost 4 us each
  ASSERT_EQ(simDeviceSynchronize(0), SIM_OK);
  EXPECT_EQ(simNow(), t0 + 4 * kUs + 5 * kUs + 500 * kUs);  // stream b: first launch at t0+4us
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);

  std::map<uint32_t, std::vector<CUpti_ActivityKernel10>> by_stream;
  for (const Rec& r : Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
    const auto& k = r.as<CUpti_ActivityKernel10>();
    by_stream[k.streamId].push_back(k);
  }
  ASSERT_EQ(by_stream.size(), 2u);
  for (auto& [sid, ks] : by_stream) {
    ASSERT_EQ(ks.size(), 5u);
    std::sort(ks.begin(), ks.end(),
              [](auto& x, auto& y) { return x.correlationId < y.correlationId; });
    for (size_t i = 1; i < ks.size(); ++i) {
      EXPECT_GE(ks[i].start, ks[i - 1].end) << "kernels of one stream overlap";
      EXPECT_EQ(ks[i].start, ks[i - 1].end) << "back to back expected (launch << kernel)";
    }
    EXPECT_EQ(ks[0].end - ks[0].start, 100 * kUs);
  }
  const auto& fa = by_stream[simStreamId(a)][0];
  const auto& fb = by_stream[simStreamId(b)][0];
  EXPECT_EQ(fa.start, t0 + 5 * kUs);
  EXPECT_EQ(fb.start, t0 + 4 * kUs + 5 * kUs);
  EXPECT_LT(fb.start, fa.end) << "streams must run concurrently";
  EXPECT_STREQ(fa.name, "ka");
  EXPECT_EQ(fa.deviceId, 0u);
  EXPECT_EQ(fa.contextId, 1u);
}

TEST_F(SimTest, CopiesMemsetAndSynchronization) {
  Attach();
  simStream_t s = simStreamCreate(1);
  uint64_t t0 = simNow();
  ASSERT_EQ(simMemcpyAsync(s, SIM_MEMCPY_H2D, 1 << 20, 1000 * kUs, /*pageable=*/1), SIM_OK);
  EXPECT_EQ(simNow(), t0 + 5 * kUs + 1000 * kUs) << "pageable H2D blocks the host";
  t0 = simNow();
  ASSERT_EQ(simMemcpyAsync(s, SIM_MEMCPY_D2H, 1 << 20, 300 * kUs, /*pageable=*/0), SIM_OK);
  EXPECT_EQ(simNow(), t0 + 4 * kUs) << "pinned async copy returns at once";
  ASSERT_EQ(simMemsetAsync(s, 4096, 10 * kUs), SIM_OK);
  ASSERT_EQ(simMemcpyAsync(s, SIM_MEMCPY_P2P, 1 << 20, 50 * kUs, 0), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(simMemcpy(s, SIM_MEMCPY_D2D, 4096, 20 * kUs), SIM_OK);
  ASSERT_EQ(simDeviceSynchronize(-1), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);

  auto copies = Records(CUPTI_ACTIVITY_KIND_MEMCPY);
  ASSERT_EQ(copies.size(), 3u);
  std::set<int> kinds;
  for (auto& r : copies) {
    const auto& m = r.as<CUpti_ActivityMemcpy6>();
    kinds.insert(m.copyKind);
    EXPECT_EQ(m.deviceId, 1u);
    if (m.copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) {
      EXPECT_EQ(m.srcKind, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
      EXPECT_EQ(m.bytes, 1u << 20);
    }
  }
  EXPECT_EQ(kinds, (std::set<int>{CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
                                  CUPTI_ACTIVITY_MEMCPY_KIND_DTOD}));
  auto p2p = Records(CUPTI_ACTIVITY_KIND_MEMCPY2);
  ASSERT_EQ(p2p.size(), 1u);
  EXPECT_EQ(p2p[0].as<CUpti_ActivityMemcpyPtoP4>().srcDeviceId, 1u);
  EXPECT_EQ(p2p[0].as<CUpti_ActivityMemcpyPtoP4>().dstDeviceId, 0u);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_MEMSET).size(), 1u);

  auto syncs = Records(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  ASSERT_EQ(syncs.size(), 3u);  // stream sync + device sync of devices 0 and 1
  int stream_syncs = 0;
  for (auto& r : syncs) {
    const auto& sy = r.as<CUpti_ActivitySynchronization2>();
    if (sy.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE) {
      ++stream_syncs;
      EXPECT_EQ(sy.streamId, simStreamId(s));
    } else {
      EXPECT_EQ(sy.type, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
    }
  }
  EXPECT_EQ(stream_syncs, 1);
  std::set<uint32_t> cbids;
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_RUNTIME)) cbids.insert(r.as<CUpti_ActivityAPI>().cbid);
  for (uint32_t want : {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                        CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
                        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
                        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
                        CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                        CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020}) {
    EXPECT_EQ(cbids.count(want), 1u) << "missing runtime cbid " << want;
  }
}

// ---- correlation and callbacks ------------------------------------------------------------------

TEST_F(SimTest, ApiRecordsCallbacksAndKernelsShareCorrelationIds) {
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(simLaunchKernel(s, "corr_kernel", 10 * kUs), SIM_OK);
  ASSERT_EQ(simCuLaunchKernel(s, "driver_kernel", 10 * kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);

  std::map<uint32_t, CUpti_ActivityAPI> api;
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_RUNTIME)) {
    api[r.as<CUpti_ActivityAPI>().correlationId] = r.as<CUpti_ActivityAPI>();
  }
  std::map<uint32_t, CUpti_ActivityAPI> drv;
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_DRIVER)) {
    drv[r.as<CUpti_ActivityAPI>().correlationId] = r.as<CUpti_ActivityAPI>();
  }
  auto kernels = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ASSERT_EQ(kernels.size(), 21u);
  for (auto& r : kernels) {
    const auto& k = r.as<CUpti_ActivityKernel10>();
    if (std::strcmp(k.name, "driver_kernel") == 0) {
      ASSERT_EQ(drv.count(k.correlationId), 1u);
      EXPECT_EQ(drv[k.correlationId].cbid,
                static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
      continue;
    }
    ASSERT_EQ(api.count(k.correlationId), 1u) << "kernel without its cudaLaunchKernel record";
    const auto& a = api[k.correlationId];
    EXPECT_EQ(a.cbid, static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
    EXPECT_LE(a.start, k.start);
    EXPECT_EQ(a.end - a.start, 4 * kUs);
    EXPECT_EQ(a.processId, static_cast<uint32_t>(getpid()));
  }
  // Callbacks: ENTER then EXIT for each launch, same correlation id, timestamps bracket the record.
  std::vector<CallbackEvent> cbs;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    cbs = g.callbacks;
  }
  int launches = 0;
  for (size_t i = 0; i < cbs.size(); ++i) {
    if (cbs[i].domain != CUPTI_CB_DOMAIN_RUNTIME_API ||
        cbs[i].cbid != CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 ||
        cbs[i].site != CUPTI_API_ENTER) {
      continue;
    }
    ++launches;
    ASSERT_LT(i + 1, cbs.size());
    EXPECT_EQ(cbs[i + 1].site, CUPTI_API_EXIT);
    EXPECT_EQ(cbs[i + 1].correlation_id, cbs[i].correlation_id);
    EXPECT_EQ(cbs[i].function, "cudaLaunchKernel");
    EXPECT_EQ(cbs[i].symbol, "corr_kernel");
    ASSERT_EQ(api.count(cbs[i].correlation_id), 1u);
    EXPECT_LE(cbs[i].timestamp, api[cbs[i].correlation_id].start);
    EXPECT_GE(cbs[i + 1].timestamp, api[cbs[i].correlation_id].end);
  }
  EXPECT_EQ(launches, 20);
  const char* name = nullptr;
  EXPECT_EQ(C().cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API,
                                     CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &name),
            CUPTI_SUCCESS);
  EXPECT_STREQ(name, "cudaLaunchKernel_v7000");
}

// cudaLaunchKernel making its cuLaunchKernel: both domains' callbacks, properly nested, and both
// records, with the correlation ids each mode promises; the kernel is submitted by the driver
// call; one launch call.
TEST_F(SimTest, NestedLaunchReportsRuntimeAndDriverCalls) {
  for (simNestedIds ids :
       {SIM_NESTED_SHARED_ID, SIM_NESTED_OP_CARRIES_RUNTIME_ID, SIM_NESTED_OP_CARRIES_DRIVER_ID}) {
    SCOPED_TRACE(static_cast<int>(ids));
    ResetAll(1);
    Attach();
    ASSERT_EQ(C().cuptiEnableDomain(1, sub_, CUPTI_CB_DOMAIN_DRIVER_API), CUPTI_SUCCESS);
    simSetNestedIds(ids);
    simSetLaunchCost(4 * kUs);
    simSetLaunchLatency(5 * kUs);
    simStream_t s = simStreamCreate(0);
    const uint64_t calls = simLaunchCalls();
    const uint64_t t0 = simNow();
    ASSERT_EQ(simLaunchKernelNested(s, "nested_k", 50 * kUs, 2 * kUs, 200 * kUs), SIM_OK);
    EXPECT_EQ(simNow(), t0 + 206 * kUs) << "runtime returns 200 us after the driver call";
    EXPECT_EQ(simLaunchCalls(), calls + 1);
    ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
    ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
    C().cuptiUnsubscribe(sub_);

    auto rt = Records(CUPTI_ACTIVITY_KIND_RUNTIME);
    auto drv = Records(CUPTI_ACTIVITY_KIND_DRIVER);
    auto kernels = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    const CUpti_ActivityAPI* r = nullptr;
    for (auto& x : rt) {
      if (x.as<CUpti_ActivityAPI>().cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
        r = &x.as<CUpti_ActivityAPI>();
    }
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(drv.size(), 1u);
    ASSERT_EQ(kernels.size(), 1u);
    const auto& d = drv[0].as<CUpti_ActivityAPI>();
    const auto& k = kernels[0].as<CUpti_ActivityKernel10>();
    EXPECT_EQ(d.cbid, static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
    EXPECT_EQ(r->start, t0);
    EXPECT_EQ(r->end, t0 + 206 * kUs);
    EXPECT_EQ(d.start, t0 + 2 * kUs);
    EXPECT_EQ(d.end, t0 + 6 * kUs);
    EXPECT_EQ(d.threadId, r->threadId);
    EXPECT_EQ(k.start, d.start + 5 * kUs) << "submitted by the driver call";
    if (ids == SIM_NESTED_SHARED_ID) {
      EXPECT_EQ(d.correlationId, r->correlationId);
      EXPECT_EQ(k.correlationId, r->correlationId);
    } else {
      EXPECT_NE(d.correlationId, r->correlationId);
      EXPECT_EQ(k.correlationId,
                ids == SIM_NESTED_OP_CARRIES_RUNTIME_ID ? r->correlationId : d.correlationId);
    }
    // Callbacks: runtime ENTER, driver ENTER, driver EXIT, runtime EXIT.
    std::vector<CallbackEvent> api;
    {
      std::lock_guard<std::mutex> lock(g.mu);
      for (const auto& c : g.callbacks) {
        if (c.site >= 0 && (c.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 ||
                            c.domain == CUPTI_CB_DOMAIN_DRIVER_API))
          api.push_back(c);
      }
    }
    ASSERT_EQ(api.size(), 4u);
    EXPECT_EQ(api[0].domain, CUPTI_CB_DOMAIN_RUNTIME_API);
    EXPECT_EQ(api[0].site, CUPTI_API_ENTER);
    EXPECT_EQ(api[1].domain, CUPTI_CB_DOMAIN_DRIVER_API);
    EXPECT_EQ(api[1].site, CUPTI_API_ENTER);
    EXPECT_EQ(api[1].function, "cuLaunchKernel");
    EXPECT_EQ(api[2].domain, CUPTI_CB_DOMAIN_DRIVER_API);
    EXPECT_EQ(api[2].site, CUPTI_API_EXIT);
    EXPECT_EQ(api[3].domain, CUPTI_CB_DOMAIN_RUNTIME_API);
    EXPECT_EQ(api[3].site, CUPTI_API_EXIT);
    EXPECT_EQ(api[0].correlation_id, r->correlationId);
    EXPECT_EQ(api[1].correlation_id, d.correlationId);
  }
}

TEST_F(SimTest, ResourceCallbacksAndContextIds) {
  Attach();
  simShutdown();
  ASSERT_EQ(simInit(2), SIM_OK);
  simStream_t s = simStreamCreate(1);
  ASSERT_NE(s, nullptr);
  std::vector<CallbackEvent> cbs;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    cbs = g.callbacks;
  }
  int created = 0, destroyed = 0, streams = 0;
  for (auto& c : cbs) {
    if (c.domain != CUPTI_CB_DOMAIN_RESOURCE) continue;
    created += c.cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED;
    destroyed += c.cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING;
    streams += c.cbid == CUPTI_CBID_RESOURCE_STREAM_CREATED;
  }
  EXPECT_EQ(destroyed, 2);
  EXPECT_EQ(created, 2);
  EXPECT_EQ(streams, 1);
}

TEST_F(SimTest, GraphKernelsCarryGraphIdsAndLaunchCorrelation) {
  Attach();
  simStream_t s = simStreamCreate(0);
  simGraph_t graph = simGraphCreate();
  for (int i = 0; i < 6; ++i) ASSERT_EQ(simGraphAddKernel(graph, "graph_node", 50 * kUs), SIM_OK);
  ASSERT_EQ(simGraphLaunch(s, graph), SIM_OK);
  ASSERT_EQ(simGraphLaunch(s, graph), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  std::map<uint32_t, int> launch_corr;
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_RUNTIME)) {
    const auto& a = r.as<CUpti_ActivityAPI>();
    if (a.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000) launch_corr[a.correlationId] = 0;
  }
  ASSERT_EQ(launch_corr.size(), 2u);
  std::set<uint64_t> nodes;
  auto kernels = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ASSERT_EQ(kernels.size(), 12u);
  for (auto& r : kernels) {
    const auto& k = r.as<CUpti_ActivityKernel10>();
    EXPECT_EQ(k.graphId, simGraphId(graph));
    EXPECT_NE(k.graphNodeId, 0u);
    nodes.insert(k.graphNodeId);
    ASSERT_EQ(launch_corr.count(k.correlationId), 1u);
    ++launch_corr[k.correlationId];
  }
  EXPECT_EQ(nodes.size(), 6u);
  for (auto& [corr, n] : launch_corr) EXPECT_EQ(n, 6) << corr;
}

TEST_F(SimTest, ExternalCorrelationPrecedesApiRecord) {
  Attach();
  simStream_t s = simStreamCreate(0);
  ASSERT_EQ(C().cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 42),
            CUPTI_SUCCESS);
  ASSERT_EQ(simLaunchKernel(s, "ext", kUs), SIM_OK);
  uint64_t last = 0;
  ASSERT_EQ(
      C().cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
      CUPTI_SUCCESS);
  EXPECT_EQ(last, 42u);
  EXPECT_EQ(
      C().cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
      CUPTI_ERROR_QUEUE_EMPTY);
  ASSERT_EQ(simLaunchKernel(s, "no_ext", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  auto ext = Records(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  ASSERT_EQ(ext.size(), 1u);
  const auto& e = ext[0].as<CUpti_ActivityExternalCorrelation>();
  EXPECT_EQ(e.externalId, 42u);
  EXPECT_EQ(e.externalKind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
  bool found = false;
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
    const auto& k = r.as<CUpti_ActivityKernel10>();
    if (std::strcmp(k.name, "ext") == 0) {
      EXPECT_EQ(k.correlationId, e.correlationId);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(SimTest, RuntimeApiFilterPerCbid) {
  Attach();
  ASSERT_EQ(C().cuptiActivityEnableRuntimeApi(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0),
            CUPTI_SUCCESS);
  simStream_t s = simStreamCreate(0);
  ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_RUNTIME)) {
    EXPECT_NE(r.as<CUpti_ActivityAPI>().cbid,
              static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  }
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 1u);
}

// ---- delivery
// ------------------------------------------------------------------------------------

TEST_F(SimTest, FlushDeliversOnlyCompletedUnlessForced) {
  Attach();
  simStream_t s = simStreamCreate(0);
  ASSERT_EQ(simLaunchKernel(s, "long", 10 * 1000 * kUs), SIM_OK);  // 10 ms, host not waiting
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 0u) << "kernel not finished yet";
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_RUNTIME).size(), 2u)
      << "stream-create and launch APIs are complete";
  simHostWork(20 * 1000 * kUs);  // the host moves past the kernel's end: now it is complete
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 1u);

  ASSERT_EQ(simLaunchKernel(s, "unfinished", 10 * 1000 * kUs), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), CUPTI_SUCCESS);
  auto ks = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  ASSERT_EQ(ks.size(), 2u);
  for (auto& r : ks) {
    const auto& k = r.as<CUpti_ActivityKernel10>();
    if (std::strcmp(k.name, "unfinished") == 0) {
      EXPECT_EQ(k.start, 0u) << "forced flush of an incomplete record: invalid (0) timestamps";
      EXPECT_EQ(k.end, 0u);
    } else {
      EXPECT_NE(k.start, 0u);
    }
  }
}

TEST_F(SimTest, LateRecordsArriveWithinTwoFlushes) {
  setenv("GPUACCT_SIM_DELAY_PCT", "100", 1);
  ResetAll();
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(simLaunchKernel(s, "late", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 0u)
      << "all delayed by >= 1 flush";
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 10u);
}

TEST_F(SimTest, BuffersRespectMaxNumRecordsAndFillUp) {
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.max_records = 3;
  }
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  std::map<size_t, int> per_buffer;
  for (auto& r : Records()) ++per_buffer[r.buffer_index];
  for (auto& [b, n] : per_buffer) EXPECT_LE(n, 3) << "buffer " << b;
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 10u);

  // Small buffers without any flush: full buffers come back on their own (CUPTI's thread).
  ResetAll();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.buffer_size = 4096;
  }
  Attach();
  s = simStreamCreate(0);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 3000; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
    ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  }
  for (int i = 0; i < 3000; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 0u);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 12000u);
}

TEST_F(SimTest, PeriodicFlushDeliversFromSimThread) {
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.buffer_size = 2048;
  }
  Attach();
  ASSERT_EQ(C().cuptiActivityFlushPeriod(5), CUPTI_SUCCESS);
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size() < 150 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Only full buffers come back periodically; the partly filled one waits for FlushAll.
  const size_t periodic = Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size();
  EXPECT_GE(periodic, 150u);
  ASSERT_EQ(C().cuptiActivityFlushPeriod(0), CUPTI_SUCCESS);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 200u);
}

std::vector<std::string> DeliveryTrace(uint64_t base) {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(g.mu);
  for (const Rec& r : g.records) {
    std::ostringstream os;
    os << r.kind << ":" << r.buffer_index << ":";
    if (r.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto& k = r.as<CUpti_ActivityKernel10>();
      os << k.correlationId << ":" << k.start - base << ":" << k.streamId;
    } else if (r.kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const auto& a = r.as<CUpti_ActivityAPI>();
      os << a.correlationId << ":" << a.start - base << ":" << a.cbid;
    }
    out.push_back(os.str());
  }
  return out;
}

std::vector<std::string> RunSeeded(SimTest* t, const char* seed, uint64_t* unsorted) {
  setenv("GPUACCT_SIM_SEED", seed, 1);
  setenv("GPUACCT_SIM_DELAY_PCT", "20", 1);
  simReset();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.records.clear();
    g.completed = 0;
    g.buffer_size = 8192;
  }
  EXPECT_EQ(simInit(1), SIM_OK);
  const uint64_t base = simNow();
  CUpti_SubscriberHandle sub;
  EXPECT_EQ(C().cuptiSubscribe(&sub, OnCallback, nullptr), CUPTI_SUCCESS);
  EXPECT_EQ(C().cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted), CUPTI_SUCCESS);
  for (CUpti_ActivityKind k : kWantedKinds) EXPECT_EQ(C().cuptiActivityEnable(k), CUPTI_SUCCESS);
  simStream_t a = simStreamCreate(0), b = simStreamCreate(0);
  for (int step = 0; step < 5; ++step) {
    for (int i = 0; i < 40; ++i) {
      simLaunchKernel(a, "a", 30 * kUs);
      simLaunchKernel(b, "b", 7 * kUs);
    }
    simDeviceSynchronize(0);
    C().cuptiActivityFlushAll(0);
  }
  C().cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  (void)t;
  auto trace = DeliveryTrace(base);
  // Count inversions of GPU start time among kernel records in delivery order.
  uint64_t inv = 0, last = 0;
  std::lock_guard<std::mutex> lock(g.mu);
  for (const Rec& r : g.records) {
    if (r.kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const uint64_t st = r.as<CUpti_ActivityKernel10>().start;
    if (st < last) ++inv;
    last = st;
  }
  *unsorted = inv;
  return trace;
}

TEST_F(SimTest, DeliveryIsMessyButDeterministicPerSeed) {
  uint64_t inv1 = 0, inv2 = 0, inv3 = 0;
  auto t1 = RunSeeded(this, "7", &inv1);
  auto t2 = RunSeeded(this, "7", &inv2);
  auto t3 = RunSeeded(this, "8", &inv3);
  ASSERT_EQ(t1.size(), t2.size());
  EXPECT_EQ(t1, t2) << "same seed, same delivery";
  EXPECT_NE(t1, t3) << "another seed, another delivery order";
  EXPECT_GT(inv1, 0u) << "delivery must not be globally sorted";
  size_t kernels = 0;
  for (auto& s : t1) kernels += s.rfind("10:", 0) == 0;
  EXPECT_EQ(kernels, 400u);
}

// ---- faults
// ----------------------------------------------------------------------------------------

TEST_F(SimTest, FaultDropCountsDroppedRecords) {
  setenv("GPUACCT_SIM_FAULTS", "drop=5", 1);
  ResetAll();
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  // 10 x (API + kernel) + 1 stream-create API + sync API + sync record = 23 produced.
  EXPECT_EQ(Records().size(), 23u - 5u);
  size_t dropped = 0;
  ASSERT_EQ(C().cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 5u);
  ASSERT_EQ(C().cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 0u) << "reset on read";
}

TEST_F(SimTest, ClientRefusingBuffersLosesRecordsWithoutCrash) {
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.refuse = true;
  }
  Attach();
  simStream_t s = simStreamCreate(0);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records().size(), 0u);
  size_t dropped = 0;
  ASSERT_EQ(C().cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 20003u);
  // The client accepts buffers again: new records flow.
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.refuse = false;
  }
  ASSERT_EQ(simLaunchKernel(s, "after", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 1u);
}

TEST_F(SimTest, FaultBufferRefusedReturnsBufferEmpty) {
  setenv("GPUACCT_SIM_FAULTS", "buffer_refused=1", 1);
  ResetAll();
  Attach();
  simStream_t s = simStreamCreate(0);
  ASSERT_EQ(simLaunchKernel(s, "lost", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  {
    std::lock_guard<std::mutex> lock(g.mu);
    EXPECT_EQ(g.empty_completed, 1u) << "refused buffer handed back empty (no leak)";
  }
  size_t dropped = 0;
  ASSERT_EQ(C().cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), CUPTI_SUCCESS);
  EXPECT_EQ(dropped, 5u);  // stream-create API, launch API, kernel, sync API, sync record
  ASSERT_EQ(simLaunchKernel(s, "kept", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 1u);
}

TEST_F(SimTest, FaultSubscribeRefused) {
  setenv("GPUACCT_SIM_FAULTS", "subscribe_refused", 1);
  ResetAll();
  CUpti_SubscriberHandle sub = nullptr;
  EXPECT_EQ(C().cuptiSubscribe(&sub, OnCallback, nullptr),
            CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  CUpti_SubscriberParams p{};
  p.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  p.subscriberName = "gpuacct";
  p.oldSubscriberName = old;
  p.oldSubscriberSize = sizeof(old);
  EXPECT_EQ(C().cuptiSubscribe_v2(&sub, OnCallback, nullptr, &p),
            CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_GT(std::strlen(old), 0u);
  const char* str = nullptr;
  EXPECT_EQ(C().cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &str),
            CUPTI_SUCCESS);
  EXPECT_STREQ(str, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");

  // Without the fault, the second subscriber is refused the same way.
  unsetenv("GPUACCT_SIM_FAULTS");
  ResetAll();
  ASSERT_EQ(C().cuptiSubscribe(&sub, OnCallback, nullptr), CUPTI_SUCCESS);
  CUpti_SubscriberHandle second = nullptr;
  EXPECT_EQ(C().cuptiSubscribe(&second, OnCallback, nullptr),
            CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  EXPECT_EQ(C().cuptiUnsubscribe(sub), CUPTI_SUCCESS);
  EXPECT_EQ(C().cuptiUnsubscribe(sub), CUPTI_ERROR_INVALID_PARAMETER);
}

TEST_F(SimTest, FaultErrorFunction) {
  setenv("GPUACCT_SIM_FAULTS", "error:cuptiActivityEnable, error:cuptiActivityFlushPeriod", 1);
  ResetAll();
  EXPECT_EQ(C().cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_ERROR_UNKNOWN);
  EXPECT_EQ(C().cuptiActivityFlushPeriod(10), CUPTI_ERROR_UNKNOWN);
  EXPECT_EQ(C().cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), CUPTI_SUCCESS);
  uint32_t v = 0;
  EXPECT_EQ(C().cuptiGetVersion(&v), CUPTI_SUCCESS);
  EXPECT_EQ(v, 130001u);
}

TEST_F(SimTest, MisuseDoesNotCrash) {
  EXPECT_EQ(C().cuptiActivityFlushAll(0), CUPTI_ERROR_INVALID_OPERATION);  // no callbacks yet
  EXPECT_EQ(C().cuptiActivityRegisterCallbacks(nullptr, nullptr), CUPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(C().cuptiActivityEnable(static_cast<CUpti_ActivityKind>(100000)),
            CUPTI_ERROR_INVALID_KIND);
  CUpti_Activity* rec = nullptr;
  EXPECT_EQ(C().cuptiActivityGetNextRecord(nullptr, 0, &rec), CUPTI_ERROR_INVALID_PARAMETER);
  uint8_t empty[16] = {};
  EXPECT_EQ(C().cuptiActivityGetNextRecord(empty, 0, &rec), CUPTI_ERROR_MAX_LIMIT_REACHED);
  EXPECT_EQ(C().cuptiEnableCallback(1, nullptr, CUPTI_CB_DOMAIN_RUNTIME_API, 1),
            CUPTI_ERROR_INVALID_PARAMETER);
  EXPECT_EQ(simLaunchKernel(nullptr, "x", 1), SIM_ERR_INVALID);
  EXPECT_EQ(simLaunchKernel(reinterpret_cast<simStream_t>(&g), "x", 1), SIM_ERR_INVALID);
  EXPECT_EQ(simGraphLaunch(simStreamCreate(0), reinterpret_cast<simGraph_t>(&g)), SIM_ERR_INVALID);
  uint32_t id = 0;
  EXPECT_EQ(C().cuptiGetContextId(reinterpret_cast<CUcontext>(&g), &id),
            CUPTI_ERROR_INVALID_CONTEXT);
  size_t sz = sizeof(size_t), val = 8 << 20;
  EXPECT_EQ(C().cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &val),
            CUPTI_SUCCESS);
  val = 0;
  EXPECT_EQ(C().cuptiActivityGetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &val),
            CUPTI_SUCCESS);
  EXPECT_EQ(val, 8u << 20);
  simShutdown();
  EXPECT_EQ(simLaunchKernel(simStreamCreate(0), "x", 1), SIM_ERR_INVALID);
}

TEST_F(SimTest, FinalizeDeliversAndDetaches) {
  Attach();
  simStream_t s = simStreamCreate(0);
  ASSERT_EQ(simLaunchKernel(s, "k", kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiFinalize(), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 1u);
  const size_t before = Records().size();
  ASSERT_EQ(simLaunchKernel(s, "after_finalize", kUs), SIM_OK);
  EXPECT_EQ(Records().size(), before);
  // Re-attach works (lazy re-init in real CUPTI).
  CUpti_SubscriberHandle sub;
  EXPECT_EQ(C().cuptiSubscribe(&sub, OnCallback, nullptr), CUPTI_SUCCESS);
}

// ---- clock
// ------------------------------------------------------------------------------------------

TEST_F(SimTest, ClockModes) {
  const uint64_t a = simNow();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(simNow(), a) << "virtual clock moves only through sim calls";
  simHostWork(1234);
  EXPECT_EQ(simNow(), a + 1234);
  uint64_t ts = 0;
  ASSERT_EQ(C().cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
  EXPECT_EQ(ts, a + 1234);

  setenv("GPUACCT_SIM_CLOCK", "hybrid", 1);
  ResetAll();
  EXPECT_EQ(simGetClockMode(), SIM_CLOCK_HYBRID);
  const uint64_t b = simNow();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  simHostWork(1000 * 1000 * 1000ull);
  EXPECT_GE(simNow(), b + 20 * 1000 * 1000ull + 1000 * 1000 * 1000ull);
}

// The sim clock is the process's CLOCK_REALTIME (the library interposes clock_gettime); the
// other clocks are the real ones.
TEST_F(SimTest, HostRealtimeIsTheSimClock) {
  auto read = [](clockid_t c) {
    timespec ts{};
    clock_gettime(c, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  };
  const uint64_t a = read(CLOCK_REALTIME);
  EXPECT_EQ(a, simNow());
  const uint64_t m = read(CLOCK_MONOTONIC);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(read(CLOCK_REALTIME), a) << "virtual: real time passing does not move it";
  EXPECT_GE(read(CLOCK_MONOTONIC), m + 5 * 1000 * 1000ull) << "CLOCK_MONOTONIC is real";
  simHostWork(1234);
  EXPECT_EQ(read(CLOCK_REALTIME), a + 1234);
}

uint64_t g_client_clock_shift = 0;
uint64_t CUPTIAPI ClientClock() {
  return simNow() - g_client_clock_shift;
}

// CUPTI on another clock than the host's (GPUACCT_SIM_CUPTI_CLOCK), and a client timestamp
// callback taking over: records and cuptiGetTimestamp follow the clock in force when made.
TEST_F(SimTest, CuptiClockAndTimestampCallback) {
  setenv("GPUACCT_SIM_CUPTI_CLOCK", "offset:1000000", 1);
  ResetAll(1);
  Attach();
  uint64_t ts = 0;
  ASSERT_EQ(C().cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
  EXPECT_EQ(ts, simNow() + 1000000);
  simStream_t s = simStreamCreate(0);
  const uint64_t t0 = simNow();
  ASSERT_EQ(simLaunchKernel(s, "clocked", 10 * kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  g_client_clock_shift = 777;
  ASSERT_EQ(C().cuptiActivityRegisterTimestampCallback(nullptr), CUPTI_ERROR_INVALID_PARAMETER);
  ASSERT_EQ(C().cuptiActivityRegisterTimestampCallback(ClientClock), CUPTI_SUCCESS);
  ASSERT_EQ(C().cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
  EXPECT_EQ(ts, simNow() - 777);
  const uint64_t t1 = simNow();
  ASSERT_EQ(simLaunchKernel(s, "clocked", 10 * kUs), SIM_OK);
  ASSERT_EQ(simStreamSynchronize(s), SIM_OK);
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  std::map<uint64_t, uint64_t> api_start_by_corr;
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_RUNTIME)) {
    const auto& a = r.as<CUpti_ActivityAPI>();
    if (a.cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
      api_start_by_corr[a.correlationId] = a.start;
  }
  ASSERT_EQ(api_start_by_corr.size(), 2u);
  EXPECT_EQ(api_start_by_corr.begin()->second, t0 + 1000000) << "before: the offset clock";
  EXPECT_EQ(api_start_by_corr.rbegin()->second, t1 - 777) << "after: the client's clock";
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
    const auto& k = r.as<CUpti_ActivityKernel10>();
    const uint64_t api = api_start_by_corr[k.correlationId];
    EXPECT_EQ(k.start - api, 5 * kUs) << "GPU and API times move together";
  }
  C().cuptiUnsubscribe(sub_);

  setenv("GPUACCT_SIM_CUPTI_CLOCK", "monotonic", 1);
  ResetAll(1);
  timespec m{};
  clock_gettime(CLOCK_MONOTONIC, &m);
  ASSERT_EQ(C().cuptiGetTimestamp(&ts), CUPTI_SUCCESS);
  const uint64_t mono =
      static_cast<uint64_t>(m.tv_sec) * 1000000000ull + static_cast<uint64_t>(m.tv_nsec);
  EXPECT_LT(ts > mono ? ts - mono : mono - ts, 1000000000ull) << "CLOCK_MONOTONIC's reading";
  EXPECT_GT(simNow() > ts ? simNow() - ts : ts - simNow(), 1000000000ull) << "not the host's";
}

TEST_F(SimTest, DeviceQueries) {
  size_t bytes = 0;
  ASSERT_EQ(cuDeviceTotalMem(&bytes, 0), CUDA_SUCCESS);
  EXPECT_EQ(bytes, 80ull << 30);
  EXPECT_EQ(simDeviceMemory(), 80ull << 30);
  EXPECT_EQ(cuDeviceTotalMem(&bytes, 7), CUDA_ERROR_INVALID_DEVICE);
  int v = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), CUDA_SUCCESS);
  EXPECT_EQ(v, 132);
  setenv("GPUACCT_SIM_DEVICE_MEMORY", "1234", 1);
  ResetAll(1);
  ASSERT_EQ(cuDeviceTotalMem(&bytes, 0), CUDA_SUCCESS);
  EXPECT_EQ(bytes, 1234u);
}

// simLaunchCalls: what a profiler should count as launches -- one per call, whatever it runs.
TEST_F(SimTest, LaunchCallsCountEachLaunchOnce) {
  simStream_t s = simStreamCreate(0);
  simGraph_t graph = simGraphCreate();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(simGraphAddKernel(graph, "g", kUs), SIM_OK);
  const uint64_t before = simLaunchCalls();
  ASSERT_EQ(simLaunchKernel(s, "a", kUs), SIM_OK);
  ASSERT_EQ(simCuLaunchKernel(s, "b", kUs), SIM_OK);
  ASSERT_EQ(simNcclAllReduce(s, kUs), SIM_OK);
  ASSERT_EQ(simGraphLaunch(s, graph), SIM_OK);
  ASSERT_EQ(simLaunchKernelNested(s, "c", kUs, kUs, kUs), SIM_OK);
  ASSERT_EQ(simMemsetAsync(s, 64, kUs), SIM_OK);
  EXPECT_EQ(simLaunchCalls() - before, 5u);
}

TEST_F(SimTest, ThreadsLaunchConcurrently) {
  Attach();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      simStream_t s = simStreamCreate(0);
      for (int i = 0; i < 500; ++i) simLaunchKernel(s, "mt", 2 * kUs);
      simStreamSynchronize(s);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(C().cuptiActivityFlushAll(0), CUPTI_SUCCESS);
  EXPECT_EQ(Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).size(), 2000u);
  std::set<uint32_t> tids;
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_RUNTIME))
    tids.insert(r.as<CUpti_ActivityAPI>().threadId);
  EXPECT_EQ(tids.size(), 4u);
  std::set<uint32_t> corr;
  for (auto& r : Records(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {
    corr.insert(r.as<CUpti_ActivityKernel10>().correlationId);
  }
  EXPECT_EQ(corr.size(), 2000u) << "correlation ids are unique across threads";
}

// ---- scenarios
// --------------------------------------------------------------------------------------

struct RunResult {
  int status = -1;
  std::string truth;
};

RunResult RunScenario(const std::string& name, const std::string& args) {
  const std::string truth = testing::TempDir() + "sim_truth_" + name + ".json";
  std::remove(truth.c_str());
  // No injection here: gpuacct_dyn() and NVTX calls become no-ops; the run checks the planted
  // timeline against the engine (exit status 3 on a mismatch) and writes the truth file.
  const std::string cmd =
      "env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH GPUACCT_SIM_TRUTH=" + truth + " " +
      SIM_BIN_DIR + "/sim_scenario_" + name + " " + args;
  RunResult r;
  const int st = std::system(cmd.c_str());
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream in(truth);
  std::stringstream ss;
  ss << in.rdbuf();
  r.truth = ss.str();
  return r;
}

class ScenarioTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ScenarioTest, PlantedTruthMatchesEngine) {
  const std::string name = GetParam();
  for (const char* marks : {"--marks=capi", "--marks=nvtx", "--marks=none"}) {
    const bool big = name == "million";
    if (big && std::strcmp(marks, "--marks=capi") != 0) continue;
    RunResult r = RunScenario(name, std::string(marks) + (big ? "" : " --steps=5"));
    ASSERT_EQ(r.status, 0) << name << " " << marks;
    EXPECT_NE(r.truth.find("\"schema\": \"gpuacct-sim-truth/1\""), std::string::npos) << r.truth;
    EXPECT_NE(r.truth.find("\"scenario\": \"" + name + "\""), std::string::npos);
    EXPECT_NE(r.truth.find(big ? "\"num_steps\": 100" : "\"num_steps\": 5"), std::string::npos);
    EXPECT_NE(r.truth.find("\"exact\": true"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ScenarioTest,
                         ::testing::Values("data_bound", "launch_bound", "comm_bound", "copy_bound",
                                           "balanced", "graphs", "multithread", "million",
                                           "nested_launch", "early_init"));

TEST(ScenarioTruth, DataBoundNumbers) {
  RunResult r = RunScenario("data_bound", "--marks=none --steps=3");
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.truth.find("\"dominant\": \"data_wait\""), std::string::npos);
  EXPECT_NE(r.truth.find(
                "\"expected_ns\": {\"compute\": 10000000, \"communication_exposed\": 0, "
                "\"copy\": 0, \"data_wait\": 30000000, \"launch_gap\": 5000, \"host_other\": 0}"),
            std::string::npos)
      << r.truth;
}

}  // namespace

// ---- end to end: scenario process + injected client + fake CUPTI found by soname --------------

namespace {

std::string RunInjected(const std::string& scenario, const std::string& args,
                        const std::string& env) {
  const std::string out = testing::TempDir() + "sim_e2e_" + scenario + ".txt";
  std::remove(out.c_str());
  const std::string cmd = "env LD_LIBRARY_PATH=" + std::string(SIM_LIB_DIR) +
                          " CUDA_INJECTION64_PATH=" + SIM_TEST_INJECT_PATH +
                          " SIM_TEST_INJECT_OUT=" + out + " " + env + " " + SIM_BIN_DIR +
                          "/sim_scenario_" + scenario + " " + args;
  const int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(EndToEnd, InjectedClientSeesScenarioThroughFakeCupti) {
  const std::string s = RunInjected("data_bound", "--marks=capi --steps=4", "");
  EXPECT_NE(s.find("subscribe=0 version=130001 kernels=40 kernel_ns=40000000 "), std::string::npos)
      << s;
  EXPECT_NE(s.find("steps=4 data=4 dropped=0"), std::string::npos) << s;
  const std::string g2 = RunInjected("graphs", "--marks=capi --steps=3", "");
  EXPECT_NE(g2.find("kernels=120 "), std::string::npos) << g2;
  EXPECT_NE(g2.find("graph_kernels=120 "), std::string::npos) << g2;
}

TEST(EndToEnd, SubscribeRefusedAndDropFaultsReachTheClient) {
  const std::string s =
      RunInjected("comm_bound", "--marks=capi --steps=2", "GPUACCT_SIM_FAULTS=subscribe_refused");
  EXPECT_NE(s.find("subscribe=39 "), std::string::npos) << s;
  EXPECT_NE(s.find("kernels=0 "), std::string::npos) << s;
  EXPECT_NE(s.find("steps=2"), std::string::npos) << "marks still reach the library: " << s;
  const std::string d =
      RunInjected("launch_bound", "--marks=capi --steps=1", "GPUACCT_SIM_FAULTS=drop=100");
  EXPECT_NE(d.find("dropped=100"), std::string::npos) << d;
}

}  // namespace
