// Hardware counters per device (GPUACCT_COUNTERS=1, docs/counters.md): CUPTI PM sampling of
// one one-pass metric set (SM active, tensor pipes active, DRAM throughput, and the throughput
// metrics behind the compute / memory speed of light), decoded and evaluated into
// CounterSamples (analysis/model/events.h).  CUDA-free interface; CUPTI stays in the .cc.
//
// Threading: every member is called by the worker thread (the pipeline's owner), never from a
// CUPTI or launch callback: setting a device up, draining its hardware buffer
// (cuptiPmSamplingDecodeData) and evaluating the samples (cuptiProfilerHostEvaluateToGpuValues)
// cost milliseconds.  Devices are set up when the process is first seen running work there.
//
// Refusals: a device whose counters cannot be read (an unsupported GPU or CUPTI, the driver's
// NVreg_RestrictProfilingToAdminUsers, counters held by DCGM profiling or another profiler)
// gets one line naming the cause and the fix; tracing goes on without its counters and the
// report's `collection.counters` says why.
//
// Data loss: the hardware buffer is sized for many decode periods and drained every tick; a
// sample lost anyway (an overflow: a gap in the sample times, or CUPTI's overflow flag) or one
// that could not be decoded / evaluated is counted in Stat::counter_samples_lost.  A device
// whose decode keeps failing (kDecodeFailuresToGiveUp calls in a row) is given up: its line is
// said, the samples since its last complete decode are counted lost, and it no longer holds
// the watermark back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/model/events.h"
#include "analysis/model/stats.h"

namespace gpuacct::cupti {

struct CuptiApi;

struct CounterOptions {
  // GPUACCT_COUNTERS_INTERVAL_US: the sampling interval (GPU time-interval trigger, whose
  // samplingInterval is in nanoseconds: cupti_pmsampling.h).
  static constexpr uint32_t kDefaultIntervalUs = 1000;
  uint32_t interval_us = kDefaultIntervalUs;
  // GPUACCT_COUNTERS_DEBUG=1: keep what only a GPU can tell (the raw sample times against
  // cuptiGetTimestamp, the first samples' raw values, the set-up calls' times) for the report
  // (CounterDeviceStatus::debug; tests/gpu/check.sh prints it).
  bool debug = false;
  // How often the worker decodes (its tick): sizes the counter data image.
  uint32_t decode_period_ms = 100;
  // The hardware buffer each device's samples wait in between decodes.
  size_t hardware_buffer_bytes = size_t{64} << 20;
};

enum class CounterState : uint8_t {
  kActive,
  kUnsupported,             // no PM sampling in this CUPTI, on this GPU, or none of the metrics
  kInsufficientPrivileges,  // CUPTI_ERROR_INSUFFICIENT_PRIVILEGES
  kBusy,                    // CUPTI_ERROR_HARDWARE_BUSY (DCGM profiling, another profiler)
  kFailed,                  // another CUPTI error
};
const char* to_string(CounterState s);

// GPUACCT_COUNTERS_DEBUG: a device's raw view, every time on CUPTI's clock (cuptiGetTimestamp)
// or the samples' own (raw), never moved.
struct CounterDebug {
  const char* trigger_mode = "";   // as set: "gpu_time_interval" (ns) or "gpu_sysclk_interval"
  uint64_t sampling_interval = 0;  // the value given to cuptiPmSamplingSetConfig
  const char* interval_unit = "";  // "ns" or "cycles"
  uint64_t hardware_buffer_bytes = 0;
  uint32_t max_samples_per_decode = 0;
  // cuptiGetTimestamp around the set-up calls (0: not reached).
  uint64_t setup_began = 0, enable_before = 0, enable_after = 0, set_config_after = 0,
           start_before = 0, start_after = 0, stop_at = 0;
  struct Sample {
    uint64_t start = 0, end = 0;  // raw, as cuptiPmSamplingCounterDataGetSampleInfo
    uint64_t decode_before = 0, decode_after = 0;  // cuptiGetTimestamp around its decode call
    std::vector<double> values;                    // evaluated, before any clamping, per metric
  };
  std::vector<std::string> metric_names;  // the order of Sample::values
  std::vector<Sample> first_samples;      // the first five decoded
  int64_t decodes = 0;                    // cuptiPmSamplingDecodeData calls that succeeded
  int64_t decodes_with_samples = 0;
  int64_t populated_not_completed = 0;   // summed over decodes: populated - completed
  int64_t overflows = 0;                 // decodes that set `overflow`
  uint64_t first_sample_decoded_at = 0;  // cuptiGetTimestamp after the first decode with one
  // The clock bracket (CounterSampler's mapping): sample clock - CUPTI clock is at least
  // offset_low (a sample is complete before its decode returns) and at most offset_high (the
  // first sample ends after the start).
  std::optional<int64_t> offset_low, offset_high;
  int64_t duration_min_ns = 0, duration_max_ns = 0;  // of the samples after the first
};

struct CounterDeviceStatus {
  uint16_t device = 0;
  CounterState state = CounterState::kFailed;
  std::string chip;
  // Refused: the one line said (cause; fix).  Active: empty.
  std::string line;
  // The hardware metric chosen for each role ("sm_active=sm__cycles_active.avg...").
  std::vector<std::string> metrics;
  int64_t samples = 0;
  // The first sample's raw start minus cuptiGetTimestamp just before cuptiPmSamplingStart:
  // from 0 to about an interval when sample times are on the activity records' clock and the
  // first sample begins at the start; far off when they are on another clock (the H200 run of
  // 2026-12-04 showed -743 ms) or the first sample began earlier.  Absent before a sample.
  std::optional<int64_t> first_sample_lag_ns;
  // How the samples' clock was put onto CUPTI's (CounterSampler::decode): "activity" (the
  // same clock, within the bracket), "mapped" (another clock, moved by clock_offset_ns), or
  // "inconsistent" (the bracket is empty: moved by its lower end, said once).
  std::string clock;
  std::optional<int64_t> clock_offset_ns;  // sample clock - CUPTI clock, as used
  const char* trigger = "";                // "gpu_time_interval"
  uint64_t interval_set = 0;               // samplingInterval as set (ns for the time trigger)
  // The median length of the first decoded samples (the first, partial one left out): the
  // interval the hardware really used.
  std::optional<int64_t> interval_seen_ns;
  // Whole intervals from the start to the stop (or to the last decode): what was due.
  int64_t samples_due = 0;
  // Samples that began before the start (a sample holding time before sampling ran): dropped.
  int64_t samples_before_start = 0;
  std::optional<CounterDebug> debug;  // GPUACCT_COUNTERS_DEBUG
};

class CounterSampler {
 public:
  static constexpr int64_t kNothingDecoded = std::numeric_limits<int64_t>::max();

  CounterSampler(CuptiApi& api, const CounterOptions& options);
  ~CounterSampler();
  CounterSampler(const CounterSampler&) = delete;
  CounterSampler& operator=(const CounterSampler&) = delete;

  // Sets `device` up and starts sampling, once per device.  The refusal line when it cannot
  // (to be said once); empty when sampling started or the device was tried before.  After
  // stop() nothing is set up any more (a device first seen in the final drain is not sampled).
  // The pipeline calls it for the devices the process runs work on (its first launch there, or
  // its first kernel / memcpy / memset record), not for a bare context (docs/counters.md,
  // "Devices").
  std::string enable(uint16_t device);
  static constexpr int kDecodeFailuresToGiveUp = 10;

  // Drains every device's hardware buffer: samples appended to `out`, their times moved from
  // the samples' clock onto CUPTI's (measured per device: docs/counters.md, "Clock") and then
  // onto the host clock (CUPTI time - clock_offset_ns); a sample that began before the start
  // is dropped (CounterDeviceStatus::samples_before_start); losses counted in `stats`.  Returns
  // the lines to say once: the refusal line of each device given up in this call, and the
  // line of a device whose samples are not as long as the interval set; usually empty.
  std::vector<std::string> decode(int64_t clock_offset_ns, std::vector<CounterSample>& out,
                                  Stats& stats);
  // Stops sampling everywhere; what the hardware buffers hold is left for a last decode().
  void stop();
  // Host-clock time up to which every sampling device's samples have been decoded (the least
  // over them); kNothingDecoded when no device samples.
  int64_t decoded_until(int64_t clock_offset_ns) const;
  bool any_active() const;
  std::vector<CounterDeviceStatus> status() const;

 private:
  struct Device;
  std::string set_up(Device& d);
  int configure(Device& d, const char** call);
  void decode_device(Device& d, int64_t clock_offset_ns, std::vector<CounterSample>& out,
                     Stats& stats);
  // A failed cuptiPmSamplingDecodeData: given up (or drained, once stopped) when it persists.
  void decode_failed(Device& d, const std::string& why, Stats& stats);
  void note_first_sample(Device& d, uint64_t start);
  // The sample clock's offset from CUPTI's for the samples of this decode (updates the
  // bracket with a sample's end and the decode's return time).
  void bound_clock(Device& d, uint64_t end, uint64_t decoded_by, bool overflowed);
  int64_t clock_offset(const Device& d) const;
  void note_duration(Device& d, uint64_t start, uint64_t end);
  bool evaluate(Device& d, size_t index);
  void keep_debug_sample(Device& d, size_t index, uint64_t start, uint64_t end,
                         uint64_t decode_before, uint64_t decode_after);
  static constexpr size_t kDebugSamples = 5;
  uint64_t cupti_now() const;

  CuptiApi& api_;
  CounterOptions options_;
  bool profiler_initialized_ = false;
  bool stopped_ = false;
  std::vector<std::unique_ptr<Device>> devices_;
};

// The refusal line of `state` for `device` (docs/counters.md lists them); `detail` is what
// CUPTI said.  Exposed for the tests.
std::string counter_refusal_line(CounterState state, uint16_t device, const std::string& chip,
                                 const std::string& detail);

}  // namespace gpuacct::cupti
