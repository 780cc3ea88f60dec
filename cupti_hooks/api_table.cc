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
    // The pre-CUDA 7 launch (cudaConfigureCall + cudaLaunch), still a cbid.
    RT(cudaLaunch_v3020, kLaunch),
    RT(cudaLaunch_ptsz_v7000, kLaunch),
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
    // Every other copy and memset of the header: arrays, 3D, peer 3D, batches, and the per-thread
    // default-stream (_ptds / _ptsz) forms.  An op whose call is not traced has no launch: the
    // idle before it cannot be told launch overhead, and a blocking copy's host time is not CUDA
    // time (api_table_test checks the header has no such call left out).
    RT(cudaMemcpyToArray_v3020, kCopy),
    RT(cudaMemcpy2DToArray_v3020, kCopy),
    RT(cudaMemcpyFromArray_v3020, kCopy),
    RT(cudaMemcpy2DFromArray_v3020, kCopy),
    RT(cudaMemcpyArrayToArray_v3020, kCopy),
    RT(cudaMemcpy2DArrayToArray_v3020, kCopy),
    RT(cudaMemcpyToArrayAsync_v3020, kCopy),
    RT(cudaMemcpyFromArrayAsync_v3020, kCopy),
    RT(cudaMemcpy2DToArrayAsync_v3020, kCopy),
    RT(cudaMemcpy2DFromArrayAsync_v3020, kCopy),
    RT(cudaMemset3D_v3020, kCopy),
    RT(cudaMemset3DAsync_v3020, kCopy),
    RT(cudaMemcpy3DPeer_v4000, kCopy),
    RT(cudaMemcpy3DPeerAsync_v4000, kCopy),
    RT(cudaMemcpyToArray_ptds_v7000, kCopy),
    RT(cudaMemcpy2DToArray_ptds_v7000, kCopy),
    RT(cudaMemcpyFromArray_ptds_v7000, kCopy),
    RT(cudaMemcpy2DFromArray_ptds_v7000, kCopy),
    RT(cudaMemcpyArrayToArray_ptds_v7000, kCopy),
    RT(cudaMemcpy2DArrayToArray_ptds_v7000, kCopy),
    RT(cudaMemcpyToSymbol_ptds_v7000, kCopy),
    RT(cudaMemcpyFromSymbol_ptds_v7000, kCopy),
    RT(cudaMemcpyToArrayAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpyFromArrayAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpy2DToArrayAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpy2DFromArrayAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpyToSymbolAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpyFromSymbolAsync_ptsz_v7000, kCopy),
    RT(cudaMemset2D_ptds_v7000, kCopy),
    RT(cudaMemset2DAsync_ptsz_v7000, kCopy),
    RT(cudaMemset3D_ptds_v7000, kCopy),
    RT(cudaMemset3DAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpy3D_ptds_v7000, kCopy),
    RT(cudaMemcpy3DAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpy3DPeer_ptds_v7000, kCopy),
    RT(cudaMemcpy3DPeerAsync_ptsz_v7000, kCopy),
    RT(cudaMemcpy3DBatchAsync_v12080, kCopy),
    RT(cudaMemcpy3DBatchAsync_ptsz_v12080, kCopy),
    RT(cudaMemcpy3DBatchAsync_v13000, kCopy),
    RT(cudaMemcpy3DBatchAsync_ptsz_v13000, kCopy),
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
    // The pre-4.0 launches and the deprecated multi-device cooperative launch.
    DRV(cuLaunch, kLaunch),
    DRV(cuLaunchGrid, kLaunch),
    DRV(cuLaunchGridAsync, kLaunch),
    DRV(cuLaunchCooperativeKernelMultiDevice, kLaunch),
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
    // Every other copy and memset of the header (what JAX/XLA, CuPy and other runtime-less
    // callers use): the _v2 and legacy forms, arrays, 2D/3D, peer, batches (cuMemcpyBatchAsync_v2
    // is CUDA 13's), and the per-thread default-stream forms.
    DRV(cuMemcpyHtoD, kCopy),
    DRV(cu64MemcpyHtoD, kCopy),
    DRV(cuMemcpyDtoH, kCopy),
    DRV(cu64MemcpyDtoH, kCopy),
    DRV(cuMemcpyDtoD, kCopy),
    DRV(cu64MemcpyDtoD, kCopy),
    DRV(cuMemcpyDtoA, kCopy),
    DRV(cu64MemcpyDtoA, kCopy),
    DRV(cuMemcpyAtoD, kCopy),
    DRV(cu64MemcpyAtoD, kCopy),
    DRV(cuMemcpyHtoA, kCopy),
    DRV(cuMemcpyAtoH, kCopy),
    DRV(cuMemcpyAtoA, kCopy),
    DRV(cuMemcpy2D, kCopy),
    DRV(cuMemcpy2DUnaligned, kCopy),
    DRV(cuMemcpy3D, kCopy),
    DRV(cu64Memcpy3D, kCopy),
    DRV(cuMemcpyHtoDAsync, kCopy),
    DRV(cu64MemcpyHtoDAsync, kCopy),
    DRV(cuMemcpyDtoHAsync, kCopy),
    DRV(cu64MemcpyDtoHAsync, kCopy),
    DRV(cuMemcpyDtoDAsync, kCopy),
    DRV(cu64MemcpyDtoDAsync, kCopy),
    DRV(cuMemcpyHtoAAsync, kCopy),
    DRV(cuMemcpyAtoHAsync, kCopy),
    DRV(cuMemcpy2DAsync, kCopy),
    DRV(cuMemcpy3DAsync, kCopy),
    DRV(cu64Memcpy3DAsync, kCopy),
    DRV(cuMemsetD8, kCopy),
    DRV(cu64MemsetD8, kCopy),
    DRV(cuMemsetD16, kCopy),
    DRV(cu64MemsetD16, kCopy),
    DRV(cuMemsetD32, kCopy),
    DRV(cu64MemsetD32, kCopy),
    DRV(cuMemsetD2D8, kCopy),
    DRV(cu64MemsetD2D8, kCopy),
    DRV(cuMemsetD2D16, kCopy),
    DRV(cu64MemsetD2D16, kCopy),
    DRV(cuMemsetD2D32, kCopy),
    DRV(cu64MemsetD2D32, kCopy),
    DRV(cu64MemsetD8Async, kCopy),
    DRV(cu64MemsetD16Async, kCopy),
    DRV(cu64MemsetD32Async, kCopy),
    DRV(cuMemsetD2D8Async, kCopy),
    DRV(cu64MemsetD2D8Async, kCopy),
    DRV(cuMemsetD2D16Async, kCopy),
    DRV(cu64MemsetD2D16Async, kCopy),
    DRV(cuMemsetD2D32Async, kCopy),
    DRV(cu64MemsetD2D32Async, kCopy),
    DRV(cu64Memcpy2D, kCopy),
    DRV(cu64Memcpy2DUnaligned, kCopy),
    DRV(cu64Memcpy2DAsync, kCopy),
    DRV(cuMemcpy_v2, kCopy),
    DRV(cuMemsetD16_v2, kCopy),
    DRV(cuMemsetD2D8_v2, kCopy),
    DRV(cuMemsetD2D16_v2, kCopy),
    DRV(cuMemsetD2D32_v2, kCopy),
    DRV(cuMemcpyAtoH_v2, kCopy),
    DRV(cuMemcpyAtoHAsync_v2, kCopy),
    DRV(cuMemcpyAtoD_v2, kCopy),
    DRV(cuMemcpyDtoA_v2, kCopy),
    DRV(cuMemcpyAtoA_v2, kCopy),
    DRV(cuMemcpy2D_v2, kCopy),
    DRV(cuMemcpy2DUnaligned_v2, kCopy),
    DRV(cuMemcpy3D_v2, kCopy),
    DRV(cuMemcpyHtoA_v2, kCopy),
    DRV(cuMemcpyHtoAAsync_v2, kCopy),
    DRV(cuMemcpy3DPeer, kCopy),
    DRV(cuMemcpy3DPeerAsync, kCopy),
    DRV(cuMemcpyHtoD_v2_ptds, kCopy),
    DRV(cuMemcpyDtoH_v2_ptds, kCopy),
    DRV(cuMemcpyDtoD_v2_ptds, kCopy),
    DRV(cuMemcpyDtoA_v2_ptds, kCopy),
    DRV(cuMemcpyAtoD_v2_ptds, kCopy),
    DRV(cuMemcpyHtoA_v2_ptds, kCopy),
    DRV(cuMemcpyAtoH_v2_ptds, kCopy),
    DRV(cuMemcpyAtoA_v2_ptds, kCopy),
    DRV(cuMemcpy2D_v2_ptds, kCopy),
    DRV(cuMemcpy2DUnaligned_v2_ptds, kCopy),
    DRV(cuMemcpy3D_v2_ptds, kCopy),
    DRV(cuMemcpyPeer_ptds, kCopy),
    DRV(cuMemcpy3DPeer_ptds, kCopy),
    DRV(cuMemsetD8_v2_ptds, kCopy),
    DRV(cuMemsetD16_v2_ptds, kCopy),
    DRV(cuMemsetD32_v2_ptds, kCopy),
    DRV(cuMemsetD2D8_v2_ptds, kCopy),
    DRV(cuMemsetD2D16_v2_ptds, kCopy),
    DRV(cuMemsetD2D32_v2_ptds, kCopy),
    DRV(cuMemcpyHtoAAsync_v2_ptsz, kCopy),
    DRV(cuMemcpyAtoHAsync_v2_ptsz, kCopy),
    DRV(cuMemcpy2DAsync_v2_ptsz, kCopy),
    DRV(cuMemcpy3DAsync_v2_ptsz, kCopy),
    DRV(cuMemcpyPeerAsync_ptsz, kCopy),
    DRV(cuMemcpy3DPeerAsync_ptsz, kCopy),
    DRV(cuMemsetD16Async_ptsz, kCopy),
    DRV(cuMemsetD2D8Async_ptsz, kCopy),
    DRV(cuMemsetD2D16Async_ptsz, kCopy),
    DRV(cuMemsetD2D32Async_ptsz, kCopy),
    DRV(cuMemcpy3DBatchAsync, kCopy),
    DRV(cuMemcpy3DBatchAsync_ptsz, kCopy),
    DRV(cuMemcpyBatchAsync_v2, kCopy),
    DRV(cuMemcpyBatchAsync_v2_ptsz, kCopy),
    DRV(cuMemcpy3DBatchAsync_v2, kCopy),
    DRV(cuMemcpy3DBatchAsync_v2_ptsz, kCopy),
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
