#include "analysis/report/report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>
#include <initializer_list>
#include <tuple>
#include <type_traits>

#include "analysis/model/json_text.h"
#include "analysis/report/change_points.h"
#include "analysis/report/counter_columns.h"
#include "analysis/report/cost.h"

namespace gpuacct {

using nlohmann::json;

namespace {

json categories_json(const CategoryNs& c) {
  json out = json::object();
  for (const CategoryInfo& k : kCategories) out[std::string(k.name)] = c[k.category];
  return out;
}

json walls_json(const WallBreakdown& w) {
  json out = json::object();
  for (const WallInfo& k : kWalls) out[std::string(k.name)] = w[k.wall];
  return out;
}

json shares_json(const WallShares& s) {
  json out = json::object();
  for (const WallInfo& k : kWalls) {
    const auto i = static_cast<size_t>(k.wall);
    out[std::string(k.name)] = {{"ns", s.ns[i]}, {"share", s.share[i]}};
  }
  return out;
}

std::string name_of(const NameTable* names, NameId id) {
  if (names == nullptr) return "";
  return std::string(names->text(id));  // safe text: made so where it was interned
}

// Declared model FLOPs -> achieved TFLOP/s and MFU against the GPUs' bf16 dense peak.
json model_flops_json(const RunSummary& s, const RunMetadata* meta) {
  if (s.steps_with_flops == 0) return nullptr;
  json out = {{"steps_with_flops", s.steps_with_flops},
              {"flops_per_step", s.flops_per_step},
              {"achieved_tflops", s.achieved_tflops}};
  double peak = 0;
  if (meta != nullptr && !meta->devices.empty()) {
    for (const DeviceInfo& d : meta->devices) {
      const double p = peak_bf16_tflops(d.name);
      if (p <= 0) {
        peak = 0;  // one unknown device: no honest peak for the process
        break;
      }
      peak += p;
    }
  }
  if (peak > 0) {
    out["peak_tflops_bf16_dense"] = peak;
    out["mfu"] = s.achieved_tflops / peak;
  }
  return out;
}

double declared_mfu(const json& model_flops) {
  return model_flops.is_object() && model_flops.contains("mfu")
             ? model_flops["mfu"].get<double>()
             : std::numeric_limits<double>::quiet_NaN();
}

// The work the program declared step by step (gpuacct_set_step_work): what cost.cc reads for
// the cost per unit of work, so a summary line or a report read back prices it the same way.
json declared_work_json(const RunSummary& s) {
  json out = json::object();
  const std::pair<const char*, const DeclaredWork*> units[] = {{"tokens", &s.declared_tokens},
                                                               {"samples", &s.declared_samples}};
  for (const auto& [name, w] : units) {
    if (w->steps == 0) continue;
    out[name] = {{"steps", w->steps}, {"total", w->total}, {"step_ms", w->step_ms}};
  }
  if (out.empty()) return nullptr;
  return out;
}

}  // namespace

static json step_row_core_json(const StepRow& r) {
  return json{{"step_index", r.step_index},
              {"step_number", r.step_number},
              {"device", reported_device(r.device)},
              {"host_only", r.device == kHostOnlyDevice},
              {"warmup", r.warmup},
              {"host_begin_ns", r.host_begin},
              {"host_end_ns", r.host_end},
              {"window_begin_ns", r.window_begin},
              {"window_end_ns", r.window_end},
              {"duration_ns", r.duration()},
              {"categories", categories_json(r.cat)},
              {"walls", walls_json(r.walls())},
              {"comm_total_ns", r.comm_total},
              {"comm_overlapped_ns", r.comm_overlapped},
              {"gpu_busy_ns", r.gpu_busy},
              {"kernels", r.kernels},
              {"copies", r.copies},
              {"launches", r.launches},
              {"flops", r.flops},
              {"tokens", r.tokens},
              {"samples", r.samples}};
}

json step_row_to_json(const StepRow& r) {
  json out = step_row_core_json(r);
  // Only on a row CUPTI did not trace (GPUACCT_SAMPLE): every other row, and every report
  // written before sampling existed, keeps its keys; a reader takes absence as true.
  if (!r.sampled) out["sampled"] = false;
  // Only rows that ran a kernel for the first time: other rows keep their keys.
  if (r.first_use_kernels > 0) out["first_use_kernels"] = r.first_use_kernels;
  // Only rows with counter samples have the section (docs/counters.md).
  if (r.counters.any()) out["counters"] = counters_to_json(r.counters);
  return out;
}

void add_step_detection_section(const StepDetectionSummary& d, const NameTable& names,
                                json* sections) {
  (*sections)["step_detection"] = {{"source", "detected"},
                                   {"detector", kStepDetectorVersion},
                                   {"locked", d.locked},
                                   {"period_ops", d.period_ops},
                                   {"step_end", names.text(d.step_end)},
                                   {"step_end_is_sync", d.step_end_is_sync},
                                   {"step_end_rule", to_string(d.rule)},
                                   {"match_share", d.match_share},
                                   {"explained_share", d.explained_share},
                                   {"boundaries", d.boundaries},
                                   {"steps", d.steps},
                                   {"leading_partial_step_dropped", d.leading_partial},
                                   {"trailing_partial_step_dropped", d.trailing_partial}};
}

namespace {

// The run's metadata as every writer has it (run_metadata_to_json); its step_detection is the
// report's top-level section (report_to_json's caller puts it there), not repeated here.
json run_json(const RunMetadata* meta) {
  if (meta == nullptr) return json::object();
  json run = run_metadata_to_json(*meta);
  run.erase("step_detection");
  return run;
}

// The warm-up steps' walls; `slow_start` only when that rule left steps out (run_summary.h).
json warmup_json(const RunSummary& s) {
  json out = {{"walls", shares_json(s.warmup_walls)}};
  if (!s.one_time_steps.empty()) {
    out["one_time_work"] = {{"steps", s.one_time_steps},
                            {"step_ms", s.one_time_step_ms},
                            {"first_use_kernels", s.one_time_first_uses},
                            {"median_ms", s.one_time_median_ms},
                            {"factor", OneTimeWorkRule{}.factor}};
  }
  if (!s.slow_start_steps.empty()) {
    out["slow_start"] = {{"steps", s.slow_start_steps},
                         {"step_ms", s.slow_start_step_ms},
                         {"steady_median_ms", s.slow_start_steady_ms},
                         {"factor", s.slow_start_rule.factor},
                         {"min_steady_steps", s.slow_start_rule.min_steady_steps}};
  }
  return out;
}

json summary_core_json(const RunSummary& s, const RunMetadata* meta) {
  json out = {
      {"steps", s.steps},
      {"warmup_steps", s.warmup_steps},
      {"rows", s.rows},
      {"step_time_ms",
       {{"p50", s.step_ms_p50}, {"p90", s.step_ms_p90}, {"p99", s.step_ms_p99}, {"mean", s.step_ms_mean}}},
      {"walls", shares_json(s.walls)},
      {"categories_ns", categories_json(s.categories)},
      {"communication",
       {{"total_ns", s.comm_total_ns},
        {"exposed_ns", s.categories.comm_exposed},
        {"overlapped_ns", s.comm_overlapped_ns},
        {"overlap_share", s.comm_overlap_share}}},
      {"gpu_busy_ns", s.gpu_busy_ns},
      {"gpu_busy_share", s.gpu_busy_share},
      {"compute_share", s.compute_share},
      {"model_flops", model_flops_json(s, meta)},
      {"declared_work", declared_work_json(s)},
      {"kernels", s.kernels},
      {"launches", s.launches},
      {"warmup", warmup_json(s)},
  };
  // Only in sampled runs (GPUACCT_SAMPLE): other reports keep their keys.
  if (s.untraced_steps > 0) out["untraced_steps"] = s.untraced_steps;
  return out;
}

json summary_json(const RunSummary& s, const RunMetadata* meta) {
  json out = summary_core_json(s, meta);
  // Only runs with counter samples have the section (docs/counters.md).
  if (s.counters.any()) {
    out["counters"] = counters_summary_json(s, declared_mfu(model_flops_json(s, meta)));
  }
  return out;
}

json verdict_json(const Verdict& v) {
  return {{"bound", v.bound},
          {"reason", v.reason},
          {"severity", to_string(v.severity)},
          {"share", v.share},
          {"headline", v.headline},
          {"recommendation", v.recommendation},
          {"mean_step_ms", v.mean_step_ms},
          {"what_if_step_ms", v.what_if_step_ms},
          {"notes", v.notes}};
}

// Top kernels by exposed time.
json top_kernels_json(const ReportInputs& in) {
  std::vector<KernelExposure> kernels = in.kernels;
  std::sort(kernels.begin(), kernels.end(), [](const KernelExposure& a, const KernelExposure& b) {
    return a.exposed_ns != b.exposed_ns ? a.exposed_ns > b.exposed_ns : a.name < b.name;
  });
  const size_t top_k = in.config ? static_cast<size_t>(std::max(in.config->top_kernels, 0)) : 10;
  const double total_ns =
      in.summary ? static_cast<double>(std::max<int64_t>(in.summary->walls.total_ns, 1)) : 1.0;
  json top = json::array();
  for (size_t i = 0; i < kernels.size() && i < top_k; ++i) {
    const KernelExposure& k = kernels[i];
    top.push_back({{"name", name_of(in.names, k.name)},
                   {"exposed_ns", k.exposed_ns},
                   {"share", static_cast<double>(k.exposed_ns) / total_ns},
                   {"count", k.count},
                   {"communication", k.communication}});
  }
  return top;
}

json idle_gaps_json(const ReportInputs& in) {
  json gaps = json::array();
  for (const IdleGap& g : in.gaps) {
    gaps.push_back({{"step_index", g.step_index},
                    {"device", reported_device(g.device)},
                    {"start_ns", g.start},
                    {"duration_ns", g.length()},
                    {"cause", to_string(g.dominant())},
                    {"data_wait_ns", g.data_wait},
                    {"launch_gap_ns", g.launch_gap},
                    {"host_other_ns", g.host_other},
                    {"next_op", name_of(in.names, g.next_op)},
                    {"host_context", name_of(in.names, g.host_context)},
                    {"thread", g.thread},
                    {"op_was_queued", g.op_was_queued}});
  }
  return gaps;
}

json stats_json(const Stats* stats) {
  json out = json::array();
  if (stats == nullptr) return out;
  for (size_t i = 0; i < kStatCount; ++i) {
    const auto s = static_cast<Stat>(i);
    const StatInfo& info = stat_info(s);
    out.push_back({{"name", std::string(info.name)},
                   {"value", stats->get(s)},
                   {"severity", std::string(to_string(info.severity))},
                   {"description", std::string(info.description)}});
  }
  return out;
}

}  // namespace

namespace {

std::string thousands(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string fmt_duration(int64_t ns) {
  char buf[64];
  if (ns >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.2f s", static_cast<double>(ns) / 1e9);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  }
  return buf;
}

bool contains_any(std::string_view name, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts) {
    if (name.find(p) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

json setup_json(const SetupTally& t, const NameTable* names) {
  // No set-up: the first step began before the run's first CUDA event (a synthetic run, a
  // trace captured from inside a step).
  if (!t.known || (t.duration_ns() == 0 && t.folded_steps == 0)) return nullptr;
  const int64_t duration = t.duration_ns();
  json out = {{"begin_ns", t.begin},
              {"end_ns", t.end},
              {"duration_ns", duration},
              {"gpu_busy_ns", t.gpu_busy_ns},
              {"gpu_busy_share", duration > 0 ? static_cast<double>(t.gpu_busy_ns) /
                                                    static_cast<double>(duration)
                                              : 0.0},
              {"kernels", t.kernels},
              {"copies", t.copies},
              {"launches", t.launches},
              {"syncs", t.syncs},
              {"sync_ns", t.sync_ns},
              {"folded_steps", t.folded_steps}};
  if (t.folded_first_index >= 0) {
    out["folded_step_indices"] = {t.folded_first_index, t.folded_last_index};
  }
  // One-time work where the source traced its calls (a profiler trace holds every runtime
  // call; the library traces launches, copies and syncs).
  int64_t module_loads = 0, graph_captures = 0;
  std::vector<SetupTally::Api> api = t.api;
  std::sort(api.begin(), api.end(), [](const SetupTally::Api& a, const SetupTally::Api& b) {
    return std::tie(b.ns, a.name) < std::tie(a.ns, b.name);
  });
  json top = json::array();
  for (const SetupTally::Api& a : api) {
    const std::string_view name = names != nullptr ? names->text(a.name) : std::string_view();
    if (contains_any(name, {"ModuleLoad", "LibraryLoad"})) module_loads += a.count;
    if (contains_any(name, {"BeginCapture", "GraphInstantiate"})) graph_captures += a.count;
    if (top.size() < 8) top.push_back({{"name", std::string(name)}, {"count", a.count}, {"ns", a.ns}});
  }
  out["module_loads"] = module_loads;
  out["graph_captures"] = graph_captures;
  out["api"] = top;
  std::ostringstream line;
  char busy[32];
  std::snprintf(busy, sizeof busy, "%.1f%%", 100.0 * out["gpu_busy_share"].get<double>());
  line << "set-up " << fmt_duration(duration) << " before the first step (GPU busy " << busy
       << "; " << thousands(t.kernels) << " kernels, " << thousands(t.copies) << " copies, "
       << thousands(t.syncs) << " syncs";
  if (module_loads > 0) line << ", " << thousands(module_loads) << " module loads";
  if (graph_captures > 0) line << ", " << thousands(graph_captures) << " graph captures";
  line << ")";
  if (t.folded_steps > 0) {
    line << "; " << thousands(t.folded_steps)
         << " steps detected before the program's own step marks began are part of it";
  }
  out["line"] = line.str();
  return out;
}

json report_to_json(const ReportInputs& in) {
  json out;
  out["schema"] = kReportSchema;
  out["generated_by"] = "gpuacct " + std::string(GPUACCT_VERSION_STRING);
  out["run"] = run_json(in.metadata);
  if (in.config != nullptr) {
    const AccountingConfig& c = *in.config;
    out["config"] = {{"launch_latency_threshold_ns", c.launch_latency_threshold_ns},
                     {"host_pause_threshold_ns", c.host_pause_threshold_ns},
                     {"step_touch_tolerance_ns", c.step_touch_tolerance_ns},
                     {"warmup_steps", c.warmup_steps},
                     {"pending_launch_timeout_ns", c.pending_launch_timeout_ns},
                     {"pending_event_limit", c.pending_event_limit}};
  }
  if (in.summary != nullptr) {
    out["summary"] = summary_json(*in.summary, in.metadata);
    out["verdict"] = verdict_json(in.summary->verdict);
  }
  out["top_kernels"] = top_kernels_json(in);
  out["largest_idle_gaps"] = idle_gaps_json(in);
  out["stats"] = stats_json(in.stats);
  out["data_loss"] = in.stats != nullptr && in.stats->has_data_loss();

  json steps = json::array();
  if (in.rows != nullptr) {
    for (const StepRow& r : *in.rows) steps.push_back(step_row_to_json(r));
  }
  out["steps"] = steps;
  // Level shifts and periodic slow steps over the summary's steps (change_points.h): from the
  // rows, so every source's report has the same section.
  if (in.rows != nullptr && in.summary != nullptr) {
    out["change_points"] =
        change_points_json(find_change_points(step_series(*in.rows, *in.summary)));
  }

  for (auto it = in.extra.begin(); it != in.extra.end(); ++it) out[it.key()] = it.value();
  return out;
}

namespace {

// The inputs every report has: the run, the config, the summary (verdict) and the stats.
ReportInputs summary_inputs(const RunSummary& summary, const AccountingConfig& config,
                            const Stats& stats, const RunMetadata& meta) {
  ReportInputs in;
  in.metadata = &meta;
  in.config = &config;
  in.summary = &summary;
  in.stats = &stats;
  return in;
}

}  // namespace

json summary_report(const std::vector<StepRow>& rows, const Stats& stats,
                    const AccountingConfig& config, const RunMetadata& meta, bool with_rows) {
  const RunSummary summary = summarize(rows, stats, VerdictBands{}, &meta);
  ReportInputs in = summary_inputs(summary, config, stats, meta);
  if (with_rows) in.rows = &rows;
  return report_to_json(in);
}

void add_report_parts(const ReportParts& parts, json* report) {
  if (parts.sections.is_object()) {
    for (auto it = parts.sections.begin(); it != parts.sections.end(); ++it)
      (*report)[it.key()] = it.value();
  }
  add_cost_section(parts.cost, report);
}

json build_rows_report(const std::vector<StepRow>& rows, const Stats& stats,
                       const AccountingConfig& config, const RunMetadata& meta,
                       const ReportParts& parts) {
  json out = summary_report(rows, stats, config, meta, /*with_rows=*/true);
  add_report_parts(parts, &out);
  return out;
}

json build_report(const StepAccountant& acc, const RunMetadata& meta, const NameTable& names,
                  const ReportParts& parts) {
  const RunSummary summary = summarize(acc.rows(), acc.stats(), VerdictBands{}, &meta);
  ReportInputs in = summary_inputs(summary, acc.config(), acc.stats(), meta);
  in.rows = &acc.rows();
  in.names = &names;
  in.kernels = acc.kernel_exposure();
  in.gaps = acc.largest_gaps();
  // The accountant kept the gaps of every step it did not flag; the summary's slow start is
  // warm-up too.
  std::vector<int64_t> slow = summary.slow_start_steps;
  slow.insert(slow.end(), summary.one_time_steps.begin(), summary.one_time_steps.end());
  in.gaps.erase(std::remove_if(in.gaps.begin(), in.gaps.end(),
                               [&slow](const IdleGap& g) {
                                 return std::find(slow.begin(), slow.end(), g.step_index) !=
                                        slow.end();
                               }),
                in.gaps.end());
  // The accountant keeps more than top_gaps (WindowSweep::kGapHeadroom) for the filter above.
  const size_t listed = static_cast<size_t>(std::max(acc.config().top_gaps, 0));
  if (in.gaps.size() > listed) in.gaps.resize(listed);
  if (json setup = setup_json(acc.setup(), &names); !setup.is_null()) in.extra["setup"] = setup;
  // How late GPU records came (analysis/accounting/delivery_lag.h), for every source.
  const DeliveryLag& lag = acc.delivery_lag();
  in.extra["delivery"] = {{"gpu_ops", lag.ops()},
                          {"behind_watermark", lag.behind_watermark()},
                          {"lag_max_ns", lag.max()},
                          {"lag_p50_ns", lag.quantile(0.50)},
                          {"lag_p99_ns", lag.quantile(0.99)},
                          {"held_events_peak", lag.held_peak()}};
  json out = report_to_json(in);
  add_report_parts(parts, &out);
  return out;
}

// ---- terminal summary ---------------------------------------------------------------------

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string bar(double share, int width) {
  const int n = static_cast<int>(std::lround(std::clamp(share, 0.0, 1.0) * width));
  std::string out;
  for (int i = 0; i < n; ++i) out += "\u2588";
  return out;
}

// A field of the report; strings come out as terminal_text (json_text.h): whatever a name holds,
// it cannot drive the terminal or break a line.
template <typename T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    if constexpr (std::is_same_v<T, std::string>) return terminal_text(it->get<std::string>());
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

}  // namespace

namespace {

// Terminal colours (empty strings without colour).
struct Style {
  const char* bold;
  const char* reset;
  const char* red;
};

// "gpuacct - N steps ... on D devices (name) - source - rank R", step detection, step times.
void render_header(const json& report, const Style& style, std::ostringstream& o) {
  const json summary = report.value("summary", json::object());
  const json run = report.value("run", json::object());
  const char* bold = style.bold;
  const char* reset = style.reset;
  const int64_t steps = get_or<int64_t>(summary, "steps", 0);
  const int64_t warm = get_or<int64_t>(summary, "warmup_steps", 0);
  const json st = summary.value("step_time_ms", json::object());
  std::vector<int> seen;  // GPU devices with rows; -1 = host-only rows
  for (const json& r : report.value("steps", json::array())) {
    const int d = get_or<int>(r, "device", 0);
    if (std::find(seen.begin(), seen.end(), d) == seen.end()) seen.push_back(d);
  }
  // Host-only rows (a step before any GPU op) are not a device: counted only when alone.
  const bool host_only = seen.size() == 1 && seen.front() == -1;
  if (!host_only) seen.erase(std::remove(seen.begin(), seen.end(), -1), seen.end());
  o << bold << "gpuacct" << reset << " - " << steps << " steps";
  if (warm > 0) o << " (+" << warm << " warm-up left out)";
  if (host_only) {
    o << " on the host only (no GPU activity)";
  } else if (!seen.empty()) {
    const size_t ndev = seen.size();
    o << " on " << ndev << (ndev == 1 ? " device" : " devices");
    // Name the hardware when the source knew it (first device; they are usually alike).
    const json devs = run.value("devices", json::array());
    if (!devs.empty() && devs.front().is_object()) {
      const std::string name = get_or<std::string>(devs.front(), "name", "");
      if (!name.empty()) o << " (" << name << ")";
    }
  }
  const std::string src = get_or<std::string>(run, "source_path", "");
  if (!src.empty()) o << " - " << src;
  const int rank = get_or<int>(run, "rank", -1);
  if (rank >= 0) o << " - rank " << rank;
  o << "\n";
  const json detection = report.value("step_detection", json::object());
  if (!detection.empty()) {
    if (get_or<bool>(detection, "locked", false)) {
      const std::string rule = get_or<std::string>(detection, "step_end_rule", "");
      const std::string end(utf8_prefix(get_or<std::string>(detection, "step_end", "?"), 60));
      o << "steps detected automatically (the input marks none): "
        << get_or<int64_t>(detection, "period_ops", 0) << " operations per step, each step "
        << (rule == "optimizer" ? "ending after the optimizer's kernels (" + end + ")"
                                : "ending at " + end);
      if (detection.contains("match_share")) {
        o << "; " << fmt("%.0f", 100 * get_or<double>(detection, "match_share", 0))
          << "% of iterations alike";
      }
      o << "\n";
    } else {
      o << "the input marks no steps and no repeating step was found\n";
    }
  }
  const json setup = report.value("setup", json());
  if (setup.is_object() && setup.contains("line") && setup["line"].is_string()) {
    o << utf8_prefix(setup["line"].get<std::string>(), 400) << "\n";
  }
  o << "step time  p50 " << fmt("%.2f", get_or<double>(st, "p50", 0)) << " ms   p90 "
    << fmt("%.2f", get_or<double>(st, "p90", 0)) << " ms   p99 "
    << fmt("%.2f", get_or<double>(st, "p99", 0)) << " ms\n\n";

}

// The five walls: share, ms per step and a bar; model FLOPs; communication hidden.
void render_walls(const json& summary, std::ostringstream& o) {
  const json walls = summary.value("walls", json::object());
  const double rows =
      std::max<double>(1.0, static_cast<double>(get_or<int64_t>(summary, "rows", 1)));
  o << "  wall            share   ms/step\n";
  for (const WallInfo& wall : kWalls) {
    const char* w = wall.name.data();
    const json wj = walls.value(w, json::object());
    const double share = get_or<double>(wj, "share", 0);
    const double ms = static_cast<double>(get_or<int64_t>(wj, "ns", 0)) / 1e6 / rows;
    char line[128];
    std::snprintf(line, sizeof line, "  %-14s %6.1f%%  %8.2f  ", w, share * 100, ms);
    o << line << bar(share, 30) << "\n";
  }
  const json mf = summary.value("model_flops", json());
  if (mf.is_object()) {
    o << "  model FLOPs: " << fmt("%.1f", get_or<double>(mf, "achieved_tflops", 0)) << " TFLOP/s";
    if (mf.contains("mfu")) {
      o << ", MFU " << fmt("%.1f%%", get_or<double>(mf, "mfu", 0) * 100)
        << " of the bf16 dense peak ("
        << fmt("%.0f", get_or<double>(mf, "peak_tflops_bf16_dense", 0)) << " TFLOP/s)";
    }
    o << "\n";
  }
  const json counters = summary.value("counters", json());
  if (counters.is_object()) o << "  counters: " << get_or<std::string>(counters, "line", "") << "\n";
  const json comm = summary.value("communication", json::object());
  if (get_or<int64_t>(comm, "total_ns", 0) > 0) {
    o << "  (communication total "
      << fmt("%.2f", static_cast<double>(get_or<int64_t>(comm, "total_ns", 0)) / 1e6 / rows)
      << " ms/step, " << fmt("%.0f", get_or<double>(comm, "overlap_share", 0) * 100)
      << "% hidden behind compute)\n";
  }
}

// The verdict, its recommendation, the what-if and the notes.
void render_verdict(const json& verdict, const Style& style, std::ostringstream& o) {
  const char* bold = style.bold;
  const char* reset = style.reset;
  o << "\n"
    << bold << "verdict: " << get_or<std::string>(verdict, "headline", "-") << reset << "\n";
  const std::string rec = get_or<std::string>(verdict, "recommendation", "");
  if (!rec.empty()) o << "  -> " << rec << "\n";
  const std::string bound = get_or<std::string>(verdict, "bound", "");
  const double mean = get_or<double>(verdict, "mean_step_ms", 0);
  const double what_if = get_or<double>(verdict, "what_if_step_ms", 0);
  if ((bound == "data" || bound == "launch" || bound == "communication" || bound == "other") &&
      mean > 0) {
    o << "  what if: without the " << bound << " wall a step would take ~" << fmt("%.2f", what_if)
      << " ms instead of " << fmt("%.2f", mean) << " ms ("
      << fmt("%.2f", what_if > 0 ? mean / what_if : 0) << "x)\n";
  }
  for (const json& n : verdict.value("notes", json::array())) {
    if (n.is_string()) o << "  note: " << terminal_text(n.get<std::string>()) << "\n";
  }
}

// The largest idle gap, the top kernels and the top native call site.
void render_details(const json& report, std::ostringstream& o) {
  const json gaps = report.value("largest_idle_gaps", json::array());
  if (!gaps.empty()) {
    const json& g = gaps.front();
    o << "  largest idle gap: "
      << fmt("%.2f", static_cast<double>(get_or<int64_t>(g, "duration_ns", 0)) / 1e6) << " ms ("
      << get_or<std::string>(g, "cause", "?") << ") in step "
      << get_or<int64_t>(g, "step_index", 0);
    const std::string ctx = get_or<std::string>(g, "host_context", "");
    if (!ctx.empty()) o << ", host in " << ctx;
    const std::string next = get_or<std::string>(g, "next_op", "");
    if (!next.empty()) o << ", before " << utf8_prefix(next, 60);
    o << "\n";
  }
  const json kernels = report.value("top_kernels", json::array());
  if (!kernels.empty()) {
    o << "  top kernels by exposed time:";
    size_t shown = 0;
    for (const json& k : kernels) {
      if (shown == 3) break;
      std::string name = get_or<std::string>(k, "name", "?");
      if (name.size() > 48) name = std::string(utf8_prefix(name, 45)) + "...";
      o << (shown++ ? ", " : " ") << name << " "
        << fmt("%.1f%%", get_or<double>(k, "share", 0) * 100);
    }
    o << "\n";
  }
  // Native call sites the injected library captured (libunwind), if any.
  const json sites =
      report.value("collection", json::object()).value("native_sites", json::array());
  if (!sites.empty() && sites.front().is_object()) {
    const json& site = sites.front();
    o << "  top native site (" << get_or<std::string>(site, "kind", "?")
      << "): " << get_or<std::string>(site, "site", "?") << ", "
      << get_or<int64_t>(site, "count", 0) << " calls, "
      << fmt("%.1f", get_or<double>(site, "total_ms", 0)) << " ms\n";
  }
}

// Every non-info stat that counted something, severity first.
void render_stats(const json& report, const Style& style, std::ostringstream& o) {
  const char* red = style.red;
  const char* reset = style.reset;
  for (const json& s : report.value("stats", json::array())) {
    if (get_or<std::string>(s, "severity", "") == "info") continue;
    const int64_t value = get_or<int64_t>(s, "value", 0);
    if (value == 0) continue;
    // Severity first: "error" = bad input skipped (the rest is exact), "data loss" = events
    // never seen or dropped (numbers may be incomplete).
    const bool loss = get_or<std::string>(s, "severity", "") == "data_loss";
    o << "  " << red << (loss ? "! data loss: " : "! error (input skipped): ") << reset
      << get_or<std::string>(s, "description", "") << ": " << value << "\n";
  }
}

}  // namespace

StatusOr<std::string> render_terminal_summary(const json& report, bool color) {
  if (!report.is_object() ||
      get_or<std::string>(report, "schema", "").rfind("gpuacct.report/", 0) != 0) {
    return Status::Error("not a gpuacct report (missing \"schema\": \"gpuacct.report/...\")");
  }
  const Style style = color ? Style{"\033[1m", "\033[0m", "\033[31m"} : Style{"", "", ""};
  std::ostringstream o;
  render_header(report, style, o);
  render_walls(report.value("summary", json::object()), o);
  render_verdict(report.value("verdict", json::object()), style, o);
  // The money line, when the report was given a price (analysis/report/cost.h).
  if (const std::string money = cost_line(report.value("cost", json())); !money.empty()) {
    o << "  " << money << "\n";
  }
  // Level shifts and periodic slow steps, at most three lines (change_points.h).
  for (const std::string& line : change_point_lines(report.value("change_points", json()))) {
    o << "  " << line << "\n";
  }
  render_details(report, o);
  render_stats(report, style, o);
  return o.str();
}

std::string step_rows_csv_header() {
  std::ostringstream o;
  o << "step_index,step_number,device,warmup,window_begin_ns,window_end_ns,duration_ns,";
  for (const CategoryInfo& c : kCategories) o << c.name << "_ns,";
  for (const WallInfo& w : kWalls) o << "wall_" << w.name << "_ns,";
  o << "comm_total_ns,comm_overlapped_ns,gpu_busy_ns,kernels,copies,launches,flops,tokens,samples,"
       "sampled," << counters_csv_header();
  return o.str();
}

std::string step_row_csv(const StepRow& r) {
  std::ostringstream o;
  const WallBreakdown w = r.walls();
  o << r.step_index << ',' << r.step_number << ',' << reported_device(r.device) << ','
    << (r.warmup ? 1 : 0) << ',' << r.window_begin << ',' << r.window_end << ',' << r.duration()
    << ',';
  for (const CategoryInfo& c : kCategories) o << r.cat[c.category] << ',';
  for (const WallInfo& k : kWalls) o << w[k.wall] << ',';
  o << r.comm_total << ',' << r.comm_overlapped << ',' << r.gpu_busy << ',' << r.kernels << ','
    << r.copies << ',' << r.launches << ',';
  // Declared amounts in full (the stream's default 6 digits would round 1,048,577 tokens).
  o << std::setprecision(std::numeric_limits<double>::max_digits10) << r.flops << ','
    << r.tokens << ',' << r.samples << ',' << (r.sampled ? 1 : 0) << ','
    << counters_csv(r.counters);
  return o.str();
}

std::string step_rows_csv(const std::vector<StepRow>& rows) {
  std::string out = step_rows_csv_header() + "\n";
  for (const StepRow& r : rows) out += step_row_csv(r) + "\n";
  return out;
}

}  // namespace gpuacct
