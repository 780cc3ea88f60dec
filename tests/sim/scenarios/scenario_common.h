// Shared harness of the sim scenario programs: flags, step / data marks (gpuacct C API through
// gpuacct_dynamic.h, NVTX, or none), planted-truth bookkeeping and the truth JSON writer.
//
// Every scenario designs its timeline so the expected per-step category split follows from its
// parameters (launch cost, launch latency, op durations).  The harness checks the design against
// the engine: at each step end the sim clock must equal the designed GPU window end (virtual
// clock only), otherwise the scenario exits with status 3 -- so a planted truth cannot silently
// drift from what the sim actually produced.
#ifndef GPUACCT_TESTS_SIM_SCENARIOS_SCENARIO_COMMON_H_
#define GPUACCT_TESTS_SIM_SCENARIOS_SCENARIO_COMMON_H_

#include <gpuacct/gpuacct_dynamic.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "sim_cuda.h"

namespace sim_scenario {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * 1000;

enum class Marks { kCapi, kNvtx, kNone };

// Expected nanoseconds per accounting category for one step's GPU window.
struct Expect {
  uint64_t compute = 0;
  uint64_t communication_exposed = 0;
  uint64_t copy = 0;
  uint64_t data_wait = 0;
  uint64_t launch_gap = 0;
  uint64_t host_other = 0;
  uint64_t Total() const {
    return compute + communication_exposed + copy + data_wait + launch_gap + host_other;
  }
};

struct StepRecord {
  uint64_t host_begin = 0;
  uint64_t host_end = 0;
  uint64_t launch_calls_at_begin = 0;
  uint64_t launches = 0;  // launch calls the program made in the step (simLaunchCalls)
  uint64_t window_begin = 0;
  uint64_t window_end = 0;  // designed (= measured under the virtual clock)
  uint64_t measured_end = 0;
  Expect expect;
};

class Harness {
 public:
  Harness(int argc, char** argv, const char* name, int default_steps)
      : name_(name), steps_(default_steps) {
    for (int i = 1; i < argc; ++i) {
      const char* a = argv[i];
      if (std::strncmp(a, "--marks=", 8) == 0) {
        const char* m = a + 8;
        if (std::strcmp(m, "capi") == 0) {
          marks_ = Marks::kCapi;
        } else if (std::strcmp(m, "nvtx") == 0) {
          marks_ = Marks::kNvtx;
        } else if (std::strcmp(m, "none") == 0) {
          marks_ = Marks::kNone;
        } else {
          Usage();
        }
      } else if (std::strncmp(a, "--steps=", 8) == 0) {
        steps_ = std::atoi(a + 8);
        if (steps_ <= 0) Usage();
      } else {
        Usage();
      }
    }
  }

  int steps() const { return steps_; }
  Marks marks() const { return marks_; }

  // simInit + fixed timing parameters (scenarios never depend on the env defaults).
  void Init(int devices, uint64_t launch_cost, uint64_t latency) {
    if (simInit(devices) != SIM_OK) {
      std::fprintf(stderr, "%s: simInit failed\n", name_);
      std::exit(2);
    }
    simSetLaunchCost(launch_cost);
    simSetLaunchLatency(latency);
    // gpuacct_dyn() resolves once; the injected library is loaded by now (cuInit ran), unless
    // a step opened before Init (the library was preloaded then).
    if (api_ == nullptr) api_ = gpuacct_dyn();
    Param("launch_cost_ns", launch_cost);
    Param("launch_latency_ns", latency);
    Param("num_devices", static_cast<uint64_t>(devices));
  }

  void Param(const char* key, uint64_t value) { params_.emplace_back(key, value); }

  void StepBegin(int index) {
    // The harness's own first-call costs come before the first step's host begin is read (the
    // C API look-up; the NVTX loader, which loads the injection on the first NVTX call of any
    // kind, and a domain does not start the library): that step's begin then measures only the
    // library's first mark (e2e first_mark).
    if (records_.empty() && marks_ == Marks::kCapi) Api();
    if (records_.empty() && marks_ == Marks::kNvtx) nvtxDomainCreateA("sim_harness");
    if (records_.empty()) real_begin_ = std::chrono::steady_clock::now();
    StepRecord r;
    r.host_begin = simNow();
    r.window_begin = records_.empty() ? r.host_begin : records_.back().measured_end;
    r.launch_calls_at_begin = simLaunchCalls();
    records_.push_back(r);
    if (marks_ == Marks::kCapi) {
      Api()->step_begin(index);
    } else if (marks_ == Marks::kNvtx) {
      nvtxRangePushA("train_step");
    }
  }

  // Call right after the step's final synchronize.
  void StepEnd(const Expect& e) {
    StepRecord& r = records_.back();
    r.measured_end = simNow();
    r.launches = simLaunchCalls() - r.launch_calls_at_begin;
    r.expect = e;
    r.window_end = r.window_begin + e.Total();
    if (simGetClockMode() == SIM_CLOCK_VIRTUAL && r.measured_end != r.window_end) {
      std::fprintf(stderr,
                   "%s: step %zu planted truth does not match the sim: designed window end %" PRIu64
                   ", sim clock %" PRIu64 " (diff %" PRId64 " ns)\n",
                   name_, records_.size() - 1, r.window_end, r.measured_end,
                   static_cast<int64_t>(r.measured_end - r.window_end));
      mismatch_ = true;
    }
    if (marks_ == Marks::kCapi) {
      Api()->step_end();
    } else if (marks_ == Marks::kNvtx) {
      nvtxRangePop();
    }
    r.host_end = simNow();
    real_end_ = std::chrono::steady_clock::now();
  }

  void DataPush() {
    if (marks_ == Marks::kCapi) {
      Api()->data_push("dataloader");
    } else if (marks_ == Marks::kNvtx) {
      nvtxRangePushA("dataloader");
    }
  }
  void DataPop() {
    if (marks_ == Marks::kCapi) {
      Api()->data_pop();
    } else if (marks_ == Marks::kNvtx) {
      nvtxRangePop();
    }
  }

  // Writes the truth (when GPUACCT_SIM_TRUTH is set), flushes the library, shuts the sim down.
  int Finish(const char* dominant) {
    if (marks_ == Marks::kCapi) Api()->flush();
    // The CPU proxy of a profiler's overhead (bench/sim_overhead.py): real time per step, first
    // step begin to last step end -- what the launches, their callbacks and records cost here.
    if (const char* b = std::getenv("GPUACCT_SIM_REAL_TIME"); b != nullptr && *b == '1') {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(real_end_ - real_begin_);
      std::printf("%s: real_ns_per_step=%.0f\n", name_,
                  records_.empty() ? 0.0
                                   : static_cast<double>(ns.count()) /
                                         static_cast<double>(records_.size()));
    }
    const char* path = std::getenv("GPUACCT_SIM_TRUTH");
    if (path != nullptr && *path != '\0' && !WriteTruth(path, dominant)) {
      std::fprintf(stderr, "%s: cannot write truth to %s\n", name_, path);
      simShutdown();
      return 2;
    }
    simShutdown();
    return mismatch_ ? 3 : 0;
  }

 private:
  // The C API; resolved on first use (before Init only when a step opens before cuInit).
  const gpuacct_dyn_api* Api() {
    if (api_ == nullptr) api_ = gpuacct_dyn();
    return api_;
  }

  [[noreturn]] void Usage() const {
    std::fprintf(stderr, "usage: sim_scenario_%s [--marks=capi|nvtx|none] [--steps=N]\n", name_);
    std::exit(2);
  }

  static void WriteExpect(std::FILE* f, const Expect& e) {
    std::fprintf(
        f,
        "{\"compute\": %" PRIu64 ", \"communication_exposed\": %" PRIu64 ", \"copy\": %" PRIu64
        ", \"data_wait\": %" PRIu64 ", \"launch_gap\": %" PRIu64 ", \"host_other\": %" PRIu64 "}",
        e.compute, e.communication_exposed, e.copy, e.data_wait, e.launch_gap, e.host_other);
  }

  bool WriteTruth(const char* path, const char* dominant) const {
    std::FILE* f = std::fopen(path, "w");
    if (f == nullptr) return false;
    const bool exact = simGetClockMode() == SIM_CLOCK_VIRTUAL;
    const char* marks = marks_ == Marks::kCapi ? "capi" : marks_ == Marks::kNvtx ? "nvtx" : "none";
    std::fprintf(f, "{\n  \"schema\": \"gpuacct-sim-truth/1\",\n  \"scenario\": \"%s\",\n", name_);
    std::fprintf(f, "  \"marks\": \"%s\",\n  \"clock\": \"%s\",\n  \"exact\": %s,\n", marks,
                 exact ? "virtual" : "hybrid", exact ? "true" : "false");
    std::fprintf(f, "  \"num_steps\": %zu,\n  \"kernels_total\": %" PRIu64 ",\n", records_.size(),
                 simKernelsLaunched());
    std::fprintf(f, "  \"params\": {");
    for (size_t i = 0; i < params_.size(); ++i) {
      std::fprintf(f, "%s\"%s\": %" PRIu64, i ? ", " : "", params_[i].first.c_str(),
                   params_[i].second);
    }
    std::fprintf(f, "},\n");
    std::fprintf(f,
                 "  \"categories\": [\"compute\", \"communication_exposed\", \"copy\", "
                 "\"data_wait\", \"launch_gap\", \"host_other\"],\n");
    std::fprintf(f, "  \"dominant\": \"%s\",\n", dominant);
    Expect total;
    std::fprintf(f, "  \"steps\": [\n");
    for (size_t i = 0; i < records_.size(); ++i) {
      const StepRecord& r = records_[i];
      total.compute += r.expect.compute;
      total.communication_exposed += r.expect.communication_exposed;
      total.copy += r.expect.copy;
      total.data_wait += r.expect.data_wait;
      total.launch_gap += r.expect.launch_gap;
      total.host_other += r.expect.host_other;
      std::fprintf(f,
                   "    {\"index\": %zu, \"host_begin_ns\": %" PRIu64 ", \"host_end_ns\": %" PRIu64
                   ", \"gpu_window_begin_ns\": %" PRIu64 ", \"gpu_window_end_ns\": %" PRIu64
                   ", \"wall_ns\": %" PRIu64 ", \"launches\": %" PRIu64 ", \"expected_ns\": ",
                   i, r.host_begin, r.host_end, r.window_begin, r.window_end, r.expect.Total(),
                   r.launches);
      WriteExpect(f, r.expect);
      std::fprintf(f, "}%s\n", i + 1 < records_.size() ? "," : "");
    }
    std::fprintf(f, "  ],\n  \"totals_ns\": ");
    WriteExpect(f, total);
    std::fprintf(f, ",\n  \"total_wall_ns\": %" PRIu64 "\n}\n", total.Total());
    return std::fclose(f) == 0;
  }

  const char* name_;
  int steps_;
  Marks marks_ = Marks::kCapi;
  const gpuacct_dyn_api* api_ = nullptr;
  std::vector<std::pair<std::string, uint64_t>> params_;
  std::vector<StepRecord> records_;
  std::chrono::steady_clock::time_point real_begin_{}, real_end_{};
  bool mismatch_ = false;
};

}  // namespace sim_scenario

#endif  // GPUACCT_TESTS_SIM_SCENARIOS_SCENARIO_COMMON_H_
