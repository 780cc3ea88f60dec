// The ONE place that chooses which CUPTI activity-record struct versions gpuacct reads.
//
// CUPTI fills buffers with the newest struct version of the CUPTI it is, so the layouts below
// are only valid for the CUPTI API versions in [kMinCuptiApiVersion, kMaxCuptiApiVersion]
// (CUDA 13.0: CUPTI_API_VERSION 130001).  CuptiApi::load() checks cuptiGetVersion() against that
// range and refuses (GPU activity off, one stderr line) rather than misreading a newer layout
// (CUDA 13.1 moved kernels to CUpti_ActivityKernel11).  To support a new CUPTI: bump the
// aliases, the range, and rebuild against its headers.
//
// Only cupti_hooks/ includes CUPTI headers.
#pragma once

#include <cupti.h>

#include <cstdint>

namespace gpuacct::cupti {

using KernelRecord = CUpti_ActivityKernel10;         // CONCURRENT_KERNEL (never KERNEL)
using MemcpyRecord = CUpti_ActivityMemcpy6;          // MEMCPY
using MemcpyPtoPRecord = CUpti_ActivityMemcpyPtoP4;  // MEMCPY2
using MemsetRecord = CUpti_ActivityMemset4;          // MEMSET
using ApiRecord = CUpti_ActivityAPI;                 // RUNTIME, DRIVER
using SyncRecord = CUpti_ActivitySynchronization2;   // SYNCHRONIZATION
using GraphTraceRecord = CUpti_ActivityGraphTrace2;  // GRAPH_TRACE

inline constexpr uint32_t kBuiltCuptiApiVersion = CUPTI_API_VERSION;
inline constexpr uint32_t kMinCuptiApiVersion = 130000;
inline constexpr uint32_t kMaxCuptiApiVersion = 130099;

// CUPTI API v27 (CUDA 12.9) is the first that tolerates a refused (NULL) buffer.
inline constexpr uint32_t kFirstVersionAllowingRefusedBuffers = 27;

inline bool record_layouts_match(uint32_t runtime_version) {
  return runtime_version >= kMinCuptiApiVersion && runtime_version <= kMaxCuptiApiVersion;
}

static_assert(CUPTI_API_VERSION >= kMinCuptiApiVersion && CUPTI_API_VERSION <= kMaxCuptiApiVersion,
              "cupti_record_types.h: the CUPTI headers are not the ones these aliases were chosen "
              "for; review every alias above");

}  // namespace gpuacct::cupti
