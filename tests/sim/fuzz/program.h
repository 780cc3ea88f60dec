// The differential fuzzer's random programs for the simulated device (README.md, "Differential
// fuzzer"): what a program is (settings, threads, actions), the log of what it did, and the
// expected rows that the accounting contract (docs/accounting.md) gives for that log.
//
// A program is generated from a seed and a set of enabled dimensions (generate), run by
// sim_program.cc one action at a time (one thread acts at a time, so the virtual clock makes
// every timestamp exact), logged as calls, ops, data ranges and steps (ProgramLog), and turned
// into expected per-step rows by an implementation of the contract written apart from the
// accountant (expected_rows).
#ifndef GPUACCT_TESTS_SIM_FUZZ_PROGRAM_H_
#define GPUACCT_TESTS_SIM_FUZZ_PROGRAM_H_

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sim_fuzz {

// ---- the program --------------------------------------------------------------------------

// Steps from gpuacct_step_begin/end, gpuacct_step_mark (a step runs to the next mark; the last
// to its thread's last CUDA call), NVTX ranges, or none (detected).
enum class Marks { kCapi, kCapiMark, kNvtx, kNone };
enum class DataMarks { kCapi, kNvtx };
enum class NestedIds { kShared, kRuntime, kDriver };  // GPUACCT_SIM_NESTED_IDS

enum class ActKind {
  kKernel,      // simLaunchKernel
  kCuKernel,    // simCuLaunchKernel (driver API)
  kNested,      // simLaunchKernelNested (a runtime launch making its driver launch)
  kGraph,       // simGraphLaunch
  kAllReduce,   // simNcclAllReduce
  kCopyAsync,   // simMemcpyAsync (pinned, or pageable: blocks the host for H2D / D2H)
  kCopySync,    // simMemcpy
  kMemset,      // simMemsetAsync
  kHostWork,    // simHostWork
  kData,        // data range (push, host work, pop) on the acting thread
  kUserRange,   // a user range (C API or NVTX, no step or data name) around host work
  kSyncStream,  // simStreamSynchronize
  kSyncDevice,  // simDeviceSynchronize(arg): one device, or every device (-1)
  kStepBegin,   // main thread
  kStepEnd,     // main thread, right after a device synchronize
  kSpawn,       // main thread starts worker `arg`
  kExit,        // worker ends (its thread returns)
  kRealSleep,   // real time passes (the virtual clock does not move): the library works live
  kInit,        // main thread: simInit, timing, streams, graphs (after the first step opens
                // when the library is preloaded)
};

struct Action {
  ActKind kind = ActKind::kHostWork;
  int thread = 0;      // 0 = main, 1.. = workers
  int stream = 0;      // index into the program's streams (0 = the default stream)
  int arg = 0;         // graph index, copy kind (1 H2D, 2 D2H, 3 D2D, 4 P2P), thread to spawn,
                       // step index, device to synchronize
  bool pageable = false;
  uint64_t ns = 0;     // GPU duration, host work, data wait or real sleep (µs for the sleep)
  uint64_t pre = 0;    // nested: runtime time before its driver call
  uint64_t tail = 0;   // nested: runtime time after it
  std::string name;    // kernel name (bytes) or data range name
};

struct Thresholds {
  uint64_t launch_latency_ns = 30000;  // AccountingConfig's defaults (docs/accounting.md)
  uint64_t host_pause_ns = 100000;
};

struct Program {
  uint64_t seed = 0;
  std::set<std::string> dims;  // enabled dimensions (sim_program --dims)
  Marks marks = Marks::kCapi;
  DataMarks data_marks = DataMarks::kCapi;
  NestedIds nested_ids = NestedIds::kShared;
  int workers = 0;               // threads besides main
  int devices = 1;
  int streams = 1;               // the first `devices` are the devices' default streams
  std::vector<int> stream_device;  // the device of each stream
  uint64_t launch_cost = 4000;   // simSetLaunchCost
  uint64_t latency = 5000;       // simSetLaunchLatency
  std::vector<std::vector<std::pair<std::string, uint64_t>>> graphs;  // kernels of each graph
  std::vector<std::pair<std::string, std::string>> env;  // the environment it runs under
  bool preload = false;        // the library is preloaded, the first step opens before cuInit
  bool exact = true;           // rows must equal the truth to the nanosecond
  bool loss_allowed = false;   // a fault or a small buffer may lose records (counted)
  bool argv_bytes = false;     // run under a non-UTF-8 file name, with a non-UTF-8 argument
  Thresholds thresholds;       // GPUACCT_LAUNCH_LATENCY_US / GPUACCT_HOST_PAUSE_US
  bool no_gpu = false;         // the library collects no GPU activity (no CUPTI, or disabled)
  std::vector<Action> actions;
  int num_steps = 0;
};

// Every dimension the generator knows, with whether the driver turns it on by default lives in
// tests/e2e/differential.py; unknown names are an error.
const std::vector<std::string>& known_dims();
Program generate(uint64_t seed, const std::set<std::string>& dims);

// ---- what it did ---------------------------------------------------------------------------

enum class CallKind { kLaunch, kCopy, kSync, kOther };
enum OpClass { kCompute = 0, kComm = 1, kCopyInput = 2, kCopyOther = 3 };

struct Call {
  int thread = 0;
  CallKind kind = CallKind::kOther;
  uint64_t start = 0, end = 0;
  bool outer = true;  // false: the driver call nested in a runtime launch
};

struct Op {
  int cls = kCompute;
  uint64_t start = 0, end = 0;
  uint64_t launch_time = 0;  // start of the call whose correlation id the op carries
  uint64_t submitted = 0;    // start of the innermost launch / copy call of its nest
  int thread = 0;            // the launching thread
  int stream = 0;
  int device = 0;
};

struct Range {
  int thread = 0;
  uint64_t start = 0, end = 0;
};

struct StepLog {
  int thread = 0;
  uint64_t begin = 0, end = 0;
};

struct ProgramLog {
  std::vector<Call> calls;
  std::vector<Op> ops;
  std::vector<Range> data;
  std::vector<StepLog> steps;
};

// ---- what the contract says ----------------------------------------------------------------

enum Cat { kCatCompute, kCatComm, kCatCopyInput, kCatCopyOther, kCatData, kCatLaunch, kCatOther,
           kNumCats };
extern const char* const kCatKeys[kNumCats];  // the report's category keys


struct ExpectedRow {
  size_t step = 0;
  int device = 0;
  uint64_t window_begin = 0, window_end = 0;
  uint64_t cat[kNumCats] = {};
  uint64_t launches = 0;
  // Idle time no op ends (the window ends idle), judged on the step's thread: the thread that
  // marked the step (for detected steps the contract does not say which thread that is).
  uint64_t step_thread_ns = 0;
};

// One row per step and device on which an op was launched before the step's end (a host-only
// row, device -1, when there is none), by step then device (the program marks steps without
// overlap).
std::vector<ExpectedRow> expected_rows(const ProgramLog& log, const Thresholds& t);

}  // namespace sim_fuzz

#endif  // GPUACCT_TESTS_SIM_FUZZ_PROGRAM_H_
