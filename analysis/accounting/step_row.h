// The per-step, per-device result of the accounting, and the walls it rolls up into.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "analysis/model/events.h"

namespace gpuacct {

// Exclusive categories of one step window on one device.  Invariant (tested):
//   sum() == window_end - window_begin, every field >= 0.
struct CategoryNs {
  int64_t compute = 0;       // >= 1 non-communication kernel running
  int64_t comm_exposed = 0;  // a collective running, no compute kernel
  int64_t copy_input = 0;    // host-to-device copy running, no kernel
  int64_t copy_other = 0;    // other memcpy / memset running, no kernel, no H2D copy
  int64_t data_wait = 0;     // idle; launching thread inside a data range
  int64_t launch_gap = 0;    // idle; GPU waited on kernel submission
  int64_t host_other = 0;    // idle; host paused (CPU work) or GPU waited on a dependency

  int64_t sum() const {
    int64_t s = compute;
    for (int64_t v : {comm_exposed, copy_input, copy_other, data_wait, launch_gap, host_other}) {
      s = saturating_add(s, v);
    }
    return s;
  }
  int64_t idle() const { return saturating_add(saturating_add(data_wait, launch_gap), host_other); }
  CategoryNs& operator+=(const CategoryNs& o) {
    compute = saturating_add(compute, o.compute);
    comm_exposed = saturating_add(comm_exposed, o.comm_exposed);
    copy_input = saturating_add(copy_input, o.copy_input);
    copy_other = saturating_add(copy_other, o.copy_other);
    data_wait = saturating_add(data_wait, o.data_wait);
    launch_gap = saturating_add(launch_gap, o.launch_gap);
    host_other = saturating_add(host_other, o.host_other);
    return *this;
  }
};

// The five walls a person acts on.  They partition the step exactly.
struct WallBreakdown {
  int64_t compute = 0;
  int64_t communication = 0;
  int64_t data = 0;    // data_wait + copy_input
  int64_t launch = 0;  // launch_gap
  int64_t other = 0;   // host_other + copy_other

  static WallBreakdown from(const CategoryNs& c) {
    WallBreakdown w;
    w.compute = c.compute;
    w.communication = c.comm_exposed;
    w.data = saturating_add(c.data_wait, c.copy_input);
    w.launch = c.launch_gap;
    w.other = saturating_add(c.host_other, c.copy_other);
    return w;
  }
  int64_t sum() const {
    int64_t s = compute;
    for (int64_t v : {communication, data, launch, other}) s = saturating_add(s, v);
    return s;
  }
};

enum class Wall : uint8_t { kCompute, kCommunication, kData, kLaunch, kOther };
inline constexpr int kWallCount = 5;
const char* to_string(Wall w);
inline int64_t wall_ns(const WallBreakdown& w, Wall which) {
  switch (which) {
    case Wall::kCompute:
      return w.compute;
    case Wall::kCommunication:
      return w.communication;
    case Wall::kData:
      return w.data;
    case Wall::kLaunch:
      return w.launch;
    case Wall::kOther:
      return w.other;
  }
  return 0;
}

struct StepRow {
  int64_t step_index = 0;    // 0-based position of the step in the run
  int64_t step_number = -1;  // the source's own number (ProfilerStep#N, user number)
  uint16_t device = 0;
  bool warmup = false;
  TimeNs host_begin = 0;
  TimeNs host_end = 0;
  TimeNs window_begin = 0;
  TimeNs window_end = 0;
  CategoryNs cat;
  int64_t comm_total = 0;       // union of collectives in the window (exposed or not)
  int64_t comm_overlapped = 0;  // collectives running while compute runs
  int64_t gpu_busy = 0;         // union of all ops: what nvidia-smi's "utilisation" sees
  uint32_t kernels = 0;         // kernels the step launched on this device
  uint32_t copies = 0;          // memcpy + memset ops the step launched on this device
  uint32_t launches = 0;        // launch API calls inside the step's host range (all devices)
  double flops = 0;             // model FLOPs the user declared for the step (0 = unknown)

  int64_t duration() const { return window_end - window_begin; }
  WallBreakdown walls() const { return WallBreakdown::from(cat); }
};

}  // namespace gpuacct
