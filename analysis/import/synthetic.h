// A synthetic training loop: a tiny host + GPU simulator that produces the events a real run
// would, with walls designed by its parameters.  Used by unit/property tests, the core
// benchmark, and `gpuacct synth`, which made the bundled sample recording.
//
// Model, per step on one host thread: [data range: data_wait] -> CPU work -> H2D copy ->
// kernels (each launch costs launch_cost on the host, starts launch_latency after its call,
// queues behind earlier work on its stream) -> optional collective on a second stream after
// half the kernels -> tiny kernels -> host pause (logging) -> cudaStreamSynchronize.  Every device
// gets the same work.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "analysis/model/event_sink.h"
#include "analysis/model/name_table.h"
#include "analysis/model/status.h"

namespace gpuacct {

struct SyntheticSpec {
  int steps = 20;
  int devices = 1;
  int kernels_per_step = 50;
  TimeNs kernel_ns = 200'000;
  TimeNs launch_cost_ns = 6'000;
  TimeNs launch_latency_ns = 4'000;
  TimeNs data_wait_ns = 2'000'000;
  TimeNs h2d_ns = 300'000;  // 0 = no copy
  bool h2d_pageable = false;
  TimeNs collective_ns = 0;       // 0 = no collective
  TimeNs host_pause_ns = 0;       // per step, after the launches
  TimeNs cpu_work_ns = 0;         // per step, after the data range, before any launch
  int tiny_kernels_per_step = 0;  // launched after the collective, back to back
  TimeNs tiny_kernel_ns = 3'000;
  double jitter = 0.05;  // relative, uniform, deterministic from seed
  uint64_t seed = 1;
  bool use_markers = false;   // step boundaries as markers instead of ranges
  bool emit_steps = true;     // false: no step ranges or markers (steps must be detected)
  double flops_per_step = 0;  // > 0: a step-FLOPs marker per step (gpuacct_set_step_flops)
  // Deliver events in batches of this many, with watermarks, the way CUPTI buffers arrive:
  // API calls and each stream's ops in order, the sources interleaved at random (0 = plain
  // order, no watermarks).
  int shuffle_batch = 0;
  // Without shuffling: a watermark after each step (its host end: every later event ends
  // after it), as a live run's recording carries them, so a reader finalises steps as it goes
  // instead of holding the whole run (`gpuacct synth`).
  bool step_watermarks = false;
  TimeNs start_ns = 1'700'000'000'000'000'000;
  // Planted changes (change-point tests and demos, docs/change_points.md), off by default and
  // drawing no random numbers: from step shift_step on (>= 0), each step waits
  // shift_data_wait_ns more for data (a DataLoader worker lost); every spike_every-th step
  // (step % spike_every == spike_every - 1) the host pauses spike_host_ns more after its
  // launches (a checkpoint).
  int shift_step = -1;
  TimeNs shift_data_wait_ns = 0;
  int spike_every = 0;
  TimeNs spike_host_ns = 0;

  // Named presets: "demo", "data_bound", "launch_bound", "comm_bound", "copy_bound",
  // "balanced", "bench".
  static StatusOr<SyntheticSpec> preset(const std::string& name);
};

// Emits the run into `sink` (ends with a watermark past the last event when shuffling).
// Returns the number of events emitted.  `keep_going` (optional) is asked before each step
// (its index): false ends the run there (a writer that failed stops the generation).
uint64_t generate_synthetic(const SyntheticSpec& spec, NameTable& names, EventSink& sink,
                            const std::function<bool(int step)>& keep_going = {});

}  // namespace gpuacct
