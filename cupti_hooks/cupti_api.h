// CUPTI resolved at run time: dlopen("libcupti.so.13" or $GPUACCT_CUPTI_LIBRARY) and a table of
// the functions gpuacct calls.  Nothing links against libcupti, so a machine without it runs the
// host-only mode instead of failing to load.  Internal to cupti_hooks/ (includes CUPTI headers).
#pragma once

#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <atomic>
#include <string>
#include <string_view>

#include "analysis/model/status.h"

namespace gpuacct::cupti {

struct CuptiApi {
#define GPUACCT_CUPTI_REQUIRED(X)   \
  X(cuptiGetVersion)                \
  X(cuptiGetResultString)           \
  X(cuptiGetTimestamp)              \
  X(cuptiSubscribe)                 \
  X(cuptiUnsubscribe)               \
  X(cuptiEnableCallback)            \
  X(cuptiActivityEnable)            \
  X(cuptiActivityDisable)           \
  X(cuptiActivityRegisterCallbacks) \
  X(cuptiActivityFlushAll)          \
  X(cuptiActivityGetNextRecord)     \
  X(cuptiActivityGetNumDroppedRecords)
#define GPUACCT_CUPTI_OPTIONAL(X)           \
  X(cuptiEnableDomain)                      \
  X(cuptiActivityFlushPeriod)               \
  X(cuptiActivityEnableRuntimeApi)          \
  X(cuptiActivityEnableDriverApi)           \
  X(cuptiActivityRegisterTimestampCallback) \
  X(cuptiSetThreadIdType)                   \
  X(cuptiFinalize)                          \
  X(cuptiGetLastError)                      \
  X(cuptiGetDeviceId)                       \
  X(cuptiGetGraphId)
// Hardware counters (PM sampling, CUDA 12.6+; cupti_hooks/counter_sampler.h): optional as a
// group -- a CUPTI without any of them makes GPUACCT_COUNTERS=1 refuse as "unsupported".
#define GPUACCT_CUPTI_COUNTERS(X)              \
  X(cuptiProfilerInitialize)                   \
  X(cuptiDeviceGetChipName)                    \
  X(cuptiPmSamplingGetCounterAvailability)     \
  X(cuptiProfilerHostInitialize)               \
  X(cuptiProfilerHostDeinitialize)             \
  X(cuptiProfilerHostConfigAddMetrics)         \
  X(cuptiProfilerHostGetConfigImageSize)       \
  X(cuptiProfilerHostGetConfigImage)           \
  X(cuptiProfilerHostGetNumOfPasses)           \
  X(cuptiProfilerHostEvaluateToGpuValues)      \
  X(cuptiPmSamplingEnable)                     \
  X(cuptiPmSamplingSetConfig)                  \
  X(cuptiPmSamplingStart)                      \
  X(cuptiPmSamplingStop)                       \
  X(cuptiPmSamplingGetCounterDataSize)         \
  X(cuptiPmSamplingCounterDataImageInitialize) \
  X(cuptiPmSamplingDecodeData)                 \
  X(cuptiPmSamplingGetCounterDataInfo)         \
  X(cuptiPmSamplingCounterDataGetSampleInfo)

#define GPUACCT_CUPTI_MEMBER(name) decltype(&::name) name = nullptr;
  GPUACCT_CUPTI_REQUIRED(GPUACCT_CUPTI_MEMBER)
  GPUACCT_CUPTI_OPTIONAL(GPUACCT_CUPTI_MEMBER)
  GPUACCT_CUPTI_COUNTERS(GPUACCT_CUPTI_MEMBER)
#undef GPUACCT_CUPTI_MEMBER

  void* handle = nullptr;
  uint32_t version = 0;
  // Where failures of GPUACCT_CUPTI_CALL are said (CollectorHooks::warn); nullptr: nowhere.
  void (*warn)(std::string_view message) = nullptr;

  // dlopen + dlsym.  An error (one line, no prefix) when the library cannot be used; the
  // table is then unusable.  Never throws.
  Status load(const std::string& library);

  const char* result_string(CUptiResult r) const;
  // Every function of GPUACCT_CUPTI_COUNTERS resolved; else the first one missing.
  const char* missing_counter_function() const;
};

// Says "<call text> failed: <CUPTI result string> (<code>)" through api.warn, once per call
// site, and evaluates to the CUptiResult.  `api` is a CuptiApi&; `fn` a member name.
#define GPUACCT_CUPTI_CALL(api, fn, ...)                                                \
  ([&]() -> CUptiResult {                                                               \
    const CUptiResult gpuacct_r_ = (api).fn(__VA_ARGS__);                               \
    if (gpuacct_r_ != CUPTI_SUCCESS) {                                                  \
      static std::atomic<bool> gpuacct_logged_{false};                                  \
      if (!gpuacct_logged_.exchange(true, std::memory_order_relaxed)) {                 \
        ::gpuacct::cupti::log_cupti_failure(api, #fn "(" #__VA_ARGS__ ")", gpuacct_r_); \
      }                                                                                 \
    }                                                                                   \
    return gpuacct_r_;                                                                  \
  }())

void log_cupti_failure(const CuptiApi& api, const char* call_text, CUptiResult r);

// Calls that fail for expected reasons (optional features) go through this: no log line.
#define GPUACCT_CUPTI_TRY(api, fn, ...) \
  ((api).fn != nullptr ? (api).fn(__VA_ARGS__) : CUPTI_ERROR_NOT_SUPPORTED)

}  // namespace gpuacct::cupti
