// The run diff's JSON (schema gpuacct.diff/1, docs/diff.md) and terminal text.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "analysis/compare/run_diff.h"
#include "analysis/model/json_text.h"

namespace gpuacct {
namespace {

using nlohmann::json;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

json change_json(const Change& c) {
  json j = {{"base_ms", c.base_ms},
            {"new_ms", c.new_ms},
            {"delta_ms", c.delta_ms},
            {"significant", c.significant}};
  j["interval_ms"] =
      c.interval_ms ? json::array({c.interval_ms->first, c.interval_ms->second}) : json(nullptr);
  return j;
}

json optional_json(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

json kernels_json(const RunDiff& d) {
  json changes = json::array();
  for (const KernelChange& k : d.kernels) {
    changes.push_back({{"name", k.name},
                       {"communication", k.communication},
                       {"base_ms", optional_json(k.base_ms)},
                       {"new_ms", optional_json(k.new_ms)},
                       {"delta_ms", k.delta_ms},
                       {"delta_is_bound", k.delta_is_bound}});
  }
  return {{"known", d.kernels_known}, {"note", d.kernels_note}, {"changes", changes}};
}

}  // namespace

json run_diff_to_json(const RunDiff& d) {
  json settings = json::array();
  for (const SettingDifference& s : d.settings) {
    settings.push_back({{"setting", s.setting}, {"base", s.base}, {"new", s.next}});
  }
  json walls = json::object();
  for (const WallChange& w : d.walls) {
    json j = change_json(w.change);
    j["share_of_change"] = w.share_of_change;
    walls[to_string(w.wall)] = std::move(j);
  }
  json step = change_json(d.step);
  step["delta_share"] = d.delta_share;
  return {
      {"schema", kDiffSchema},
      {"base",
       {{"input", d.base_label}, {"steps", d.base_steps}, {"warmup_steps", d.base_warmup_steps}}},
      {"new",
       {{"input", d.new_label}, {"steps", d.new_steps}, {"warmup_steps", d.new_warmup_steps}}},
      {"settings_differ", settings},
      {"headline", d.headline},
      {"step_time", step},
      {"walls", walls},
      {"kernels", kernels_json(d)},
      {"method",
       {{"step_time", "per summary step, the window of its slowest device; walls of that row"},
        {"resamples", d.options.resamples},
        {"seed", d.options.seed},
        {"confidence", d.options.confidence},
        {"practical_share", d.options.practical_share},
        {"practical_ms", d.practical_ms}}},
  };
}

namespace {

std::string interval_cell(const Change& c) {
  if (!c.interval_ms) return "-";
  return "[" + fmt("%+.2f", c.interval_ms->first) + ", " + fmt("%+.2f", c.interval_ms->second) +
         "]";
}

// `share`: of the step time's change, shown only when that change is significant (a share of
// noise is noise).
void table_line(std::ostringstream& o, const std::string& name, const Change& c,
                std::optional<double> share) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-14s %9.2f %9.2f %+9.2f  %-18s %7s%s\n", name.c_str(),
                c.base_ms, c.new_ms, c.delta_ms, interval_cell(c).c_str(),
                share ? fmt("%.0f%%", *share * 100).c_str() : "-", c.significant ? "  *" : "");
  o << buf;
}

void render_kernels(const RunDiff& d, std::ostringstream& o) {
  if (!d.kernels_known) {
    o << "\nkernels: not compared (" << terminal_text(d.kernels_note) << ")\n";
    return;
  }
  o << "\nkernels whose exposed time changed most (ms/step, all devices):\n";
  auto ms = [](const std::optional<double>& v) { return v ? fmt("%.2f", *v) : std::string("?"); };
  // Changes that print as 0.00 are left to the JSON.
  constexpr double kShownMs = 0.005;
  size_t shown = 0;
  for (const KernelChange& k : d.kernels) {
    if (std::fabs(k.delta_ms) < kShownMs) continue;
    ++shown;
    std::string name = terminal_text(k.name);
    if (name.size() > 60) name = std::string(utf8_prefix(name, 57)) + "...";
    o << "  " << (k.delta_is_bound ? (k.delta_ms >= 0 ? ">=" : "<=") : "  ")
      << fmt("%+7.2f", k.delta_ms) << "  " << ms(k.base_ms) << " -> " << ms(k.new_ms) << "  "
      << name << (k.communication ? " (communication)" : "") << "\n";
  }
  if (shown == 0) o << "  none changed by 0.01 ms/step or more\n";
  if (!d.kernels_note.empty()) o << "  note: " << terminal_text(d.kernels_note) << "\n";
}

}  // namespace

std::string run_diff_text(const RunDiff& d) {
  std::ostringstream o;
  auto run_line = [&o](const char* which, const std::string& label, int64_t steps, int64_t warmup) {
    o << "  " << which << terminal_text(label) << ": " << steps << " steps compared (" << warmup
      << " warm-up left out)\n";
  };
  o << "gpuacct diff\n";
  run_line("base: ", d.base_label, d.base_steps, d.base_warmup_steps);
  run_line("new:  ", d.new_label, d.new_steps, d.new_warmup_steps);
  if (!d.settings.empty()) {
    o << "settings that differ (read the numbers with these in mind):\n";
    for (const SettingDifference& s : d.settings) {
      o << "  " << terminal_text(s.setting) << ": " << terminal_text(s.base) << " -> "
        << terminal_text(s.next) << "\n";
    }
  }
  o << "\n" << terminal_text(d.headline) << "\n\n";
  char head[200];
  std::snprintf(head, sizeof head, "  %-14s %9s %9s %9s  %-18s %7s\n  %-14s %9s %9s %9s\n", "wall",
                "base", "new", "change", fmt("%.0f%% CI", d.options.confidence * 100).c_str(),
                "share", "", "ms/step", "ms/step", "ms/step");
  o << head;
  for (const WallChange& w : d.walls) {
    table_line(o, to_string(w.wall), w.change,
               d.step.significant ? std::optional<double>(w.share_of_change) : std::nullopt);
  }
  table_line(o, "step", d.step, d.step.significant ? std::optional<double>(1.0) : std::nullopt);
  o << "  * significant: the interval excludes 0 and |change| >= " << fmt("%.2f", d.practical_ms)
    << " ms/step (" << fmt("%g", d.options.practical_share * 100) << "% of base step time)\n";
  render_kernels(d, o);
  o << "\nmethod: per step, the slowest device's window and its walls; " << d.options.resamples
    << " bootstrap resamples\n        of each run's steps (seed " << d.options.seed
    << "); docs/diff.md\n";
  return o.str();
}

}  // namespace gpuacct
