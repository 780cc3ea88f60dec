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
  // GPUACCT_COUNTERS_INTERVAL_US: the sampling interval (GPU time-interval trigger).
  static constexpr uint32_t kDefaultIntervalUs = 1000;
  uint32_t interval_us = kDefaultIntervalUs;
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

struct CounterDeviceStatus {
  uint16_t device = 0;
  CounterState state = CounterState::kFailed;
  std::string chip;
  // Refused: the one line said (cause; fix).  Active: empty.
  std::string line;
  // The hardware metric chosen for each role ("sm_active=sm__cycles_active.avg...").
  std::vector<std::string> metrics;
  int64_t samples = 0;
  // The first sample's start minus the set-up time (cuptiGetTimestamp), on CUPTI's clock:
  // from 0 to about an interval when sample times are on the activity records' clock (what
  // the attribution assumes); seconds or more when they are not.  Absent before a sample.
  std::optional<int64_t> first_sample_lag_ns;
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
  // The pipeline calls it for the devices the process runs work on (their first kernel /
  // memcpy / memset record), not for a bare context (docs/counters.md, "Devices").
  std::string enable(uint16_t device);
  static constexpr int kDecodeFailuresToGiveUp = 10;
  // A first sample further than this from the set-up: its clock is not CUPTI's (said once).
  static constexpr int64_t kClockMismatchNs = 1'000'000'000;

  // Drains every device's hardware buffer: samples appended to `out`, their times moved onto
  // the host clock (CUPTI time - clock_offset_ns), losses counted in `stats`.  Returns the
  // lines to say once: the refusal line of each device given up in this call, and the clock
  // warning of a device whose first sample is kClockMismatchNs or more from its set-up time;
  // usually empty.
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
