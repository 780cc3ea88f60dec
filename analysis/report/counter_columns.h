// The hardware counter fields of a step row in the report's outputs (docs/counters.md): JSON
// (written only when the row has samples, read back by the step stream reader) and the CSV
// columns appended at the end of step_rows_csv -- and the summary's counter section and line.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/accounting/counter_totals.h"
#include "analysis/model/status.h"
#include "analysis/report/run_summary.h"

namespace gpuacct {

// {"sm_active_pct": 61.2 | null, "sm_active_covered_ns": 123, ...}: each metric's mean over the
// row's compute time and the compute time its samples covered (the weight a summary needs).
nlohmann::json counters_to_json(const CounterTotals& totals);
// The inverse; an error names the bad key (a percentage outside [0, 100], a negative time).
Status counters_from_json(const nlohmann::json& j, CounterTotals* out);

// "sm_active_pct,tensor_active_pct,dram_pct,compute_sol_pct,memory_sol_pct"
std::string counters_csv_header();
// The same columns: the mean, or an empty field when the metric has no covered time.
std::string counters_csv(const CounterTotals& totals);

// Tensor-pipe activity over the whole step time: the compute-time mean x the compute share.
// Equal to MFU when the tensor pipes, while active, run at the dense peak the MFU is measured
// against (docs/counters.md says where that holds); NaN without tensor samples.
double measured_tensor_mfu(const RunSummary& s);

// "compute 61% of step; during compute the tensor pipes were busy 23% -> kernel efficiency is
// the next wall" (the arrow only when the verdict is compute); "" without counter samples.
std::string counters_summary_line(const RunSummary& s);

// The summary's "counters" section (docs/counters.md), null without samples.  `declared_mfu`:
// the MFU from declared FLOPs (model_flops.mfu), NaN when there is none.
nlohmann::json counters_summary_json(const RunSummary& s, double declared_mfu);

}  // namespace gpuacct
