// The hardware counter fields of a step row in the report's outputs (docs/counters.md): JSON
// (written only when the row has samples, read back by the step stream reader) and the CSV
// columns appended at the end of step_rows_csv.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/accounting/counter_totals.h"
#include "analysis/model/status.h"

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

}  // namespace gpuacct
