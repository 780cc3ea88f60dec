// Configuration of the injected library: every GPUACCT_* environment variable, parsed once at
// start.  docs/configuration.md publishes the same table; keep the two in step.
//
// A bad value never stops the program: parse() appends one warning per bad variable
// ("GPUACCT_FLUSH_MS='abc' is not a number in [1, 60000]; using 100", said with log_line(),
// inject/log.h) and keeps the default.  The value is shown by quote_value(): one line, bounded,
// whatever it holds.  A GPUACCT_OUTPUT_PATTERN whose file name would be too long for the file
// system falls back to the default (with a warning) rather than losing every output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/accounting/accounting_config.h"
#include "analysis/report/cost.h"
#include "cupti_hooks/collector.h"

namespace gpuacct::inject {

// Defaults the hot path needs before the configuration is read (HotConfig, recorder.h).
inline constexpr int kDefaultRingRecords = 8192;
// With the calls timed by callbacks (a record per traced CUDA call, cupti::ApiSource): 4 MiB a
// thread that makes CUDA calls, a tick of ~65,000 launches.
inline constexpr int kApiCallRingRecords = 1 << 16;
inline constexpr bool kDefaultStacks = true;
// How often the live metrics file (GPUACCT_PROM_DIR) is rewritten: a few seconds, below any
// Prometheus scrape interval (15-60 s), so a scrape never sees values much older than that.
inline constexpr int kDefaultPromPeriodMs = 5000;

// Every default is written once: the accounting thresholds are AccountingConfig's, the CUPTI
// settings CollectorOptions', the rest here.
struct Config {
  bool enable = true;            // GPUACCT_ENABLE: 0 = no GPU collection (host ranges only)
  std::string output_dir = ".";  // GPUACCT_OUTPUT_DIR
  std::string output_pattern = "gpuacct_{host}_{pid}_rank{rank}";  // GPUACCT_OUTPUT_PATTERN
  // The accounting defaults are AccountingConfig's (written once there).
  int warmup_steps = AccountingConfig::kWarmupStepsWholeRun;  // GPUACCT_WARMUP_STEPS
  int64_t launch_latency_us =
      AccountingConfig{}.launch_latency_threshold_ns / 1000;  // GPUACCT_LAUNCH_LATENCY_US
  int64_t host_pause_us = AccountingConfig{}.host_pause_threshold_ns / 1000;  // GPUACCT_HOST_PAUSE_US
  int64_t pending_event_limit = AccountingConfig{}.pending_event_limit;  // GPUACCT_PENDING_EVENT_LIMIT
  std::vector<std::string> step_patterns;  // GPUACCT_STEP_PATTERNS (comma separated)
  std::vector<std::string> data_patterns;  // GPUACCT_DATA_PATTERNS (comma separated)
  int flush_ms = static_cast<int>(cupti::CollectorOptions{}.flush_period_ms);  // GPUACCT_FLUSH_MS
  bool record = false;                                                         // GPUACCT_RECORD
  // GPUACCT_BUFFER_MB (size of one CUPTI activity buffer)
  int buffer_mb = static_cast<int>(cupti::CollectorOptions{}.buffer_bytes >> 20);
  // GPUACCT_BUFFER_COUNT (buffers in the pool, the cap)
  int buffer_count = cupti::CollectorOptions{}.buffer_count;
  bool quiet = false;            // GPUACCT_QUIET: no terminal summary on stderr
  bool python = true;            // GPUACCT_PYTHON: import gpuacct._auto in CPython
  bool auto_steps = true;        // GPUACCT_AUTO_STEPS: detect steps when nothing marks them
  bool stacks = kDefaultStacks;  // GPUACCT_STACKS: native call sites of syncs / late launches
  int ring_records = kDefaultRingRecords;  // GPUACCT_RING_RECORDS: per-thread ring capacity
  bool ring_records_set = false;           // GPUACCT_RING_RECORDS was given (and valid)
  // GPUACCT_SAMPLE: CUPTI traces 1 step in N (inject/recording/sampling.h); 1 = all
  int sample_every = 1;
  // GPUACCT_COUNTERS: hardware counters per step (CUPTI PM sampling, docs/counters.md); off by
  // default until its overhead is measured on a GPU.
  bool counters = false;
  // GPUACCT_COUNTERS_INTERVAL_US: their sampling interval.
  int counters_interval_us = static_cast<int>(cupti::CounterOptions::kDefaultIntervalUs);
  // GPUACCT_COUNTERS_DEBUG: the raw sampling diagnostics in the report's counters section
  // (per device `debug`: trigger and interval set, set-up call times, the first samples' raw
  // times against cuptiGetTimestamp and raw values); for tests/gpu/check.sh.
  bool counters_debug = false;
  // GPUACCT_COUNTERS_EXPERIMENTAL: GPUACCT_COUNTERS=1 takes effect only with it.  On the first
  // GPU the counters ran on (an H200, 2026-12-04, docs/gpu_results.md) every metric read 0 %
  // and one program (examples/tensor_matmul) was killed by a segfault inside NVIDIA's
  // libnvperf_host.so: until a GPU run shows them right, asking for counters alone leaves
  // them off with one line (counters_held_back), never a crash in a user's job.
  bool counters_experimental = false;
  bool counters_held_back = false;
  std::string cupti_library = cupti::CollectorOptions{}.library;  // GPUACCT_CUPTI_LIBRARY
  // GPUACCT_GRAPH_NODES: CUDA graph launches traced node by node (a kernel record per node)
  // instead of one GRAPH_TRACE record per launch.
  bool graph_nodes = false;
  // What is asked of CUPTI (cupti_hooks/cupti_plan.h): the design, unless changed for measuring
  // by GPUACCT_CUPTI_KINDS, _API_RECORDS, _CALLBACKS, _RESET_CALLBACK, _TIMESTAMPS,
  // _SAMPLE_SWITCH (docs/overhead.md, "Experiment settings").  GPUACCT_GRAPH_NODES=1 takes
  // GRAPH_TRACE out of its kinds.
  cupti::CuptiPlan cupti_plan;
  // GPUACCT_GPU_HOUR_PRICE (rent) and the owned-GPU model (GPUACCT_GPU_HARDWARE_COST,
  // GPUACCT_AMORTIZATION_MONTHS, GPUACCT_FACILITY_PER_MONTH, GPUACCT_POWER_PER_GPU_HOUR): the
  // report's cost section and the summary's money line (analysis/report/cost.h,
  // docs/cost.md).  None given: none.
  CostModel cost;
  // GPUACCT_PROM_DIR: live fleet metrics as a Prometheus textfile (node-exporter's textfile
  // collector directory), rewritten every GPUACCT_PROM_PERIOD_MS (inject/output/prom_output.h,
  // docs/metrics.md).  Empty: none.
  std::string prom_dir;
  int prom_period_ms = kDefaultPromPeriodMs;  // GPUACCT_PROM_PERIOD_MS

  // Identity (not configurable: derived from the environment).
  std::string host;
  int64_t pid = 0;
  int rank = -1;       // RANK, LOCAL_RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK (first set)
  int world_size = 0;  // WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE
  std::string job_id;  // GPUACCT_JOB_ID, SLURM_JOB_ID, TORCHELASTIC_RUN_ID, LSB_JOBID, PBS_JOBID

  static std::vector<std::string> default_step_patterns();
  static std::vector<std::string> default_data_patterns();

  AccountingConfig accounting() const;
  // The pattern with {host} {pid} {rank} substituted (a file name without extension).
  std::string output_name() const;
  // output_dir/output_name().
  std::string output_base() const;
};

// Reads a value: getenv by default; tests inject a map.
using EnvLookup = const char* (*)(const char* name);

// Parses every variable.  Warnings (one line each, without trailing newline) are appended to
// *warnings.  Never throws.
// The one line GPUACCT_COUNTERS=1 alone gives (Config::counters_held_back).
inline constexpr const char* kCountersHeldBack =
    "GPUACCT_COUNTERS=1 is held back: on an H200 the hardware counters read 0 % and crashed one "
    "program inside NVIDIA's libnvperf_host.so (docs/counters.md); hardware counters stay off "
    "(GPUACCT_COUNTERS_EXPERIMENTAL=1 as well to try them anyway)";

Config parse_config(EnvLookup env, std::vector<std::string>* warnings);

// `value` quoted for a one-line warning: control and non-ASCII bytes as \n \t \xHH, quotes
// and backslashes escaped, cut after 64 bytes with "... (N bytes)".
std::string quote_value(std::string_view value);

// Splits "a,b , c" into {"a","b","c"}; empty items dropped.
std::vector<std::string> split_patterns(std::string_view text);

}  // namespace gpuacct::inject
