// The overhead floor for tests/gpu/check.sh: the least a CUPTI activity tracer can do to see the
// same GPU work as libgpuacct.so -- the same activity kinds and the same runtime / driver API
// records (cupti_hooks/api_table.cc, linked in), no callbacks, no analysis at all.  Injected like
// libgpuacct.so (CUDA_INJECTION64_PATH); buffers are counted and recycled, the total is printed at
// exit.  Written for this project (no sample code).
#include <cupti.h>

#include "cupti_hooks/api_table.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr size_t kBufferBytes = 4u << 20;
std::atomic<unsigned long long> g_records{0};

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  unsigned long long n = 0;
  while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) ++n;
  g_records.fetch_add(n);
  std::free(buffer);
}

void at_exit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::fprintf(stderr, "bare_cupti_tracer: %llu records\n", g_records.load());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> once{false};
  if (once.exchange(true)) return 1;
  if (cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS) return 1;
  // gpuacct's kinds (cupti_hooks/collector.cc, enable_activity).
  const CUpti_ActivityKind kinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
      CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION};
  for (CUpti_ActivityKind k : kinds) cuptiActivityEnable(k);
  // ... and API records of the calls gpuacct traces only, as it does.
  size_t n = 0;
  const gpuacct::cupti::TracedApi* apis = gpuacct::cupti::traced_apis(&n);
  for (size_t i = 0; i < n; ++i) {
    if (apis[i].domain == gpuacct::cupti::ApiDomain::kRuntime) {
      cuptiActivityEnableRuntimeApi(apis[i].cbid, 1);
    } else {
      cuptiActivityEnableDriverApi(apis[i].cbid, 1);
    }
  }
  std::atexit(at_exit);
  return 1;
}
