// The sim self-tests' CUPTI client: the fake libcupti.so.13 dlopen()ed by path (as libgpuacct does
// by name), buffer and API callbacks that copy everything out, and the SimTest fixture.
#ifndef GPUACCT_TESTS_SIM_SIM_TEST_CLIENT_H_
#define GPUACCT_TESTS_SIM_SIM_TEST_CLIENT_H_

#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim_cuda.h"

namespace sim_test {

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
  SIM_FN(cuptiActivityEnableDriverApi);
  SIM_FN(cuptiGetGraphId);
#undef SIM_FN
};

// The fake CUPTI, dlopen()ed by path once (handle == nullptr when that failed).
Cupti& C();

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
// The client's records and callbacks (one client per process, as with CUPTI).
extern ClientState g;

// The client's CUPTI callbacks: buffers of g.buffer_size (or refused), records copied into
// g.records, callbacks into g.callbacks.
void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid);
void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data);

inline constexpr CUpti_ActivityKind kWantedKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(C().handle, nullptr) << dlerror();
    UnsetSimEnvironment();
    setenv("GPUACCT_SIM_DELAY_PCT", "0", 1);  // tests opt into late records explicitly
    ResetAll();
  }
  // The settings a test made must not reach the tests after it, fixture or not (the EndToEnd
  // tests start scenario processes that inherit the environment; seen with --gtest_shuffle).
  void TearDown() override {
    UnsetSimEnvironment();
    simReset();
  }

  static void UnsetSimEnvironment() {
    for (const char* v : {"GPUACCT_SIM_FAULTS",
                          "GPUACCT_SIM_SEED",
                          "GPUACCT_SIM_DELAY_PCT",
                          "GPUACCT_SIM_SHUFFLE",
                          "GPUACCT_SIM_CLOCK",
                          "GPUACCT_SIM_FORCED_INCOMPLETE",
                          "GPUACCT_SIM_CUPTI_CLOCK",
                          "GPUACCT_SIM_NESTED_IDS",
                          "GPUACCT_SIM_DEVICE_MEMORY",
                          "GPUACCT_SIM_CLOCK_BASE_NS",
                          "GPUACCT_SIM_CLOCK_OFFSET_NS",
                          "GPUACCT_SIM_HOSTNAME",
                          "GPUACCT_SIM_PM_CHIP",
                          "GPUACCT_SIM_PM_REFUSE",
                          "GPUACCT_SIM_PM_DECODE_LAG_NS",
                          "GPUACCT_SIM_PM_RECORD_BYTES",
                          "GPUACCT_SIM_PM_CLOCK_OFFSET_NS",
                          "GPUACCT_SIM_PM_SYSCLK_HZ",
                          "GPUACCT_SIM_PM_TIME_UNIT_NS",
                          "GPUACCT_SIM_PM_FIRST_SAMPLE_FROM",
                          "GPUACCT_SIM_PM_ENABLE_NS",
                          "GPUACCT_SIM_CONTEXTS_BEFORE_INJECTION",
                          "GPUACCT_SIM_HOLD_BUFFERS"}) {
      unsetenv(v);
    }
  }

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

}  // namespace sim_test

#endif  // GPUACCT_TESTS_SIM_SIM_TEST_CLIENT_H_
