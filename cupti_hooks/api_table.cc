#include "cupti_hooks/api_table.h"

#include <cupti.h>

#include <array>

namespace gpuacct::cupti {
namespace {

constexpr std::string_view strip_version(std::string_view s) {
  // "cudaLaunchKernel_v7000" -> "cudaLaunchKernel"; "cuMemcpyHtoD_v2" -> "cuMemcpyHtoD";
  // "cudaMemcpyAsync_ptsz_v7000" -> "cudaMemcpyAsync_ptsz".
  const size_t u = s.rfind("_v");
  if (u != std::string_view::npos && u + 2 < s.size()) {
    bool digits = true;
    for (size_t i = u + 2; i < s.size(); ++i) digits = digits && s[i] >= '0' && s[i] <= '9';
    if (digits) return s.substr(0, u);
  }
  return s;
}

#define RT(name, kind)                                                                            \
  TracedApi {                                                                                     \
    ApiDomain::kRuntime, CUPTI_RUNTIME_TRACE_CBID_##name, HostApiKind::kind, strip_version(#name) \
  }
#define DRV(name, kind)                                                                         \
  TracedApi {                                                                                   \
    ApiDomain::kDriver, CUPTI_DRIVER_TRACE_CBID_##name, HostApiKind::kind, strip_version(#name) \
  }

constexpr TracedApi kApis[] = {
    // Launches (graph launches included: their kernels share the launch's correlation id).
    RT(cudaLaunchKernel_v7000, kLaunch),
    RT(cudaLaunchKernel_ptsz_v7000, kLaunch),
    RT(__cudaLaunchKernel_v13000, kLaunch),
    RT(__cudaLaunchKernel_ptsz_v13000, kLaunch),
    RT(cudaLaunchKernelExC_v11060, kLaunch),
    RT(cudaLaunchKernelExC_ptsz_v11060, kLaunch),
    RT(cudaLaunchCooperativeKernel_v9000, kLaunch),
    RT(cudaLaunchCooperativeKernel_ptsz_v9000, kLaunch),
    RT(cudaLaunchCooperativeKernelMultiDevice_v9000, kLaunch),
    RT(cudaGraphLaunch_v10000, kLaunch),
    RT(cudaGraphLaunch_ptsz_v10000, kLaunch),
    // Copies and memsets.
    RT(cudaMemcpy_v3020, kCopy),
    RT(cudaMemcpy_ptds_v7000, kCopy),
    RT(cudaMemcpyAsync_v3020, kCopy),
    RT(cudaMemcpyAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpy2D_v3020, kCopy),
    RT(cudaMemcpy2D_ptds_v7000, kCopy),
    RT(cudaMemcpy2DAsync_v3020, kCopy),
    RT(cudaMemcpy2DAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpy3D_v3020, kCopy),
    RT(cudaMemcpy3DAsync_v3020, kCopy),
    RT(cudaMemcpyPeer_v4000, kCopy),
    RT(cudaMemcpyPeerAsync_v4000, kCopy),
    RT(cudaMemcpyToSymbol_v3020, kCopy),
    RT(cudaMemcpyFromSymbol_v3020, kCopy),
    RT(cudaMemcpyToSymbolAsync_v3020, kCopy),
    RT(cudaMemcpyFromSymbolAsync_v3020, kCopy),
    RT(cudaMemcpyBatchAsync_v12080, kCopy),
    RT(cudaMemcpyBatchAsync_ptsz_v12080, kCopy),
    RT(cudaMemcpyBatchAsync_v13000, kCopy),
    RT(cudaMemcpyBatchAsync_ptsz_v13000, kCopy),
    RT(cudaMemset_v3020, kCopy),
    RT(cudaMemset_ptds_v7000, kCopy),
    RT(cudaMemsetAsync_v3020, kCopy),
    RT(cudaMemsetAsync_ptsz_v7000, kCopy),
    RT(cudaMemset2D_v3020, kCopy),
    RT(cudaMemset2DAsync_v3020, kCopy),
    // Blocking synchronisation.
    RT(cudaDeviceSynchronize_v3020, kSync),
    RT(cudaThreadSynchronize_v3020, kSync),
    RT(cudaStreamSynchronize_v3020, kSync),
    RT(cudaStreamSynchronize_ptsz_v7000, kSync),
    RT(cudaEventSynchronize_v3020, kSync),

    // Driver API: what NCCL, Triton and other runtime-less launchers call.  A runtime call is
    // implemented with driver calls, and with both domains traced CUPTI can report the driver
    // call too: on the same thread, inside the runtime call, with the runtime call's correlation
    // id or its own (the op carries one of the two; CUpti_ActivityKernel10.correlationId names
    // "the driver or runtime API activity record", CUpti_ActivityMemcpy6 has both ids).  The
    // accountant counts such a nest as one call (docs/accounting.md, "Nested calls"); the
    // callback hooks skip the inner call by the thread's nesting depth.  The domain stays on:
    // without it, launches that never pass through the runtime would have no launch call.
    DRV(cuLaunchKernel, kLaunch),
    DRV(cuLaunchKernel_ptsz, kLaunch),
    DRV(cuLaunchKernelEx, kLaunch),
    DRV(cuLaunchKernelEx_ptsz, kLaunch),
    DRV(cuLaunchCooperativeKernel, kLaunch),
    DRV(cuLaunchCooperativeKernel_ptsz, kLaunch),
    DRV(cuGraphLaunch, kLaunch),
    DRV(cuGraphLaunch_ptsz, kLaunch),
    DRV(cuMemcpy, kCopy),
    DRV(cuMemcpy_ptds, kCopy),
    DRV(cuMemcpyAsync, kCopy),
    DRV(cuMemcpyAsync_ptsz, kCopy),
    DRV(cuMemcpyPeer, kCopy),
    DRV(cuMemcpyPeerAsync, kCopy),
    DRV(cuMemcpyHtoD_v2, kCopy),
    DRV(cuMemcpyDtoH_v2, kCopy),
    DRV(cuMemcpyDtoD_v2, kCopy),
    DRV(cuMemcpyHtoDAsync_v2, kCopy),
    DRV(cuMemcpyHtoDAsync_v2_ptsz, kCopy),
    DRV(cuMemcpyDtoHAsync_v2, kCopy),
    DRV(cuMemcpyDtoHAsync_v2_ptsz, kCopy),
    DRV(cuMemcpyDtoDAsync_v2, kCopy),
    DRV(cuMemcpyDtoDAsync_v2_ptsz, kCopy),
    DRV(cuMemcpy2DAsync_v2, kCopy),
    DRV(cuMemcpy3DAsync_v2, kCopy),
    DRV(cuMemcpyBatchAsync, kCopy),
    DRV(cuMemcpyBatchAsync_ptsz, kCopy),
    DRV(cuMemsetD8_v2, kCopy),
    DRV(cuMemsetD32_v2, kCopy),
    DRV(cuMemsetD8Async, kCopy),
    DRV(cuMemsetD8Async_ptsz, kCopy),
    DRV(cuMemsetD16Async, kCopy),
    DRV(cuMemsetD32Async, kCopy),
    DRV(cuMemsetD32Async_ptsz, kCopy),
    DRV(cuCtxSynchronize, kSync),
    DRV(cuCtxSynchronize_v2, kSync),
    DRV(cuStreamSynchronize, kSync),
    DRV(cuStreamSynchronize_ptsz, kSync),
    DRV(cuEventSynchronize, kSync),
};
#undef RT
#undef DRV

constexpr size_t kApiCount = sizeof(kApis) / sizeof(kApis[0]);
constexpr uint32_t kIndexSize = 1024;  // cbids of both domains are below this in CUDA 13.0

struct Index {
  std::array<int16_t, kIndexSize> runtime{};
  std::array<int16_t, kIndexSize> driver{};
  constexpr Index() {
    for (auto& v : runtime) v = -1;
    for (auto& v : driver) v = -1;
    for (size_t i = 0; i < kApiCount; ++i) {
      auto& table = kApis[i].domain == ApiDomain::kRuntime ? runtime : driver;
      if (kApis[i].cbid < kIndexSize) table[kApis[i].cbid] = static_cast<int16_t>(i);
    }
  }
};
constexpr Index kIndex;

static_assert(CUPTI_RUNTIME_TRACE_CBID_SIZE <= kIndexSize);
static_assert(CUPTI_DRIVER_TRACE_CBID_SIZE <= kIndexSize);

}  // namespace

const TracedApi* traced_apis(size_t* count) {
  *count = kApiCount;
  return kApis;
}

const TracedApi* find_traced_api(ApiDomain domain, uint32_t cbid) {
  if (cbid >= kIndexSize) return nullptr;
  const int16_t i = domain == ApiDomain::kRuntime ? kIndex.runtime[cbid] : kIndex.driver[cbid];
  return i < 0 ? nullptr : &kApis[i];
}

}  // namespace gpuacct::cupti
