#include "analysis/report/counter_columns.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace gpuacct {
namespace {

std::string key(size_t metric, const char* suffix) {
  return std::string(to_string(static_cast<CounterMetric>(metric))) + suffix;
}

}  // namespace

nlohmann::json counters_to_json(const CounterTotals& totals) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 0; i < kCounterMetricCount; ++i) {
    const double mean = totals.mean(static_cast<CounterMetric>(i));
    out[key(i, "_pct")] = std::isnan(mean) ? nlohmann::json(nullptr) : nlohmann::json(mean);
    out[key(i, "_covered_ns")] = totals.covered_ns[i];
  }
  return out;
}

Status counters_from_json(const nlohmann::json& j, CounterTotals* out) {
  if (!j.is_object()) return Status::Error("step row field 'counters' is not an object");
  CounterTotals t;
  for (size_t i = 0; i < kCounterMetricCount; ++i) {
    const std::string pct_key = key(i, "_pct");
    const std::string ns_key = key(i, "_covered_ns");
    const auto pct = j.find(pct_key);
    const auto ns = j.find(ns_key);
    if (ns == j.end() || !ns->is_number_integer() || ns->get<int64_t>() < 0) {
      return Status::Error("step row field 'counters." + ns_key + "' is missing or bad");
    }
    t.covered_ns[i] = ns->get<int64_t>();
    if (t.covered_ns[i] == 0) continue;  // the mean is null
    if (pct == j.end() || !pct->is_number() || !(pct->get<double>() >= 0) ||
        !(pct->get<double>() <= 100)) {
      return Status::Error("step row field 'counters." + pct_key + "' is missing or bad");
    }
    t.weighted[i] = pct->get<double>() * static_cast<double>(t.covered_ns[i]);
  }
  *out = t;
  return Status::Ok();
}

std::string counters_csv_header() {
  std::string out;
  for (size_t i = 0; i < kCounterMetricCount; ++i) out += (i ? "," : "") + key(i, "_pct");
  return out;
}

std::string counters_csv(const CounterTotals& totals) {
  std::ostringstream o;
  o.precision(std::numeric_limits<double>::max_digits10);
  for (size_t i = 0; i < kCounterMetricCount; ++i) {
    if (i) o << ',';
    const double mean = totals.mean(static_cast<CounterMetric>(i));
    if (!std::isnan(mean)) o << mean;
  }
  return o.str();
}

double measured_tensor_mfu(const RunSummary& s) {
  return s.counters.mean(CounterMetric::kTensorActive) / 100.0 * s.compute_share;
}

std::string counters_summary_line(const RunSummary& s) {
  if (!s.counters.any()) return "";
  const double tensor = s.counters.mean(CounterMetric::kTensorActive);
  const double sm = s.counters.mean(CounterMetric::kSmActive);
  char text[256];
  std::string line;
  std::snprintf(text, sizeof text, "compute %.0f%% of step", s.compute_share * 100);
  line = text;
  if (!std::isnan(tensor)) {
    std::snprintf(text, sizeof text, "; during compute the tensor pipes were busy %.0f%%", tensor);
    line += text;
  } else if (!std::isnan(sm)) {
    std::snprintf(text, sizeof text, "; during compute the SMs were active %.0f%%", sm);
    line += text;
  }
  // With another wall the verdict's own wall comes first; only a compute-bound run is told
  // that the kernels themselves are next.
  if (s.verdict.bound == "compute" && !std::isnan(tensor)) {
    line += tensor < 50 ? " -> kernel efficiency is the next wall"
                        : " -> the tensor pipes are mostly busy: less work per step or faster "
                          "hardware is what is left";
  }
  return line;
}

nlohmann::json counters_summary_json(const RunSummary& s, double declared_mfu) {
  if (!s.counters.any()) return nullptr;
  nlohmann::json out = {{"compute_time", counters_to_json(s.counters)},
                        {"line", counters_summary_line(s)}};
  const double measured = measured_tensor_mfu(s);
  out["measured_tensor_mfu"] =
      std::isnan(measured) ? nlohmann::json(nullptr) : nlohmann::json(measured);
  out["declared_mfu"] =
      std::isnan(declared_mfu) ? nlohmann::json(nullptr) : nlohmann::json(declared_mfu);
  return out;
}

}  // namespace gpuacct
