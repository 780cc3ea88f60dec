#include "analysis/compare/run_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <type_traits>

#include "analysis/model/stats.h"
#include "analysis/report/run_summary.h"

namespace gpuacct {
namespace {

using nlohmann::json;

// `j[key]` when it holds a T, else `fallback`: a report edited by hand or written by another
// version must not turn a wrong type into an exception.
template <typename T>
T field_or(const json& j, const char* key, T fallback) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->get<std::string>() : fallback;
  } else if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->get<bool>() : fallback;
  } else {
    return it->is_number_integer() ? it->get<T>() : fallback;
  }
}

// The kernels a report lists, and whether its source knows kernels at all.
void read_kernels(const json& report, DiffRun* run) {
  const auto top = report.find("top_kernels");
  if (top == report.end() || !top->is_array()) {
    run->kernels_unknown_why = "its report lists no kernels";
    return;
  }
  for (const json& k : *top) {
    if (!k.is_object()) continue;
    KernelTime t;
    t.name = field_or<std::string>(k, "name", "?");
    t.exposed_ns = field_or<int64_t>(k, "exposed_ns", 0);
    t.count = field_or<int64_t>(k, "count", 0);
    t.communication = field_or<bool>(k, "communication", false);
    run->kernels.push_back(std::move(t));
  }
  if (run->kernels.empty()) {
    // A step stream's summary (and a report made from one) has rows, not kernels.
    run->kernels_unknown_why = "its source holds no kernels (a step stream's rows)";
    return;
  }
  run->kernels_known = true;
  // The report's own limit when it says it (a newer writer), else the accountant's default.
  const int64_t limit =
      field_or<int64_t>(run->config, "top_kernels", AccountingConfig{}.top_kernels);
  run->kernel_list_limit = static_cast<size_t>(std::max<int64_t>(limit, 0));
}

}  // namespace

StatusOr<DiffRun> diff_run_from_report(const json& report, const std::vector<StepRow>& rows,
                                       std::string label) {
  DiffRun run;
  run.label = std::move(label);
  if (!report.is_object()) return Status::Error(run.label + ": not a gpuacct report");
  for (const auto& [key, section] :
       {std::pair{"run", &run.run}, std::pair{"config", &run.config}}) {
    const auto it = report.find(key);
    if (it != report.end() && it->is_object()) *section = *it;
  }
  run.steps_detected = report.contains("step_detection");
  // The summary's own rule for which steps count (warm-up flags and slow start).
  const RunSummary summary = summarize(rows, Stats{});
  const std::set<int64_t> slow(summary.slow_start_steps.begin(), summary.slow_start_steps.end());
  std::map<int64_t, const StepRow*> slowest;  // step index -> its slowest device's row
  std::set<int64_t> warm, kernel_steps;
  for (const StepRow& r : rows) {
    if (!r.warmup) kernel_steps.insert(r.step_index);
    if (r.warmup || slow.count(r.step_index) > 0) {
      warm.insert(r.step_index);
      continue;
    }
    const StepRow*& s = slowest[r.step_index];
    if (s == nullptr || r.duration() > s->duration()) s = &r;
  }
  run.steps.reserve(slowest.size());
  for (const auto& [index, row] : slowest) run.steps.push_back(row->walls());
  run.warmup_steps = static_cast<int64_t>(warm.size());
  run.kernel_steps = static_cast<int64_t>(kernel_steps.size());
  if (run.steps.empty()) {
    return Status::Error(run.label + ": no summary step to compare (" +
                         std::to_string(rows.size()) + " rows, " +
                         std::to_string(run.warmup_steps) + " warm-up steps)");
  }
  read_kernels(report, &run);
  return run;
}

namespace {

// splitmix64: a small, fast generator whose sequence is fixed by its definition, so a seed
// gives the same intervals on every platform and standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Two draws uniform in [0, n), n < 2^32, by multiply-shift of each half of one output
  // (bias below n / 2^32: under 3e-5 for a million steps).
  std::pair<size_t, size_t> two_below(size_t n) {
    const uint64_t r = next();
    return {static_cast<size_t>(((r >> 32) * uint64_t{n}) >> 32),
            static_cast<size_t>(((r & 0xFFFFFFFFull) * uint64_t{n}) >> 32)};
  }

 private:
  uint64_t state_;
};

constexpr size_t kSlots = kWallCount;

// A run's walls per step in ms, one row of kSlots per step: what the bootstrap resamples.
std::vector<double> step_walls_ms(const DiffRun& run) {
  std::vector<double> out;
  out.reserve(run.steps.size() * kSlots);
  for (const WallBreakdown& w : run.steps) {
    for (const WallInfo& k : kWalls) out.push_back(static_cast<double>(w[k.wall]) / 1e6);
  }
  return out;
}

std::array<double, kSlots> mean_walls(const std::vector<double>& walls) {
  std::array<double, kSlots> sum{};
  const size_t n = walls.size() / kSlots;
  for (size_t i = 0; i < n; ++i) {
    for (size_t w = 0; w < kSlots; ++w) sum[w] += walls[i * kSlots + w];
  }
  for (double& s : sum) s /= static_cast<double>(std::max<size_t>(n, 1));
  return sum;
}

// One resample's mean walls: n steps drawn with replacement.  The draws are counted first
// (`counts`: n small counters, random increments that stay in cache) and the walls then summed
// in one sequential pass, weighted by the counts: the same multinomial resample as adding the
// drawn steps one by one, without a cache miss per draw (4x faster at 100k steps).
std::array<double, kSlots> resampled_mean(const std::vector<double>& walls, SplitMix64& rng,
                                          std::vector<uint32_t>& counts) {
  const size_t n = walls.size() / kSlots;
  counts.assign(n, 0);
  for (size_t i = 0; i < n; i += 2) {
    const auto [a, b] = rng.two_below(n);
    ++counts[a];
    if (i + 1 < n) ++counts[b];
  }
  std::array<double, kSlots> sum{};
  for (size_t i = 0; i < n; ++i) {
    const double c = counts[i];
    const double* step = &walls[i * kSlots];
    for (size_t w = 0; w < kSlots; ++w) sum[w] += c * step[w];
  }
  for (double& v : sum) v /= static_cast<double>(n);
  return sum;
}

// Percentile intervals of the change of every wall (slots 0..kSlots-1) and of the step time
// (slot kSlots), from `resamples` bootstrap replicates.
std::array<std::pair<double, double>, kSlots + 1> bootstrap_intervals(
    const std::vector<double>& base, const std::vector<double>& next, const DiffOptions& opt) {
  const auto resamples = static_cast<size_t>(std::max(opt.resamples, 1));
  std::array<std::vector<double>, kSlots + 1> deltas;
  for (auto& d : deltas) d.reserve(resamples);
  SplitMix64 rng(opt.seed);
  std::vector<uint32_t> counts;
  for (size_t r = 0; r < resamples; ++r) {
    const std::array<double, kSlots> b = resampled_mean(base, rng, counts);
    const std::array<double, kSlots> n = resampled_mean(next, rng, counts);
    double total = 0;
    for (size_t w = 0; w < kSlots; ++w) {
      deltas[w].push_back(n[w] - b[w]);
      total += n[w] - b[w];
    }
    deltas[kSlots].push_back(total);
  }
  const double tail = (1.0 - std::clamp(opt.confidence, 0.0, 1.0)) / 2.0 * 100.0;
  std::array<std::pair<double, double>, kSlots + 1> out;
  for (size_t s = 0; s <= kSlots; ++s) {
    out[s] = {percentile(deltas[s], tail), percentile(deltas[s], 100.0 - tail)};
  }
  return out;
}

void judge(Change& c, double practical_ms) {
  c.delta_ms = c.new_ms - c.base_ms;
  c.significant = c.interval_ms.has_value() &&
                  (c.interval_ms->first > 0 || c.interval_ms->second < 0) &&
                  std::fabs(c.delta_ms) >= practical_ms;
}

// Exposed ms per step of each kernel a run lists, and the communication flag.
using KernelMs = std::map<std::string, std::pair<double, bool>>;
KernelMs kernel_ms_per_step(const DiffRun& run) {
  KernelMs ms;
  const double steps = static_cast<double>(std::max<int64_t>(run.kernel_steps, 1));
  for (const KernelTime& k : run.kernels) {
    ms[k.name] = {static_cast<double>(k.exposed_ns) / 1e6 / steps, k.communication};
  }
  return ms;
}

// What a kernel a run does not list has there: 0 when the list is not full (every kernel with
// exposed time is in it); else at most the list's smallest (`ceiling`), unknown.
struct Absent {
  bool known = false;
  double ceiling = 0;
};
Absent absent_kernel(const DiffRun& run, const KernelMs& ms) {
  Absent a;
  if (run.kernels.size() < run.kernel_list_limit) {
    a.known = true;
    return a;
  }
  a.ceiling = ms.empty() ? 0.0 : ms.begin()->second.first;
  for (const auto& [name, v] : ms) a.ceiling = std::min(a.ceiling, v.first);
  return a;
}

KernelChange kernel_change(const std::string& name, const KernelMs& b, const KernelMs& n,
                           const Absent& b_absent, const Absent& n_absent) {
  KernelChange k;
  k.name = name;
  const auto bi = b.find(name), ni = n.find(name);
  k.communication = bi != b.end() ? bi->second.second : ni->second.second;
  if (bi != b.end())
    k.base_ms = bi->second.first;
  else if (b_absent.known)
    k.base_ms = 0.0;
  if (ni != n.end())
    k.new_ms = ni->second.first;
  else if (n_absent.known)
    k.new_ms = 0.0;
  if (k.base_ms && k.new_ms) {
    k.delta_ms = *k.new_ms - *k.base_ms;
  } else if (k.new_ms) {
    // Not in base's full list: it had at most the list's smallest there.
    k.delta_is_bound = true;
    k.delta_ms = std::max(0.0, *k.new_ms - b_absent.ceiling);
  } else {
    k.delta_is_bound = true;
    k.delta_ms = std::min(0.0, n_absent.ceiling - *k.base_ms);
  }
  return k;
}

// The kernels whose exposed time per step changed most (largest |change| first; a bound counts
// by the least the change can be).
void compare_kernels(const DiffRun& base, const DiffRun& next, size_t keep, RunDiff* out) {
  if (!base.kernels_known || !next.kernels_known) {
    if (!base.kernels_known && !next.kernels_known) {
      out->kernels_note = "neither run: " + base.kernels_unknown_why;
    } else {
      out->kernels_note = !base.kernels_known ? "base: " + base.kernels_unknown_why
                                              : "new: " + next.kernels_unknown_why;
    }
    return;
  }
  out->kernels_known = true;
  const KernelMs b = kernel_ms_per_step(base), n = kernel_ms_per_step(next);
  const Absent b_absent = absent_kernel(base, b), n_absent = absent_kernel(next, n);
  std::set<std::string> names;
  for (const auto& [name, v] : b) names.insert(name);
  for (const auto& [name, v] : n) names.insert(name);
  bool partial = false;
  for (const std::string& name : names) {
    out->kernels.push_back(kernel_change(name, b, n, b_absent, n_absent));
    partial = partial || out->kernels.back().delta_is_bound;
  }
  std::stable_sort(out->kernels.begin(), out->kernels.end(),
                   [](const KernelChange& x, const KernelChange& y) {
                     return std::fabs(x.delta_ms) > std::fabs(y.delta_ms);
                   });
  if (out->kernels.size() > keep) out->kernels.resize(keep);
  if (partial) {
    out->kernels_note =
        "a kernel outside a run's full top-kernels list has an unknown time there (at most the "
        "list's smallest): its change is a bound";
  }
}

}  // namespace
namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string interval_text(const Change& c, const DiffOptions& options) {
  if (!c.interval_ms) {
    return "no interval: a run has fewer than " +
           std::to_string(std::max<size_t>(options.min_steps_for_interval, 2)) + " steps";
  }
  return fmt("%.0f%% CI ", options.confidence * 100) + fmt("%+.2f", c.interval_ms->first) + " to " +
         fmt("%+.2f", c.interval_ms->second);
}

// "step time +12.8% (23.46 -> 26.46 ms/step, 95% CI +2.95 to +3.05): 100% of it data wall
// (+3.00 ms/step)", or "no significant change in step time (...)" and the walls that moved.
std::string headline_of(const RunDiff& d) {
  const Change& s = d.step;
  const std::string numbers =
      fmt("%.2f", s.base_ms) + " -> " + fmt("%.2f", s.new_ms) + " ms/step, ";
  if (s.significant) {
    const double sign = s.delta_ms > 0 ? 1.0 : -1.0;
    std::vector<const WallChange*> order;
    for (const WallChange& w : d.walls) order.push_back(&w);
    std::stable_sort(order.begin(), order.end(), [sign](const WallChange* a, const WallChange* b) {
      return a->change.delta_ms * sign > b->change.delta_ms * sign;
    });
    std::string out = "step time " + fmt("%+.1f%%", d.delta_share * 100) + " (" + numbers +
                      interval_text(s, d.options) +
                      "): " + fmt("%.0f%%", order[0]->share_of_change * 100) + " of it " +
                      to_string(order[0]->wall) + " wall (" +
                      fmt("%+.2f", order[0]->change.delta_ms) + " ms/step)";
    for (size_t i = 1; i < order.size() && i < 3; ++i) {
      const WallChange& w = *order[i];
      if (!w.change.significant || w.share_of_change < 0.1) break;
      out += ", " + fmt("%.0f%%", w.share_of_change * 100) + " " + to_string(w.wall) + " (" +
             fmt("%+.2f", w.change.delta_ms) + ")";
    }
    return out;
  }
  std::string out = "no significant change in step time (" + numbers +
                    fmt("%+.1f%%", d.delta_share * 100) + ", " + interval_text(s, d.options) + ")";
  std::string moved;
  for (const WallChange& w : d.walls) {
    if (!w.change.significant) continue;
    moved += (moved.empty() ? "" : ", ") + std::string(to_string(w.wall)) + " " +
             fmt("%+.2f", w.change.delta_ms);
  }
  return out + (moved.empty() ? "; no wall changed significantly"
                              : "; walls moved: " + moved + " ms/step");
}

std::string devices_text(const json& run) {
  const auto found = run.find("devices");
  const json devices = found != run.end() ? *found : json::array();
  std::vector<std::pair<std::string, int>> counts;  // first-seen order
  if (devices.is_array()) {
    for (const json& d : devices) {
      const std::string name = field_or<std::string>(d, "name", "?");
      auto it = std::find_if(counts.begin(), counts.end(),
                             [&](const auto& c) { return c.first == name; });
      if (it == counts.end())
        counts.emplace_back(name, 1);
      else
        ++it->second;
    }
  }
  if (counts.empty()) return "none listed";
  std::string out;
  for (const auto& [name, n] : counts) {
    out += (out.empty() ? "" : ", ") + std::to_string(n) + " x " + name;
  }
  return out;
}

std::string value_text(const json& section, const char* key) {
  const auto it = section.find(key);
  if (it == section.end() || it->is_null()) return "-";
  if (it->is_string()) return it->get<std::string>().empty() ? "-" : it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  if (it->is_number()) return fmt("%g", it->get<double>());
  if (it->is_boolean()) return it->get<bool>() ? "true" : "false";
  return "(structured)";
}

}  // namespace

std::vector<SettingDifference> setting_differences(const DiffRun& base, const DiffRun& next) {
  std::vector<SettingDifference> out;
  auto add = [&out](const std::string& setting, std::string b, std::string n) {
    if (b != n) out.push_back({setting, std::move(b), std::move(n)});
  };
  add("GPU", devices_text(base.run), devices_text(next.run));
  static const std::pair<const char*, const char*> kRunKeys[] = {
      {"world size", "world_size"}, {"rank", "rank"},       {"source", "source"},
      {"host", "hostname"},         {"command", "command"}, {"gpuacct version", "gpuacct_version"},
  };
  for (const auto& [setting, key] : kRunKeys) {
    add(setting, value_text(base.run, key), value_text(next.run, key));
  }
  add("steps", base.steps_detected ? "detected" : "marked by the run",
      next.steps_detected ? "detected" : "marked by the run");
  std::set<std::string> keys;
  for (const json* c : {&base.config, &next.config}) {
    if (!c->is_object()) continue;
    for (const auto& [key, v] : c->items()) keys.insert(key);
  }
  for (const std::string& key : keys) {
    add("config." + key, value_text(base.config, key.c_str()),
        value_text(next.config, key.c_str()));
  }
  return out;
}

RunDiff diff_runs(const DiffRun& base, const DiffRun& next, const DiffOptions& options) {
  RunDiff d;
  d.options = options;
  d.base_label = base.label;
  d.new_label = next.label;
  d.base_steps = static_cast<int64_t>(base.steps.size());
  d.new_steps = static_cast<int64_t>(next.steps.size());
  d.base_warmup_steps = base.warmup_steps;
  d.new_warmup_steps = next.warmup_steps;
  d.settings = setting_differences(base, next);

  const std::vector<double> b = step_walls_ms(base), n = step_walls_ms(next);
  const std::array<double, kSlots> b_mean = mean_walls(b), n_mean = mean_walls(n);
  std::optional<std::array<std::pair<double, double>, kSlots + 1>> intervals;
  const size_t min_steps = std::max<size_t>(options.min_steps_for_interval, 2);
  if (base.steps.size() >= min_steps && next.steps.size() >= min_steps) {
    intervals = bootstrap_intervals(b, n, options);
  }
  for (size_t w = 0; w < kSlots; ++w) {
    d.step.base_ms += b_mean[w];
    d.step.new_ms += n_mean[w];
  }
  d.practical_ms = options.practical_share * d.step.base_ms;
  if (intervals) d.step.interval_ms = (*intervals)[kSlots];
  judge(d.step, d.practical_ms);
  d.delta_share = d.step.base_ms > 0 ? d.step.delta_ms / d.step.base_ms : 0;
  for (size_t w = 0; w < kSlots; ++w) {
    WallChange& wc = d.walls[w];
    wc.wall = kWalls[w].wall;
    wc.change.base_ms = b_mean[w];
    wc.change.new_ms = n_mean[w];
    if (intervals) wc.change.interval_ms = (*intervals)[w];
    judge(wc.change, d.practical_ms);
    wc.share_of_change = d.step.delta_ms != 0 ? wc.change.delta_ms / d.step.delta_ms : 0;
  }
  compare_kernels(base, next, options.kernel_changes, &d);
  d.headline = headline_of(d);
  return d;
}

bool slower_than(const RunDiff& diff, double percent) {
  return diff.step.significant && diff.step.delta_ms > 0 && diff.delta_share * 100.0 > percent;
}

}  // namespace gpuacct
