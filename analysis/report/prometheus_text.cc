#include "analysis/report/prometheus_text.h"

#include <algorithm>

#include "analysis/model/json_text.h"

namespace gpuacct {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;

// HELP texts: no backslash or newline in them, so none needs the HELP escapes.  Constant on
// purpose: node-exporter merges a metric from several files only when their HELP lines agree
// (otherwise it reports a gather error and drops samples), so every rank's file has the same
// ones -- and a change here makes files of two gpuacct versions on one node disagree
// (docs/metrics.md, *node-exporter and Prometheus setup*).
constexpr std::string_view kStepSecondsHelp =
    "Step time on a device: the step's window, from its first to its last work on that device; "
    "every finalised step, warm-up included.";
constexpr std::string_view kWallSecondsHelp =
    "Step time by wall (what the time went to), summed over finalised steps; a step's walls sum "
    "to its time.";
constexpr std::string_view kStepsHelp = "Steps finalised on the device.";
constexpr std::string_view kDataLossHelp =
    "Events gpuacct never saw or had to drop: the sum of the report's data-loss counters; "
    "non-zero means the numbers may be incomplete.";

void family_header(std::string& out, std::string_view name, std::string_view help,
                   std::string_view type) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

// name{labels[,extra]} value
void write_sample(std::string& out, std::string_view name, const std::string& labels,
                  std::string_view extra, const std::string& value) {
  out.append(name).append("{").append(labels);
  if (!extra.empty()) out.append(",").append(extra);
  out.append("} ").append(value).append("\n");
}

std::string label(std::string_view name, std::string_view value) {
  return std::string(name) + "=\"" + prometheus_label_value(value) + "\"";
}

}  // namespace

std::string prometheus_label_value(std::string_view value) {
  const std::string safe = json_safe_utf8(value);
  std::string out;
  out.reserve(safe.size());
  for (const char c : safe) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string prometheus_seconds(int64_t ns) {
  // Magnitude as unsigned: INT64_MIN has no positive counterpart.
  const uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  constexpr auto kNs = static_cast<uint64_t>(kNsPerSecond);
  std::string out = (ns < 0 ? "-" : "") + std::to_string(magnitude / kNs);
  uint64_t frac = magnitude % kNs;
  if (frac == 0) return out;
  std::string digits = std::to_string(frac);
  digits.insert(0, 9 - digits.size(), '0');
  while (digits.back() == '0') digits.pop_back();
  return out + "." + digits;
}

void PrometheusMetrics::add_row(const StepRow& row) {
  DeviceTotals& d = devices_[reported_device(row.device)];
  const int64_t duration = row.duration();
  const auto bound =
      std::lower_bound(kStepSecondsBucketsNs.begin(), kStepSecondsBucketsNs.end(), duration);
  ++d.in_bucket[static_cast<size_t>(bound - kStepSecondsBucketsNs.begin())];
  ++d.rows;
  ++rows_;
  d.duration_ns = saturating_add(d.duration_ns, duration);
  const WallBreakdown walls = row.walls();
  for (const WallInfo& w : kWalls) d.walls[w.wall] = saturating_add(d.walls[w.wall], walls[w.wall]);
}

std::string PrometheusMetrics::render(const PrometheusIdentity& id, const Stats& stats) const {
  const std::string process = label("job", id.job) + "," + label("host", id.host) + "," +
                              label("rank", std::to_string(id.rank));
  std::map<int, std::string> labels;  // per device
  for (const auto& [device, totals] : devices_) {
    labels[device] = process + "," + label("device", std::to_string(device));
  }
  std::string out;
  out.reserve(512 + devices_.size() * 2048);

  family_header(out, kStepSecondsMetric, kStepSecondsHelp, "histogram");
  const std::string bucket_name = std::string(kStepSecondsMetric) + "_bucket";
  for (const auto& [device, d] : devices_) {
    int64_t cumulative = 0;
    for (size_t i = 0; i < kStepSecondsBucketsNs.size(); ++i) {
      cumulative += d.in_bucket[i];
      write_sample(out, bucket_name, labels[device],
                   "le=\"" + prometheus_seconds(kStepSecondsBucketsNs[i]) + "\"",
                   std::to_string(cumulative));
    }
    write_sample(out, bucket_name, labels[device], "le=\"+Inf\"", std::to_string(d.rows));
    write_sample(out, std::string(kStepSecondsMetric) + "_sum", labels[device], "",
                 prometheus_seconds(d.duration_ns));
    write_sample(out, std::string(kStepSecondsMetric) + "_count", labels[device], "",
                 std::to_string(d.rows));
  }

  family_header(out, kWallSecondsMetric, kWallSecondsHelp, "counter");
  for (const auto& [device, d] : devices_) {
    for (const WallInfo& w : kWalls) {
      write_sample(out, kWallSecondsMetric, labels[device], label("wall", w.name),
                   prometheus_seconds(d.walls[w.wall]));
    }
  }

  family_header(out, kStepsMetric, kStepsHelp, "counter");
  for (const auto& [device, d] : devices_) {
    write_sample(out, kStepsMetric, labels[device], "", std::to_string(d.rows));
  }

  family_header(out, kDataLossMetric, kDataLossHelp, "counter");
  write_sample(out, kDataLossMetric, process, "", std::to_string(stats.data_loss_total()));
  return out;
}

}  // namespace gpuacct
