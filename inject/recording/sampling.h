// Sampled tracing, GPUACCT_SAMPLE=N (docs/overhead.md): CUPTI traces one step in every N and is
// off in between, so that an always-on profiler costs about 1/N of full tracing.
//
// The window edges are step boundaries marked through the C API (gpuacct_step_begin /
// gpuacct_step_mark, which Python's gpuacct.step and the automatic optimizer hook call): the
// thread that marks the step switches CUPTI (cupti::Collector::set_tracing) right there, once
// per boundary, never on the per-launch path.  Steps marked by NVTX ranges or found by step
// detection are seen only by the worker, later: with them every step is traced.
//
// Which steps: the step of index i (0-based, counting C API step begins) is traced when
// i % N == N - 1 -- the first traced step is the N-th, past the slowest first steps.  A step
// begun with CUPTI off is marked untraced (HostRecord kind kStepUntracedKind), and its row is
// host-side only (StepRow::sampled).
#pragma once

#include <cstdint>

namespace gpuacct::inject {

// The decision at one step begin.  Pure state, unit-tested.
class StepSampler {
 public:
  struct Decision {
    bool traced = true;       // the step that begins is traced
    bool switch_on = false;   // CUPTI must be switched on before the step begins
    bool switch_off = false;  // CUPTI must be switched off once the step has begun
  };
  // every <= 1: every step traced, nothing ever switched.
  explicit StepSampler(int every = 1) : every_(every < 1 ? 1 : every) {}
  Decision next_step();
  int every() const { return every_; }
  int64_t steps() const { return next_index_; }

 private:
  int every_;
  int64_t next_index_ = 0;
  bool tracing_ = true;  // CUPTI is on until the first boundary says otherwise
};

// Set once by the runtime at start (GPUACCT_SAMPLE); 1 = off.
void configure_sampling(int every);
int sampling_every();

// Called by the C API's step begin / mark with the time it read first.  Switches CUPTI when the
// window changes -- on before the step's time is taken (re-read into *ts, so a traced step
// never holds the switch), off after -- and returns the HostRecord kind for the step record
// (kStepUntracedKind when the step is not traced, else 0).  O(1) without sampling.
uint8_t begin_sampled_step(int64_t* ts);

}  // namespace gpuacct::inject
