// The CUDA runtime / driver calls gpuacct traces, with what each means to the accounting.
// Everything else (cudaGetDevice, cuCtxGetCurrent, attribute queries, ...) stays off: tracing
// them costs time and says nothing about where a step's time went.  CUDA-free interface.
#pragma once

#include <cstdint>
#include <string_view>

#include "analysis/model/events.h"

namespace gpuacct::cupti {

enum class ApiDomain : uint8_t { kRuntime = 0, kDriver = 1 };

struct TracedApi {
  ApiDomain domain;
  uint32_t cbid;
  HostApiKind kind;       // kLaunch, kCopy or kSync
  std::string_view name;  // "cudaLaunchKernel", version suffix stripped
};

// Every traced API, runtime first.
const TracedApi* traced_apis(size_t* count);

// O(1) lookup; nullptr when the cbid is not traced.
const TracedApi* find_traced_api(ApiDomain domain, uint32_t cbid);

}  // namespace gpuacct::cupti
