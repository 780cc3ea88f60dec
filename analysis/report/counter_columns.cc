#include "analysis/report/counter_columns.h"

#include <cmath>
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

}  // namespace gpuacct
