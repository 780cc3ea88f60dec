// What the run costs in money, from a price per GPU-hour the user gives (no built-in price
// table: prices change).  Every number is a function of the report's summary, verdict and
// run, so the same code serves a fresh report (`gpuacct analyze`, the library's report) and a
// report read back from disk (`gpuacct report --gpu-hour-price`).  Formulas: docs/cost.md.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace gpuacct {

// The largest price per GPU-hour accepted (CLI flag and GPUACCT_GPU_HOUR_PRICE): a guard
// against a typo's extra digits, far above any real rate.
inline constexpr double kMaxGpuHourPrice = 1e6;

// The job's GPU count: GPU devices with rows in this report x world_size when the run knows
// it (every rank is assumed to drive as many devices as this one), else the devices with
// rows; a report without step rows counts run.devices; 1 when none is known.
// `source` (optional) receives "rows x world_size", "rows", "run.devices" or "assumed".
int64_t job_gpus(const nlohmann::json& report, std::string* source = nullptr);

// The report's `cost` section (docs/report_schema.md) for `gpu_hour_price` (> 0, any
// currency; shown as $).  Needs the report's summary and verdict; a report without steps
// gets a section with `reason` and no money.
nlohmann::json cost_section(const nlohmann::json& report, double gpu_hour_price);

// Adds report["cost"] when gpu_hour_price > 0; nothing otherwise (reports without a price
// stay as they were).
void add_cost_section(double gpu_hour_price, nlohmann::json* report);

// The terminal summary's money line (no trailing newline), or "" for a section without
// money.
std::string cost_line(const nlohmann::json& cost);

}  // namespace gpuacct
