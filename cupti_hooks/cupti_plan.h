// What gpuacct asks of CUPTI in one run: the activity kinds, the API records, the API callbacks
// and where record timestamps come from.  The defaults are the design of docs/overhead.md
// ("The design"), each choice there with the header line behind it; the GPUACCT_CUPTI_*
// experiment settings (inject/config.h) change one choice at a time so that the overhead matrix
// (tests/gpu/overhead_matrix.py) can price it.  Those runs are for measuring: with a kind or the
// API records missing the walls are not to be trusted, and the library says so in one line.
// CUDA-free interface.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuacct::cupti {

// Activity kinds as a mask.
enum ActivityKindBit : uint32_t {
  kKindKernel = 1u << 0,  // CONCURRENT_KERNEL (never KERNEL, which serialises kernels)
  kKindCopy = 1u << 1,    // MEMCPY and MEMCPY2 (peer copies)
  kKindMemset = 1u << 2,  // MEMSET
  kKindSync = 1u << 3,    // SYNCHRONIZATION: not used by the accounting (the design leaves it out)
  kKindGraph = 1u << 4,   // GRAPH_TRACE: one record per graph launch instead of one per node
};
inline constexpr uint32_t kAllKinds =
    kKindKernel | kKindCopy | kKindMemset | kKindSync | kKindGraph;
// The design: what the accounting reads, graphs at one record per launch.
inline constexpr uint32_t kDesignKinds = kKindKernel | kKindCopy | kKindMemset | kKindGraph;

// Which API domains get the launch / sync callbacks (GPUACCT_CUPTI_CALLBACKS).
enum class CallbackDomains : uint8_t {
  kDesign,   // launches in the driver domain only, syncs in both; none without stacks
  kNone,     // no launch / sync callback (the reset and resource callbacks stay)
  kRuntime,  // launches and syncs in the runtime domain
  kDriver,   // launches and syncs in the driver domain
  kBoth,     // both domains (every runtime launch then fires four callbacks)
};

// Where CUPTI's record timestamps come from (GPUACCT_CUPTI_TIMESTAMPS).
enum class TimestampSource : uint8_t {
  kAuto,      // CUPTI's own clock when it is the host clock, else the timestamp callback
  kCallback,  // always the timestamp callback (CUPTI calls the host clock per timestamp)
  kCupti,     // never: CUPTI's clock, moved onto the host clock by a measured offset if needed
};

// What GPUACCT_SAMPLE switches off between traced steps (GPUACCT_CUPTI_SAMPLE_SWITCH).
enum class SampleSwitch : uint8_t {
  kAll,       // activity kinds, API records and the launch / sync callbacks
  kActivity,  // kinds and records; the callbacks stay enabled and return at once
};

// Where the traced calls' spans, threads and correlation ids come from (GPUACCT_CUPTI_API).
// The design is kCallbacks: on an H200 it recorded the same calls as the API records (every
// count equal, no launch unmatched) and cost less in the PyTorch launch loop (docs/overhead.md).
enum class ApiSource : uint8_t {
  // CUPTI's RUNTIME / DRIVER activity records of the traced calls (api_table.h).
  kRecords,
  // The calls' own callbacks, in the domain the call was made in: the outermost traced call
  // of a thread is timed by the library (its host clock) between its enter and exit callbacks
  // and written to the thread's ring with the callback's correlationId -- "this ID will equal
  // the correlation ID in the CUpti_ActivityAPI record corresponding to the CUDA runtime
  // function call" (driver: "... driver function call"; cupti_callbacks.h, CUpti_CallbackData)
  // -- so no API activity record is asked for.  Every traced call gets its callbacks in both
  // domains (launches that bypass the runtime are seen only in the driver domain; a driver
  // call nested in a runtime call is the runtime call's and is not written).
  kCallbacks,
};

struct CuptiPlan {
  uint32_t kinds = kDesignKinds;
  bool api_records = true;  // RUNTIME / DRIVER records of the traced calls (api_table.h)
  ApiSource api_source = ApiSource::kCallbacks;
  CallbackDomains callbacks = CallbackDomains::kDesign;
  // The cudaDeviceReset callback (a flush before the reset frees CUPTI's buffers).
  bool reset_callback = true;
  TimestampSource timestamps = TimestampSource::kAuto;
  SampleSwitch sample_switch = SampleSwitch::kAll;
  // Set when a GPUACCT_CUPTI_* setting changed the plan: a measuring run, not an answer.
  bool experiment = false;
};

// Domain bits of the callback sets below.
inline constexpr uint8_t kRuntimeDomain = 1;
inline constexpr uint8_t kDriverDomain = 2;

// The domains whose launch, sync and copy callbacks are enabled.
struct CallbackSet {
  uint8_t launch = 0;
  uint8_t sync = 0;
  uint8_t copy = 0;
};

// `stacks`: GPUACCT_STACKS (native call sites need the callbacks).  `identify_threads`: CUPTI
// refused SYSTEM thread ids, so every traced call must be seen as it is made (a thread is known
// before CUPTI records a call of it: ActivityParser::ThreadIds) -- that wins over the plan, and
// so do calls timed by callbacks (ApiSource::kCallbacks: every traced call, both domains).
CallbackSet callback_set(const CuptiPlan& plan, bool stacks, bool identify_threads);

// "kernel,copy,memset,sync,graph" (any order, comma separated) or "none"; false on a name it
// does not know.
bool parse_kinds(std::string_view text, uint32_t* kinds);
std::string kinds_to_string(uint32_t kinds);  // "kernel,copy,memset,graph", "none"

bool parse_callback_domains(std::string_view text, CallbackDomains* out);
const char* to_string(CallbackDomains d);
bool parse_timestamp_source(std::string_view text, TimestampSource* out);
const char* to_string(TimestampSource t);
bool parse_sample_switch(std::string_view text, SampleSwitch* out);
const char* to_string(SampleSwitch s);
bool parse_api_source(std::string_view text, ApiSource* out);  // "records", "callbacks"
const char* to_string(ApiSource s);
// Whether the plan's calls are timed by callbacks (the API records are then not asked for).
inline bool api_from_callbacks(const CuptiPlan& plan) {
  return plan.api_source == ApiSource::kCallbacks;
}

}  // namespace gpuacct::cupti
