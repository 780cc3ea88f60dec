#include "cli/accounting_options.h"

#include <cinttypes>
#include <cstdio>

#include "analysis/report/cost.h"

namespace gpuacct::cli {

std::set<std::string> accounting_option_names() {
  return {"warmup", "launch-latency-us", "host-pause-us"};
}

std::string accounting_options_help() {
  const AccountingConfig d;
  char text[768];
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
                "                            X us (default %" PRId64 ")\n",
                AccountingConfig::kWarmupStepsWholeRun, AccountingConfig::kWarmupStepsProfilerTrace,
                d.launch_latency_threshold_ns / 1000, d.host_pause_threshold_ns / 1000);
  return text;
}

bool parse_accounting_options(Args& args, AccountingConfig* cfg, std::string* error) {
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
  return true;
}

std::string gpu_hour_price_help() {
  return "      --gpu-hour-price P    price of one GPU-hour: adds the cost section and the money\n"
         "                            line (per step, per 1,000 steps, each wall per day;\n"
         "                            docs/cost.md)\n";
}

bool parse_gpu_hour_price(Args& args, double* price, std::string* error) {
  const auto p = args.get_number(kGpuHourPriceOption, 0, 0, kMaxGpuHourPrice);
  if (!p) {
    *error = args.error();
    return false;
  }
  *price = *p;
  return true;
}

}  // namespace gpuacct::cli
