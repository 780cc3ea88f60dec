// Stand-in injection library for the sim self-tests.
//
// Always: counts InitializeInjection calls (the cuInit test reads the counter by re-opening this
// library with RTLD_NOLOAD, since the driver loads it RTLD_LOCAL).
//
// With SIM_TEST_INJECT_OUT=<file>: behaves like a minimal libgpuacct -- dlopen("libcupti.so.13")
// by name (so LD_LIBRARY_PATH decides which CUPTI is used), subscribe, enable activity, collect
// records; exports the gpuacct_* step / data marks that gpuacct_dynamic.h resolves; at exit
// writes a one-line summary "key=value ..." for the end-to-end test.
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::atomic<int> g_calls{0};

struct Api {
  decltype(&::cuptiSubscribe) subscribe;
  decltype(&::cuptiActivityEnable) enable;
  decltype(&::cuptiActivityRegisterCallbacks) register_callbacks;
  decltype(&::cuptiActivityFlushAll) flush_all;
  decltype(&::cuptiActivityGetNextRecord) next_record;
  decltype(&::cuptiActivityGetNumDroppedRecords) dropped;
  decltype(&::cuptiGetTimestamp) timestamp;
  decltype(&::cuptiGetVersion) version;
};
Api g_api{};
std::mutex g_mu;
const char* g_out = nullptr;
int g_subscribe_rc = -1;
uint32_t g_version = 0;
uint64_t g_kernels = 0, g_kernel_ns = 0, g_api_records = 0, g_graph_kernels = 0;
uint64_t g_steps = 0, g_data_ranges = 0;
bool g_in_step = false;

void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 1 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (g_api.next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      ++g_kernels;
      g_kernel_ns += k->end - k->start;
      if (k->graphId != 0) ++g_graph_kernels;
    } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      ++g_api_records;
    }
  }
  std::free(buffer);
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void AtExit() {
  size_t dropped = 0;
  if (g_api.flush_all != nullptr) {
    g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    g_api.dropped(nullptr, 0, &dropped);
  }
  std::FILE* f = std::fopen(g_out, "w");
  if (f == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(
      f,
      "subscribe=%d version=%u kernels=%llu kernel_ns=%llu api=%llu graph_kernels=%llu "
      "steps=%llu data=%llu dropped=%zu\n",
      g_subscribe_rc, g_version, static_cast<unsigned long long>(g_kernels),
      static_cast<unsigned long long>(g_kernel_ns), static_cast<unsigned long long>(g_api_records),
      static_cast<unsigned long long>(g_graph_kernels), static_cast<unsigned long long>(g_steps),
      static_cast<unsigned long long>(g_data_ranges), dropped);
  std::fclose(f);
}

void StartTracing() {
  void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return;  // "no_cupti": marks still counted, no GPU data
  g_api.subscribe = reinterpret_cast<decltype(g_api.subscribe)>(dlsym(h, "cuptiSubscribe"));
  g_api.enable = reinterpret_cast<decltype(g_api.enable)>(dlsym(h, "cuptiActivityEnable"));
  g_api.register_callbacks = reinterpret_cast<decltype(g_api.register_callbacks)>(
      dlsym(h, "cuptiActivityRegisterCallbacks"));
  g_api.flush_all = reinterpret_cast<decltype(g_api.flush_all)>(dlsym(h, "cuptiActivityFlushAll"));
  g_api.next_record =
      reinterpret_cast<decltype(g_api.next_record)>(dlsym(h, "cuptiActivityGetNextRecord"));
  g_api.dropped =
      reinterpret_cast<decltype(g_api.dropped)>(dlsym(h, "cuptiActivityGetNumDroppedRecords"));
  g_api.timestamp = reinterpret_cast<decltype(g_api.timestamp)>(dlsym(h, "cuptiGetTimestamp"));
  g_api.version = reinterpret_cast<decltype(g_api.version)>(dlsym(h, "cuptiGetVersion"));
  if (g_api.version != nullptr) g_api.version(&g_version);
  CUpti_SubscriberHandle sub = nullptr;
  g_subscribe_rc = g_api.subscribe(&sub, OnCallback, nullptr);
  if (g_subscribe_rc != CUPTI_SUCCESS) {
    g_api.flush_all = nullptr;
    return;
  }
  g_api.register_callbacks(Requested, Completed);
  g_api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  g_api.enable(CUPTI_ACTIVITY_KIND_RUNTIME);
}

}  // namespace

EXPORT int InitializeInjection(void) {
  if (g_calls.fetch_add(1) == 0) {
    g_out = std::getenv("SIM_TEST_INJECT_OUT");
    if (g_out != nullptr && *g_out != '\0') {
      StartTracing();
      std::atexit(AtExit);
    }
  }
  return 1;
}

EXPORT int sim_test_inject_calls(void) {
  return g_calls.load();
}

// The subset of the gpuacct C API the scenarios use (resolved through gpuacct_dynamic.h).
EXPORT void gpuacct_step_begin(int64_t) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_steps;
  g_in_step = true;
}
EXPORT void gpuacct_step_end(void) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_in_step = false;
}
EXPORT void gpuacct_data_push(const char*) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_data_ranges;
}
EXPORT void gpuacct_data_pop(void) {}
EXPORT void gpuacct_flush(void) {
  if (g_api.flush_all != nullptr) g_api.flush_all(0);
}
