#include "cli/accounting_options.h"

#include <cinttypes>
#include <cstdio>

#include "analysis/input/input.h"
#include "analysis/report/cost.h"

namespace gpuacct::cli {

std::set<std::string> accounting_option_names() {
  return {"warmup", "launch-latency-us", "host-pause-us"};
}

std::string accounting_options_help() {
  const AccountingConfig d;
  char text[1024];
  std::snprintf(text, sizeof text,
                "      --warmup N            warm-up steps, left out of the summary (default: %d "
                "for\n"
                "                            recordings, %d for profiler traces)\n"
                "      --launch-latency-us X idle gap of an already-queued op counted as launch "
                "latency\n"
                "                            below X us (default %" PRId64
                ")\n"
                "      --host-pause-us X     host pause between CUDA calls counted as host-other "
                "above\n"
                "                            X us (default %" PRId64
                ")\n"
                "                            A run's recording carries its settings: an option\n"
                "                            not given takes the run's; one given wins (a note\n"
                "                            says when it differs)\n",
                AccountingConfig::kWarmupStepsWholeRun, AccountingConfig::kWarmupStepsProfilerTrace,
                d.launch_latency_threshold_ns / 1000, d.host_pause_threshold_ns / 1000);
  return text;
}

bool parse_accounting_options(Args& args, AccountingConfig* cfg, std::set<std::string>* given,
                              std::string* error) {
  const AccountingConfig d;
  const auto warmup = args.get_number("warmup", 0, 0, 1e6);
  const auto latency = args.get_number(
      "launch-latency-us", static_cast<double>(d.launch_latency_threshold_ns) / 1000.0, 0, 1e9);
  const auto pause = args.get_number(
      "host-pause-us", static_cast<double>(d.host_pause_threshold_ns) / 1000.0, 0, 1e9);
  if (warmup && *warmup != static_cast<double>(static_cast<int64_t>(*warmup))) {
    *error = "option '--warmup': '" + args.get("warmup") + "' is not a whole number";
    return false;
  }
  if (!warmup || !latency || !pause) {
    *error = args.error();
    return false;
  }
  cfg->warmup_steps =
      args.has("warmup") ? static_cast<int>(*warmup) : AccountingConfig::kWarmupBySource;
  cfg->launch_latency_threshold_ns = static_cast<TimeNs>(*latency * 1000.0);
  cfg->host_pause_threshold_ns = static_cast<TimeNs>(*pause * 1000.0);
  given->clear();
  if (args.has("warmup")) given->insert(kSettingWarmupSteps);
  if (args.has("launch-latency-us")) given->insert(kSettingLaunchLatency);
  if (args.has("host-pause-us")) given->insert(kSettingHostPause);
  return true;
}

std::set<std::string> cost_option_names() {
  return {"gpu-hour-price", "gpu-hardware-cost", "amortization-months", "facility-per-month",
          "power-per-gpu-hour", "tokens-per-step", "samples-per-step"};
}

std::string cost_options_help() {
  return "      --gpu-hour-price P    price of one GPU-hour: adds the cost section and the money\n"
         "                            line (per step, per 1,000 steps, each wall per day;\n"
         "                            docs/cost.md)\n"
         "  owned GPUs, instead of or beside a price (per GPU):\n"
         "      --gpu-hardware-cost C purchase price of one GPU (its share of the server)\n"
         "      --amortization-months M  months the purchase is spread over\n"
         "      --facility-per-month F  facility and operations per month\n"
         "      --power-per-gpu-hour W  power per hour a GPU runs\n"
         "  work of one step of the whole job (the global batch), with a price or owned GPUs:\n"
         "      --tokens-per-step N   adds $ per million tokens and tokens/s per GPU\n"
         "      --samples-per-step N  adds $ per 1,000 samples and samples/s per GPU\n";
}

bool parse_cost_options(Args& args, CostModel* model, std::string* error) {
  const auto price = args.get_number("gpu-hour-price", 0, 0, kMaxGpuHourPrice);
  const auto hardware = args.get_number("gpu-hardware-cost", 0, 0, kMaxCostAmount);
  const auto months = args.get_number("amortization-months", 0, 0, kMaxAmortizationMonths);
  const auto facility = args.get_number("facility-per-month", 0, 0, kMaxCostAmount);
  const auto power = args.get_number("power-per-gpu-hour", 0, 0, kMaxGpuHourPrice);
  const auto tokens = args.get_number("tokens-per-step", 0, 0, kMaxStepWork);
  const auto samples = args.get_number("samples-per-step", 0, 0, kMaxStepWork);
  if (!price || !hardware || !months || !facility || !power || !tokens || !samples) {
    *error = args.error();
    return false;
  }
  CostModel m;
  m.gpu_hour_price = *price;
  m.hardware_cost = *hardware;
  m.amortization_months = *months;
  m.facility_per_month = *facility;
  m.power_per_gpu_hour = *power;
  m.tokens_per_step = *tokens;
  m.samples_per_step = *samples;
  if (const std::string why = m.check(); !why.empty()) {
    *error = why;
    return false;
  }
  *model = m;
  return true;
}

}  // namespace gpuacct::cli
