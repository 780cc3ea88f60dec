#include "inject/config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "analysis/report/cost.h"

namespace gpuacct::inject {
namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n')) --e;
  return std::string(s.substr(b, e - b));
}

// The longest file name the library writes is <name> + ".gpuacct.tmp.<pid>" (at most 23 more
// bytes); names must stay within NAME_MAX (255) or every output is lost.
constexpr size_t kMaxOutputNameBytes = 255 - 32;
// A value as a warning shows it: one line of bounded length whatever the value holds.
constexpr size_t kMaxShownValueBytes = 64;

bool parse_i64(const char* text, int64_t* out) {
  if (text == nullptr) return false;
  std::string t = trim(text);
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end == t.c_str() || *end != '\0') return false;
  *out = static_cast<int64_t>(v);
  return true;
}

class Parser {
 public:
  Parser(EnvLookup env, std::vector<std::string>* warnings) : env_(env), warnings_(warnings) {}

  const char* get(const char* name) const {
    const char* v = env_(name);
    return (v != nullptr && *v != '\0') ? v : nullptr;
  }

  void warn(const char* name, std::string_view value, const std::string& why,
            const std::string& used) {
    if (warnings_ == nullptr) return;
    warnings_->push_back(std::string(name) + "=" + quote_value(value) + " " + why + "; using " +
                         used);
  }

  void boolean(const char* name, bool* field) {
    const char* v = get(name);
    if (v == nullptr) return;
    std::string t = trim(v);
    for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (t == "1" || t == "true" || t == "yes" || t == "on") {
      *field = true;
    } else if (t == "0" || t == "false" || t == "no" || t == "off") {
      *field = false;
    } else {
      warn(name, v, "is not a boolean (0/1)", *field ? "1" : "0");
    }
  }

  template <typename T>
  void integer(const char* name, T* field, int64_t lo, int64_t hi) {
    const char* v = get(name);
    if (v == nullptr) return;
    int64_t x = 0;
    if (!parse_i64(v, &x) || x < lo || x > hi) {
      warn(name, v, "is not a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
           std::to_string(*field));
      return;
    }
    *field = static_cast<T>(x);
  }

  // A decimal number in [lo, hi] (strtod: "3", "2.5", "1e1"; no NaN or infinity).
  void number(const char* name, double* field, double lo, double hi) {
    const char* v = get(name);
    if (v == nullptr) return;
    const std::string t = trim(v);
    errno = 0;
    char* end = nullptr;
    const double x = std::strtod(t.c_str(), &end);
    if (t.empty() || errno != 0 || end == t.c_str() || *end != '\0' || !(x >= lo && x <= hi)) {
      char used[64];
      std::snprintf(used, sizeof used, "%g", *field);
      warn(name, v, "is not a number in [" + std::to_string(static_cast<int64_t>(lo)) + ", " +
                        std::to_string(static_cast<int64_t>(hi)) + "]",
           used);
      return;
    }
    *field = x;
  }

  void string(const char* name, std::string* field) {
    const char* v = get(name);
    if (v != nullptr) *field = v;
  }

  void patterns(const char* name, std::vector<std::string>* field) {
    const char* v = get(name);
    if (v == nullptr) return;
    auto p = split_patterns(v);
    if (p.empty()) {
      warn(name, v, "holds no pattern", "the defaults");
      return;
    }
    *field = std::move(p);
  }

 private:
  EnvLookup env_;
  std::vector<std::string>* warnings_;
};

// The GPUACCT_CUPTI_* experiment settings (docs/overhead.md): each one given marks the plan an
// experiment; a bad value keeps the design's choice, with the usual warning.
void parse_cupti_plan(Parser& p, cupti::CuptiPlan* plan) {
  auto choice = [&](const char* name, auto parse, const char* design_text) {
    const char* v = p.get(name);
    if (v == nullptr) return;
    if (parse(std::string_view(v))) {
      plan->experiment = true;
    } else {
      p.warn(name, v, "is not one of its values (docs/overhead.md)", design_text);
    }
  };
  choice(
      "GPUACCT_CUPTI_KINDS",
      [&](std::string_view t) { return cupti::parse_kinds(t, &plan->kinds); },
      "kernel,copy,memset,graph");
  choice(
      "GPUACCT_CUPTI_CALLBACKS",
      [&](std::string_view t) { return cupti::parse_callback_domains(t, &plan->callbacks); },
      "design");
  choice(
      "GPUACCT_CUPTI_TIMESTAMPS",
      [&](std::string_view t) { return cupti::parse_timestamp_source(t, &plan->timestamps); },
      "auto");
  choice(
      "GPUACCT_CUPTI_SAMPLE_SWITCH",
      [&](std::string_view t) { return cupti::parse_sample_switch(t, &plan->sample_switch); },
      "all");
  // Not an experiment: both sources keep the walls exact (docs/overhead.md, "API calls").
  if (const char* v = p.get("GPUACCT_CUPTI_API"); v != nullptr &&
                                                   !cupti::parse_api_source(v, &plan->api_source)) {
    p.warn("GPUACCT_CUPTI_API", v, "is not one of its values (records, callbacks)",
           cupti::to_string(plan->api_source));
  }
  for (auto [name, field] : {std::pair{"GPUACCT_CUPTI_API_RECORDS", &plan->api_records},
                             std::pair{"GPUACCT_CUPTI_RESET_CALLBACK", &plan->reset_callback}}) {
    if (p.get(name) == nullptr) continue;
    p.boolean(name, field);
    plan->experiment = true;
  }
}

int first_int_env(EnvLookup env, std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    const char* v = env(n);
    int64_t x = 0;
    if (v != nullptr && parse_i64(v, &x) && x >= 0 && x < (1 << 24)) return static_cast<int>(x);
  }
  return fallback;
}

}  // namespace

std::string quote_value(std::string_view value) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < value.size() && i < kMaxShownValueBytes; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\\':
      case '\'':
        out += '\\';
        out += static_cast<char>(c);
        break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '\'';
  if (value.size() > kMaxShownValueBytes) {
    out += "... (" + std::to_string(value.size()) + " bytes)";
  }
  return out;
}

std::vector<std::string> Config::default_step_patterns() {
  return {"step", "train_step", "training_step", "iteration", "ProfilerStep#N"};
}
std::vector<std::string> Config::default_data_patterns() {
  return {"dataloader", "data", "DataLoader", "enumerate(DataLoader)*", "data_load*"};
}

std::vector<std::string> split_patterns(std::string_view text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string item = trim(text.substr(pos, comma - pos));
    if (!item.empty()) out.push_back(std::move(item));
    pos = comma + 1;
  }
  return out;
}

Config parse_config(EnvLookup env, std::vector<std::string>* warnings) {
  Config c;
  const std::string default_pattern = c.output_pattern;
  c.step_patterns = Config::default_step_patterns();
  c.data_patterns = Config::default_data_patterns();
  Parser p(env, warnings);
  try {
    p.boolean("GPUACCT_ENABLE", &c.enable);
    p.string("GPUACCT_OUTPUT_DIR", &c.output_dir);
    p.string("GPUACCT_OUTPUT_PATTERN", &c.output_pattern);
    if (c.output_pattern.find('/') != std::string::npos) {
      p.warn("GPUACCT_OUTPUT_PATTERN", c.output_pattern, "must not contain '/'", default_pattern);
      c.output_pattern = default_pattern;
    }
    p.integer("GPUACCT_WARMUP_STEPS", &c.warmup_steps, 0, 1000000);
    p.integer("GPUACCT_LAUNCH_LATENCY_US", &c.launch_latency_us, 0, 10000000);
    p.integer("GPUACCT_HOST_PAUSE_US", &c.host_pause_us, 0, 100000000);
    p.integer("GPUACCT_PENDING_EVENT_LIMIT", &c.pending_event_limit, 1000, int64_t{1} << 32);
    p.patterns("GPUACCT_STEP_PATTERNS", &c.step_patterns);
    p.patterns("GPUACCT_DATA_PATTERNS", &c.data_patterns);
    p.integer("GPUACCT_FLUSH_MS", &c.flush_ms, 1, 60000);
    p.boolean("GPUACCT_RECORD", &c.record);
    p.integer("GPUACCT_BUFFER_MB", &c.buffer_mb, 1, 256);
    p.integer("GPUACCT_BUFFER_COUNT", &c.buffer_count, 2, 1024);
    p.boolean("GPUACCT_QUIET", &c.quiet);
    p.boolean("GPUACCT_PYTHON", &c.python);
    p.boolean("GPUACCT_AUTO_STEPS", &c.auto_steps);
    p.boolean("GPUACCT_STACKS", &c.stacks);
    p.integer("GPUACCT_RING_RECORDS", &c.ring_records, 256, 1 << 22);
    // Given (a bad value keeps the default and says so): the user's size wins over the default's
    // growth for calls timed by callbacks.
    c.ring_records_set = p.get("GPUACCT_RING_RECORDS") != nullptr;
    p.integer("GPUACCT_SAMPLE", &c.sample_every, 1, 1000000);
    p.boolean("GPUACCT_COUNTERS", &c.counters);
    p.integer("GPUACCT_COUNTERS_INTERVAL_US", &c.counters_interval_us, 20, 1000000);
    p.boolean("GPUACCT_COUNTERS_DEBUG", &c.counters_debug);
    p.boolean("GPUACCT_COUNTERS_EXPERIMENTAL", &c.counters_experimental);
    if (c.counters && !c.counters_experimental) {
      c.counters = false;
      c.counters_held_back = true;
      if (warnings != nullptr) warnings->push_back(std::string(kCountersHeldBack));
    }
    p.string("GPUACCT_CUPTI_LIBRARY", &c.cupti_library);
    p.boolean("GPUACCT_GRAPH_NODES", &c.graph_nodes);
    parse_cupti_plan(p, &c.cupti_plan);
    if (c.graph_nodes) c.cupti_plan.kinds &= ~uint32_t{cupti::kKindGraph};
    p.string("GPUACCT_PROM_DIR", &c.prom_dir);
    p.integer("GPUACCT_PROM_PERIOD_MS", &c.prom_period_ms, 10, 3'600'000);
    p.number("GPUACCT_GPU_HOUR_PRICE", &c.cost.gpu_hour_price, 0, kMaxGpuHourPrice);
    p.number("GPUACCT_GPU_HARDWARE_COST", &c.cost.hardware_cost, 0, kMaxCostAmount);
    p.number("GPUACCT_AMORTIZATION_MONTHS", &c.cost.amortization_months, 0, kMaxAmortizationMonths);
    p.number("GPUACCT_FACILITY_PER_MONTH", &c.cost.facility_per_month, 0, kMaxCostAmount);
    p.number("GPUACCT_POWER_PER_GPU_HOUR", &c.cost.power_per_gpu_hour, 0, kMaxGpuHourPrice);
    p.number("GPUACCT_TOKENS_PER_STEP", &c.cost.tokens_per_step, 0, kMaxStepWork);
    p.number("GPUACCT_SAMPLES_PER_STEP", &c.cost.samples_per_step, 0, kMaxStepWork);
    if (const std::string why = c.cost.check(); !why.empty()) {
      // The price alone still counts; the owned model is dropped whole.
      if (warnings != nullptr) warnings->push_back("the owned-GPU cost model is incomplete (" + why +
                          "); using the GPU-hour price only");
      CostModel rent;
      rent.gpu_hour_price = c.cost.gpu_hour_price;
      rent.tokens_per_step = c.cost.tokens_per_step;
      rent.samples_per_step = c.cost.samples_per_step;
      c.cost = rent;
    }
  } catch (...) {
    // Only std::bad_alloc can get here; the defaults already in c are usable.
  }

  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') std::strcpy(host, "unknown");
  for (char* h = host; *h != '\0'; ++h) {
    if (*h == '/' || *h == ' ') *h = '_';
  }
  c.host = host;
  c.pid = static_cast<int64_t>(getpid());
  c.rank = first_int_env(env, {"RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}, -1);
  c.world_size = first_int_env(env, {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}, 0);
  try {  // the job id lets the job view refuse to merge ranks of two jobs
    for (const char* name :
         {"GPUACCT_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "LSB_JOBID", "PBS_JOBID"}) {
      const char* v = env(name);
      if (v != nullptr && v[0] != '\0') {
        c.job_id = v;
        break;
      }
    }
  } catch (...) {
    // std::bad_alloc only: no job id, as when none is set.
  }
  try {
    // Checked once host, pid and rank are known: the name they expand to must fit.
    const size_t name_bytes = c.output_name().size();
    if (name_bytes > kMaxOutputNameBytes) {
      p.warn("GPUACCT_OUTPUT_PATTERN", c.output_pattern,
             "is too long (the file name would have " + std::to_string(name_bytes) +
                 " bytes, at most " + std::to_string(kMaxOutputNameBytes) + " fit)",
             default_pattern);
      c.output_pattern = default_pattern;
    }
  } catch (...) {
    c.output_pattern = default_pattern;
  }
  return c;
}

AccountingConfig Config::accounting() const {
  AccountingConfig a;
  a.launch_latency_threshold_ns = launch_latency_us * 1000;
  a.host_pause_threshold_ns = host_pause_us * 1000;
  a.warmup_steps = warmup_steps;
  a.pending_event_limit = pending_event_limit;
  return a;
}

std::string Config::output_name() const {
  std::string name;
  const std::string rank_text = std::to_string(rank < 0 ? 0 : rank);
  for (size_t i = 0; i < output_pattern.size();) {
    auto rest = std::string_view(output_pattern).substr(i);
    if (rest.starts_with("{host}")) {
      name += host;
      i += 6;
    } else if (rest.starts_with("{pid}")) {
      name += std::to_string(pid);
      i += 5;
    } else if (rest.starts_with("{rank}")) {
      name += rank_text;
      i += 6;
    } else {
      name += output_pattern[i++];
    }
  }
  return name;
}

std::string Config::output_base() const {
  const std::string name = output_name();
  std::string dir = output_dir.empty() ? "." : output_dir;
  if (dir.back() != '/') dir += '/';
  return dir + name;
}

}  // namespace gpuacct::inject
