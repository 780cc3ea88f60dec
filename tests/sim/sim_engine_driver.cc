// The fake driver's own entry points: cuInit, which loads CUDA_INJECTION64_PATH once per process
// as the real driver does, and the few driver queries a client may make (version, devices,
// attributes, memory, current context, error strings).
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "sim_engine_state.h"

using namespace sim_engine;  // NOLINT(build/namespaces): this library's own internals

namespace {

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

}  // namespace

extern "C" {

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

}  // extern "C"
