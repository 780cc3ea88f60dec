// The event model: what every source (the injected library, a Kineto trace, a recording on
// disk, the synthetic generator) turns its input into before the analysis sees it.
//
// Design:
//  - fixed-size, trivially copyable records, so a recording is a memcpy of them and the
//    injected library can fill them without allocating;
//  - one clock: nanoseconds since an arbitrary epoch (CUPTI uses CLOCK_REALTIME), int64;
//  - strings are interned (NameId) by a NameTable owned by whoever owns the events;
//  - no CUDA types here: analysis/ is built and tested without CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace gpuacct {

using TimeNs = int64_t;
using NameId = uint32_t;

// a + b and a - b clamped to the int64 range.  Times come from files and other processes: a
// corrupt record can hold any value, and sums and differences of them must never overflow
// (undefined behaviour; the recording fuzzer found such sums in the run summary and such
// differences in the step detector).
inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_add_overflow(a, b, &out)) return out;
  return b > 0 ? INT64_MAX : INT64_MIN;
}
inline int64_t saturating_sub(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_sub_overflow(a, b, &out)) return out;
  return b < 0 ? INT64_MAX : INT64_MIN;
}
inline constexpr NameId kNoName = 0;  // NameTable reserves id 0 for "".

enum class GpuOpKind : uint8_t { kKernel = 0, kMemcpy = 1, kMemset = 2 };

enum class CopyDir : uint8_t { kNone = 0, kH2D = 1, kD2H = 2, kD2D = 3, kP2P = 4, kH2H = 5 };

// The collective a communication op belongs to.  kNone means "not communication".
enum class CollectiveType : uint8_t {
  kNone = 0,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kSendRecv,
  kAllToAll,
  kOther,  // recognised as a collective library op, type unknown
};

// Bits in GpuOp::flags.
enum GpuOpFlags : uint8_t {
  kGpuOpPageable = 1 << 0,  // memcpy touching pageable host memory
  // A whole CUDA graph launch as one op (CUPTI's GRAPH_TRACE record: the span from its first
  // node's start to its last node's end, nodes not seen): a compute kernel to the accounting,
  // `graph_nodes` kernels in a step's count, the only op its launch call gets.
  kGpuOpGraphSpan = 1 << 1,
};

// One operation executed on a device stream.
struct GpuOp {
  TimeNs start = 0;
  TimeNs end = 0;
  uint64_t correlation_id = 0;  // links to the HostApiCall that launched it; 0 = unknown
  uint64_t bytes = 0;           // memcpy / memset size; 0 for kernels
  uint32_t stream = 0;
  uint32_t graph_id = 0;  // 0 = not launched from a CUDA graph
  NameId name = kNoName;
  uint16_t device = 0;
  GpuOpKind kind = GpuOpKind::kKernel;
  CopyDir copy_dir = CopyDir::kNone;
  CollectiveType collective = CollectiveType::kNone;
  uint8_t flags = 0;
  uint8_t reserved[2] = {};
  // kGpuOpGraphSpan: the graph's nodes (0 = unknown).  Recordings written before it hold 0 here.
  uint32_t graph_nodes = 0;

  bool is_communication() const { return collective != CollectiveType::kNone; }
  bool is_compute() const { return kind == GpuOpKind::kKernel && !is_communication(); }
};
static_assert(sizeof(GpuOp) == 56);
static_assert(std::is_trivially_copyable_v<GpuOp>);

enum class HostApiKind : uint8_t {
  kLaunch = 0,  // kernel or graph launch
  kCopy = 1,    // memcpy / memset submission
  kSync = 2,    // blocking synchronisation (device, stream, event)
  kOther = 3,
};

// A CUDA runtime / driver call on a host thread.
struct HostApiCall {
  TimeNs start = 0;
  TimeNs end = 0;
  uint64_t correlation_id = 0;
  uint32_t thread = 0;
  NameId name = kNoName;
  HostApiKind kind = HostApiKind::kOther;
  uint8_t reserved[7] = {};
};
static_assert(sizeof(HostApiCall) == 40);
static_assert(std::is_trivially_copyable_v<HostApiCall>);

enum class RangeKind : uint8_t {
  kStep = 0,  // one training step (explicit marks, NVTX, ProfilerStep#N, detected)
  kData = 1,  // the thread waits for input (DataLoader __next__, decode, read)
  kUser = 2,  // anything else the user marked; shown, not used for accounting
};

// A [start, end) interval on a host thread.
struct HostRange {
  TimeNs start = 0;
  TimeNs end = 0;
  int64_t number = -1;  // step number for kStep ranges (-1 = unknown)
  uint32_t thread = 0;
  NameId name = kNoName;
  RangeKind kind = RangeKind::kUser;
  uint8_t reserved[7] = {};
};
static_assert(sizeof(HostRange) == 40);
static_assert(std::is_trivially_copyable_v<HostRange>);

enum class MarkerKind : uint8_t {
  kStepBoundary = 0,  // a new step begins at ts (ends the previous one): loops with one mark
  kStepFlops = 1,     // value = model FLOPs of the step containing ts
  kInstant = 2,       // shown only
  // value = tokens / samples the step containing ts processed (gpuacct_set_step_work); the
  // markers of one step add up.  Readers that predate them ignore them (recording unchanged).
  kStepTokens = 3,
  kStepSamples = 4,
};

struct Marker {
  TimeNs ts = 0;
  double value = 0;
  int64_t number = -1;
  uint32_t thread = 0;
  NameId name = kNoName;
  MarkerKind kind = MarkerKind::kInstant;
  uint8_t reserved[7] = {};
};
static_assert(sizeof(Marker) == 40);
static_assert(std::is_trivially_copyable_v<Marker>);

// Sampled tracing (GPUACCT_SAMPLE, docs/overhead.md): a step range or step-boundary marker
// opened while CUPTI was off carries kUntracedStep in reserved[0].  The layout (and so a
// recording's bytes) is unchanged; files written before the flag existed read 0 = traced.
inline constexpr uint8_t kUntracedStep = 1;
inline bool step_untraced(const HostRange& r) {
  return (r.reserved[0] & kUntracedStep) != 0;
}
inline bool step_untraced(const Marker& m) {
  return (m.reserved[0] & kUntracedStep) != 0;
}
inline void mark_step_untraced(HostRange& r) {
  r.reserved[0] |= kUntracedStep;
}
inline void mark_step_untraced(Marker& m) {
  m.reserved[0] |= kUntracedStep;
}

// Step detection (analysis/accounting/step_detection.h): a step range the detector made, not
// one the program marked, carries kDetectedStep in reserved[0].  The accountant folds detected
// steps that begin before the program's first marked step into set-up (docs/accounting.md §1).
// Ranges an older library detected lack the flag (only their name says so): the recording
// reader re-detects those (analysis/input/input.cc).
inline constexpr uint8_t kDetectedStep = 2;
inline bool step_detected(const HostRange& r) {
  return (r.reserved[0] & kDetectedStep) != 0;
}
inline void mark_step_detected(HostRange& r) {
  r.reserved[0] |= kDetectedStep;
}

// The hardware counters sampled on a device (CUPTI PM sampling, docs/counters.md), as
// percentages of the interval (activity) or of peak (throughput).  Order = the metric order of
// CounterSample::pct and of every output.
enum class CounterMetric : uint8_t {
  kSmActive = 0,      // SMs with at least one warp resident, % of SM cycles
  kTensorActive = 1,  // tensor pipes busy, % of cycles
  kDram = 2,          // DRAM read + write throughput, % of peak
  kComputeSol = 3,    // compute speed of light: max over the pipe metrics, %
  kMemorySol = 4,     // memory speed of light: max over the throughput metrics, %
};
inline constexpr size_t kCounterMetricCount = 5;

// One counter sample: the mean of each metric over [start, end) on one device, in the trace
// clock.  A metric the device did not give is NaN.  Samples of one device are expected not to
// overlap (the sampler's intervals follow one another); attribution weighs each by its overlap.
struct CounterSample {
  TimeNs start = 0;
  TimeNs end = 0;
  double pct[kCounterMetricCount] = {};
  uint16_t device = 0;
  uint8_t reserved[6] = {};

  double value(CounterMetric m) const { return pct[static_cast<int>(m)]; }
};
static_assert(sizeof(CounterSample) == 64);
static_assert(std::is_trivially_copyable_v<CounterSample>);

// A batch as delivered by a source: any order, possibly late (see StepAccountant).
struct EventBatch {
  std::vector<GpuOp> gpu_ops;
  std::vector<HostApiCall> api_calls;
  std::vector<HostRange> ranges;
  std::vector<Marker> markers;
  std::vector<CounterSample> counter_samples;

  bool empty() const {
    return gpu_ops.empty() && api_calls.empty() && ranges.empty() && markers.empty() &&
           counter_samples.empty();
  }
  size_t size() const {
    return gpu_ops.size() + api_calls.size() + ranges.size() + markers.size() +
           counter_samples.size();
  }
  void clear() {
    gpu_ops.clear();
    api_calls.clear();
    ranges.clear();
    markers.clear();
    counter_samples.clear();
  }
};

const char* to_string(GpuOpKind kind);
const char* to_string(CopyDir dir);
const char* to_string(CollectiveType type);
const char* to_string(HostApiKind kind);
const char* to_string(RangeKind kind);
const char* to_string(CounterMetric metric);  // the JSON key stem: "sm_active", ...

}  // namespace gpuacct
