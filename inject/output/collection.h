// The report's `collection` section (docs/report_schema.md): how the live library collected
// the run -- CUPTI's state, clock, buffers, record counts, where the steps came from,
// synchronisation totals and native call sites.  A pure function of the facts the
// lifecycle (Runtime) and the pipeline (Pipeline) hold at exit.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cupti_hooks/activity_parser.h"
#include "cupti_hooks/collector.h"

namespace gpuacct::inject {

// What the lifecycle knows about GPU collection: the collector's state name and one line that
// says why when it is not collecting ("CUPTI not found (...)").
struct GpuCollectionState {
  std::string state = "not_initialized";
  std::string message =
      "the CUDA driver never initialised the library (no CUDA in this process, or it started "
      "before the library was loaded)";
};

struct CollectionFacts {
  GpuCollectionState gpu;
  uint32_t cupti_version = 0;
  cupti::ClockSource clock_source = cupti::ClockSource::kNone;
  int64_t clock_offset_ns = 0;
  int64_t clock_offset_uncertainty_ns = 0;
  int buffer_count = 0;
  int64_t buffer_bytes = 0;
  int64_t buffers_allocated = 0;
  const cupti::ParseTotals* totals = nullptr;  // required
  // "capi", "nvtx", "capi+nvtx", "detected" or "none".
  std::string step_source = "none";
  nlohmann::json native_sites = nlohmann::json::array();
  // NCCL profiler plugin and collectives file (Pipeline::collection_facts); null: neither.
  nlohmann::json nccl_plugin;
  // Hardware counters (GPUACCT_COUNTERS=1; Pipeline::counters_section); null: not asked for.
  nlohmann::json counters;
  // What became of the Python instrumentation (inject/python/python_hook.h python_status).
  std::string python;
  // What was asked of CUPTI (cupti_hooks/cupti_plan.h) and what it took; shown when CUPTI ran.
  cupti::CuptiPlan plan;
  cupti::CallbackSet callbacks;
  bool graph_trace = false;
};

nlohmann::json collection_section(const CollectionFacts& facts);

}  // namespace gpuacct::inject
