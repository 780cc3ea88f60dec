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
// The largest owned-GPU amount (hardware, facility per month) and amortization accepted.
inline constexpr double kMaxCostAmount = 1e9;
inline constexpr double kMaxAmortizationMonths = 1200;
// The most tokens or samples one step may declare.
inline constexpr double kMaxStepWork = 1e15;
// Hours in an average month (365.25 x 24 / 12): owned GPUs' monthly costs per hour.
inline constexpr double kHoursPerMonth = 730.5;

// What a GPU-hour costs: a rent price, or the cost model of owned GPUs (all amounts per GPU,
// any currency), or both (then the report also gives the rent-versus-own break-even).
struct CostModel {
  double gpu_hour_price = 0;  // rent: price of one GPU-hour; 0 = none
  double hardware_cost = 0;   // owned: purchase price of one GPU (its share of the server); 0 = none
  double amortization_months = 0;  // owned: months the hardware cost is spread over (> 0)
  double facility_per_month = 0;   // owned: facility and operations per GPU per month
  double power_per_gpu_hour = 0;   // owned: power (and cooling) per hour a GPU runs
  // The work of one step of the whole job (all ranks: the global batch), declared by the user,
  // the same for every step; 0 = not declared.  Gives $ per million tokens / per 1,000 samples
  // and the throughput per GPU.
  double tokens_per_step = 0;
  double samples_per_step = 0;

  bool owned() const { return hardware_cost > 0 || facility_per_month > 0; }
  bool any() const { return gpu_hour_price > 0 || owned(); }
  // "" when usable, else what is wrong (an owned model needs amortization months when it has a
  // hardware cost).
  std::string check() const;
};

// The job's GPU count: GPU devices with rows in this report x world_size when the run knows
// it (every rank is assumed to drive as many devices as this one), else the devices with
// rows; a report without step rows counts run.devices; 1 when none is known.
// `source` (optional) receives "rows x world_size", "rows", "run.devices" or "assumed".
int64_t job_gpus(const nlohmann::json& report, std::string* source = nullptr);

// The report's `cost` section (docs/report_schema.md) for `model` (any currency; shown as $):
// the money at the rent price, or without one at the owned GPUs' hourly cost, and `owned`
// for an owned model.  Needs the report's summary and verdict; a report without steps gets a
// section with `reason` and no money.
nlohmann::json cost_section(const nlohmann::json& report, const CostModel& model);

// Adds report["cost"] when model.any() and model.check() is empty; nothing otherwise (reports
// without a price stay as they were).
void add_cost_section(const CostModel& model, nlohmann::json* report);

// The terminal summary's money line (no trailing newline), or "" for a section without
// money.
std::string cost_line(const nlohmann::json& cost);

}  // namespace gpuacct
