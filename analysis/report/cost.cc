#include "analysis/report/cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "analysis/accounting/taxonomy.h"

namespace gpuacct {

using nlohmann::json;

namespace {

constexpr double kHoursPerDay = 24.0;
constexpr double kSecondsPerHour = 3600.0;

// A number field of an object, `fallback` when missing or not a number (reports are read
// back from disk: never throw on a foreign one).
double num(const json& j, const char* key, double fallback = 0) {
  if (!j.is_object()) return fallback;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

const json& obj(const json& j, const char* key) {
  static const json kEmpty = json::object();
  if (!j.is_object()) return kEmpty;
  const auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

// "$1,840.00": thousands separated so a per-day sum reads at a glance; amounts under a dollar
// (a step, a million tokens) keep three significant digits ("$0.0000196", "$0.0254").
std::string money(double v) {
  char buf[64];
  // A report read back from disk may hold anything: absurd sums in short scientific form.
  if (!std::isfinite(v) || std::fabs(v) >= 1e15) {
    std::snprintf(buf, sizeof buf, "$%.3g", v);
    return buf;
  }
  int decimals = 2;
  if (v != 0 && std::fabs(v) < 1) {
    decimals = std::min(12, 2 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  }
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  const size_t dot = s.find('.');
  const size_t start = s[0] == '-' ? 1 : 0;
  for (size_t i = dot; i > start + 3; i -= 3) s.insert(i - 3, ",");
  return "$" + s;
}

// A count field of a report (a device id, the world size) as an integer; anything out of
// [0, kMaxCount] (negative, absurd, not a number) is -1, so a foreign report cannot overflow a
// cast.
constexpr double kMaxCount = 1 << 24;
int64_t count(const json& j, const char* key) {
  const double v = num(j, key, -1);
  return v >= 0 && v <= kMaxCount ? static_cast<int64_t>(v) : -1;
}

// Owned GPUs: the monthly cost, its hourly equivalent when the GPU runs day and night, and the
// break-even against the rent price (docs/cost.md, "Owned GPUs").
json owned_json(const CostModel& m, double compute_share) {
  const double months = m.amortization_months;
  const double fixed = (months > 0 ? m.hardware_cost / months : 0) + m.facility_per_month;
  const double hourly = fixed / kHoursPerMonth + m.power_per_gpu_hour;
  json out = {{"hardware_cost", m.hardware_cost},
              {"amortization_months", months},
              {"facility_per_month", m.facility_per_month},
              {"power_per_gpu_hour", m.power_per_gpu_hour},
              {"hours_per_month", kHoursPerMonth},
              {"fixed_per_month", fixed},
              {"per_gpu_hour", hourly},
              {"per_compute_hour", compute_share > 0 ? json(hourly / compute_share) : json()}};
  if (m.gpu_hour_price > 0) {
    // Owning costs fixed + power x h a month for h GPU-hours, renting price x h: equal at
    // h = fixed / (price - power).  Power dearer than the rent: owning never pays.
    const double margin = m.gpu_hour_price - m.power_per_gpu_hour;
    const double hours = margin > 0 ? fixed / margin : -1;
    out["break_even_gpu_hours_per_month"] = hours >= 0 ? json(hours) : json();
    out["break_even_use_share"] = hours >= 0 ? json(hours / kHoursPerMonth) : json();
  }
  return out;
}

// The most steps a summary's declared work may count (a bound for a foreign report's number).
constexpr double kMaxDeclaredSteps = 1e15;

// Work in one unit over some steps: `work` done in `seconds` of step time (`steps` steps).
struct UnitWork {
  double work = 0;
  double seconds = 0;
  int64_t steps = 0;
  bool declared = false;  // the program's step-by-step declaration, else the constant setting
};

// The program's step-by-step declaration (summary.declared_work.<unit>) wins; else the
// constant per-step setting over the mean step (docs/cost.md, "Cost per unit of work").
UnitWork unit_work(const json& summary, const char* unit, double constant, double step_s) {
  const json& declared = obj(obj(summary, "declared_work"), unit);
  const double total = num(declared, "total");
  const double ms = num(declared, "step_ms");
  const double steps = num(declared, "steps");
  // A report read back from disk may hold anything: only sane sums are priced.
  if (total > 0 && ms > 0 && steps >= 1 && std::isfinite(total) && std::isfinite(ms) &&
      steps <= kMaxDeclaredSteps) {
    return {total, ms / 1e3, static_cast<int64_t>(steps), true};
  }
  if (constant > 0) return {constant, step_s, 1, false};
  return {};
}

// Cost per unit of work and throughput per GPU: `job_per_hour` over the work's step time,
// divided by the work.
json work_json(const json& summary, const CostModel& m, double job_per_hour, double step_s,
               int64_t gpus) {
  json out = json::object();
  struct Unit {
    const char* name;
    double constant;
    double per;  // the amount priced: a million tokens, 1,000 samples
    const char* per_key;
  };
  const Unit units[] = {{"tokens", m.tokens_per_step, 1e6, "per_million_tokens"},
                        {"samples", m.samples_per_step, 1e3, "per_1000_samples"}};
  for (const Unit& u : units) {
    const UnitWork w = unit_work(summary, u.name, u.constant, step_s);
    if (!(w.work > 0)) continue;
    const std::string name = u.name;
    const double cost = job_per_hour * w.seconds / kSecondsPerHour;
    out[name + "_from"] = w.declared ? "declared per step" : "constant";
    out[name + "_per_step"] = w.work / static_cast<double>(w.steps);  // the mean when declared
    if (w.declared) out[name + "_steps"] = w.steps;
    out[u.per_key] = cost / w.work * u.per;
    out[name + "_per_second_per_gpu"] = w.work / (w.seconds * static_cast<double>(gpus));
  }
  return out;
}

}  // namespace

std::string CostModel::check() const {
  if (hardware_cost > 0 && !(amortization_months > 0)) {
    return "an owned GPU's hardware cost needs the months it is amortized over";
  }
  if (power_per_gpu_hour > 0 && !owned()) {
    return "power per GPU-hour is part of the owned-GPU model: give the hardware cost or the "
           "facility cost too";
  }
  return "";
}

int64_t job_gpus(const json& report, std::string* source) {
  std::set<int64_t> devices;
  const auto steps = report.is_object() ? report.find("steps") : report.end();
  if (report.is_object() && steps != report.end() && steps->is_array()) {
    for (const json& r : *steps) {
      const int64_t d = count(r, "device");
      if (d >= 0) devices.insert(d);
    }
  }
  const json& run = obj(report, "run");
  const int64_t world = count(run, "world_size");
  auto n = static_cast<int64_t>(devices.size());
  const char* from = "rows";
  if (n == 0) {
    const auto it = run.find("devices");
    n = it != run.end() && it->is_array() ? static_cast<int64_t>(it->size()) : 0;
    from = "run.devices";
  }
  if (n == 0) {
    n = 1;
    from = "assumed";
  }
  if (world > 0) {
    n *= world;
    if (source != nullptr) *source = std::string(from) + " x world_size";
  } else if (source != nullptr) {
    *source = from;
  }
  return n;
}

json cost_section(const json& report, const CostModel& model) {
  std::string gpus_from;
  const int64_t gpus = job_gpus(report, &gpus_from);
  const json& summary = obj(report, "summary");
  const json& verdict = obj(report, "verdict");
  const double compute = num(summary, "compute_share");
  // The price every sum below uses: the rent price, else the owned GPUs' hourly cost.
  double price = model.gpu_hour_price;
  json owned;
  if (model.owned()) {
    owned = owned_json(model, compute);
    if (!(price > 0)) price = owned["per_gpu_hour"].get<double>();
  }
  json out = {{"gpu_hour_price", price},
              {"price_from", model.gpu_hour_price > 0 ? "gpu_hour_price" : "owned"},
              {"gpus", gpus},
              {"gpus_from", gpus_from}};
  if (!owned.is_null()) out["owned"] = owned;
  const double step_ms = num(obj(summary, "step_time_ms"), "mean");
  if (!(price > 0) || !(step_ms > 0)) {
    out["reason"] = price > 0 ? "no_steps" : "no_price";
    return out;
  }
  // The job pays for every GPU for the whole step, whatever each one did in it.
  const double job_per_hour = price * static_cast<double>(gpus);
  const double per_step = job_per_hour * step_ms / 1e3 / kSecondsPerHour;
  const double per_day = job_per_hour * kHoursPerDay;
  out["job_per_hour"] = job_per_hour;
  out["per_step"] = per_step;
  out["per_1000_steps"] = per_step * 1000;
  out["per_day"] = per_day;
  if (json work = work_json(summary, model, job_per_hour, step_ms / 1e3, gpus); !work.empty()) {
    out["work"] = std::move(work);
  }
  json walls = json::object();
  const json& wall_shares = obj(summary, "walls");
  for (const WallInfo& w : kWalls) {
    const double share = num(obj(wall_shares, w.name.data()), "share");
    walls[w.name.data()] = {{"share", share},
                            {"per_step", share * per_step},
                            {"per_day", share * per_day}};
  }
  out["walls"] = walls;
  // Price over the share of time the GPU really computed (compute wall) and over the share
  // nvidia-smi calls busy (any op running): the gap between the two is what the busy share
  // hides (exposed communication, idle tails inside "busy" windows).
  const double busy = num(summary, "gpu_busy_share");
  out["per_compute_hour"] = compute > 0 ? json(price / compute) : json();
  out["per_busy_hour"] = busy > 0 ? json(price / busy) : json();
  out["compute_share"] = compute;
  out["gpu_busy_share"] = busy;
  const std::string bound = verdict.value("bound", "");
  const double what_if = num(verdict, "what_if_step_ms");
  const double mean = num(verdict, "mean_step_ms", step_ms);
  if ((bound == "data" || bound == "launch" || bound == "communication" || bound == "other") &&
      what_if > 0 && mean > 0) {
    // The same steps in less time: the job's bill shrinks by the share of step time saved.
    const double saved = std::clamp(1.0 - what_if / mean, 0.0, 1.0);
    out["what_if"] = {{"wall", bound},
                      {"step_ms", what_if},
                      {"saving_share", saved},
                      {"per_step", per_step * (1 - saved)},
                      {"saving_per_1000_steps", per_step * 1000 * saved},
                      {"saving_per_day", per_day * saved}};
  }
  return out;
}

void add_cost_section(const CostModel& model, json* report) {
  if (model.any() && model.check().empty() && report != nullptr && report->is_object()) {
    (*report)["cost"] = cost_section(*report, model);
  }
}

std::string cost_line(const json& cost) {
  if (!cost.is_object() || !cost.contains("per_step")) return "";
  const auto gpus = static_cast<int64_t>(num(cost, "gpus", 1));
  const std::string on = " on " + std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
  std::string line = "cost: " + money(num(cost, "per_step")) + "/step, " +
                     money(num(cost, "per_1000_steps")) + " per 1,000 steps, " +
                     money(num(cost, "per_day")) + "/day" + on;
  // The costliest wall that is not compute: the money a fix can win back.
  const json& walls = obj(cost, "walls");
  std::string worst;
  double worst_day = 0;
  for (const WallInfo& w : kWalls) {
    if (w.wall == Wall::kCompute) continue;
    const double day = num(obj(walls, w.name.data()), "per_day");
    if (day > worst_day) worst = w.name.data(), worst_day = day;
  }
  if (!worst.empty()) line += "; the " + worst + " wall costs " + money(worst_day) + "/day";
  const json& what_if = obj(cost, "what_if");
  if (!what_if.empty()) {
    line += " (without the " + what_if.value("wall", std::string("?")) + " wall: save " +
            money(num(what_if, "saving_per_day")) + "/day)";
  }
  const json& work = obj(cost, "work");
  char rate[96];
  if (work.contains("per_million_tokens")) {
    std::snprintf(rate, sizeof rate, " per million tokens (%.0f tokens/s per GPU)",
                  num(work, "tokens_per_second_per_gpu"));
    line += "; " + money(num(work, "per_million_tokens")) + rate;
  }
  if (work.contains("per_1000_samples")) {
    std::snprintf(rate, sizeof rate, " per 1,000 samples (%.1f samples/s per GPU)",
                  num(work, "samples_per_second_per_gpu"));
    line += "; " + money(num(work, "per_1000_samples")) + rate;
  }
  line += "; " + money(num(cost, "gpu_hour_price")) + " per GPU-hour";
  if (cost.value("price_from", "") == "owned") line += " (owned, used day and night)";
  if (cost.value("per_compute_hour", json()).is_number()) {
    line += ", " + money(num(cost, "per_compute_hour")) + " per hour the GPU actually computed";
  }
  if (cost.value("per_busy_hour", json()).is_number()) {
    char busy[32];
    std::snprintf(busy, sizeof busy, "%.0f%%", num(cost, "gpu_busy_share") * 100);
    line += " (" + money(num(cost, "per_busy_hour")) + " per hour nvidia-smi calls busy, " +
            busy + ")";
  }
  // Owned GPUs beside a rent price: the break-even, in GPU-hours a month.
  const json& owned = obj(cost, "owned");
  if (cost.value("price_from", "") == "gpu_hour_price" && !owned.empty()) {
    const json& hours = owned.value("break_even_gpu_hours_per_month", json());
    char text[160];
    if (hours.is_number()) {
      std::snprintf(text, sizeof text, "; owning pays above %.0f GPU-hours a month per GPU (%.0f%% use)",
                    hours.get<double>(), num(owned, "break_even_use_share") * 100);
    } else {
      std::snprintf(text, sizeof text, "; owning never pays at this power cost");
    }
    line += text;
    line += " and costs " + money(num(owned, "per_gpu_hour")) + " per GPU-hour used day and night";
    if (owned.value("per_compute_hour", json()).is_number()) {
      line += ", " + money(num(owned, "per_compute_hour")) + " per hour computed";
    }
  }
  return line;
}

}  // namespace gpuacct
