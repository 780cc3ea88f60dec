// gpuacct diff BASE NEW: how the step time changed between two runs, split by wall, with a
// bootstrap interval over steps (analysis/compare/run_diff.h, docs/diff.md).  Both inputs go
// through the front door (analysis/input/input.h report_input): reports, step streams,
// recordings and Kineto traces alike, accounted with the same settings.
//
// Exit status, for CI: 0 compared (and not slower than --fail-if-slower), 1 significantly
// slower than --fail-if-slower, 2 a usage error or an input that cannot be compared (one line
// on stderr, nothing written).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "analysis/compare/run_diff.h"
#include "analysis/input/input.h"
#include "analysis/job/rank_files.h"
#include "analysis/model/file_io.h"
#include "analysis/model/json_text.h"
#include "cli/accounting_options.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace gpuacct::cli {
namespace {

constexpr int kExitSlower = 1;
constexpr int kExitError = 2;

std::string help_text() {
  const DiffOptions defaults;
  return "usage: gpuacct diff BASE NEW [options]\n\n"
         "How the step time changed from BASE to NEW, split by wall (compute, communication,\n"
         "data, launch, other: the changes add up to the step time's), with a bootstrap\n"
         "confidence interval over steps; the kernels whose exposed time changed most; and\n"
         "first, the settings and environment that differ (GPU, world size, accounting).\n"
         "BASE and NEW are reports (*.report.json), step streams (*.steps.jsonl), recordings\n"
         "(*.gpuacct) or PyTorch-profiler traces, in any mix, or a rank's output folder (its\n"
         "report, else its step stream, recording or trace); warm-up steps are left out as\n"
         "the report's summary leaves them out.\n\n"
         "options:\n"
         "      --fail-if-slower X%   exit 1 when NEW's step time is significantly slower than\n"
         "                            BASE's by more than X percent (CI gates)\n"
         "      --json                print the diff as JSON (schema gpuacct.diff/1)\n"
         "  -o, --out FILE            also write the JSON to FILE\n"
         "      --resamples N         bootstrap resamples (default " +
         std::to_string(defaults.resamples) +
         ")\n"
         "      --seed S              bootstrap seed (default " +
         std::to_string(defaults.seed) + ")\n" + accounting_options_help() +
         "  -h, --help                this text\n\n"
         "exit status: 0 compared, 1 slower than --fail-if-slower, 2 usage or input error\n";
}

// "5%", "5" or "2.5%": a percentage in [0, 1000].
bool parse_percent(std::string text, double* out) {
  if (!text.empty() && text.back() == '%') text.pop_back();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !(v >= 0 && v <= 1000)) return false;
  *out = v;
  return true;
}

// One input through the front door into what the diff compares.
StatusOr<DiffRun> load_run(const std::string& given_path, const AccountingConfig& cfg,
                           const std::set<std::string>& given) {
  // A rank's folder: its richest step rows (analysis/job/rank_files.h).
  std::string path = given_path;
  if (std::error_code ec; std::filesystem::is_directory(given_path, ec)) {
    auto in_folder = rank_input_of_folder(given_path);
    if (!in_folder.ok()) return in_folder.status();
    path = in_folder.value();
  }
  auto input = Input::open(path);
  if (!input.ok()) return input.status();
  NameTable names;
  InputOptions opts;
  opts.progress = isatty(2) != 0;
  opts.given_settings = given;
  auto reported = report_input(input.value(), cfg, names, opts);
  if (!reported.ok()) return reported.status();
  if (!reported->cut_off.empty())
    std::fprintf(stderr, "gpuacct diff: %s\n", reported->cut_off.c_str());
  if (!reported->settings_note.empty()) {
    std::fprintf(stderr, "gpuacct diff: %s\n", reported->settings_note.c_str());
  }
  auto run = diff_run_from_report(reported->report, reported->rows, path);
  if (!run.ok()) return run;
  if (input->format() == InputFormat::kStepStream) {
    run->kernels_known = false;
    run->kernels_unknown_why = "a step stream holds rows, not kernels";
  }
  // A report or step stream holds rows accounted already: --warmup re-flags them (report_input),
  // so its config says so; the thresholds cannot apply to them, and the user is told.
  const bool rows_only =
      input->format() == InputFormat::kReport || input->format() == InputFormat::kStepStream;
  if (rows_only && given.count(kSettingWarmupSteps) > 0) {
    run->config[kSettingWarmupSteps] = cfg.warmup_steps;
  }
  if (rows_only && (given.count(kSettingLaunchLatency) > 0 || given.count(kSettingHostPause) > 0)) {
    std::fprintf(stderr,
                 "gpuacct diff: %s holds rows accounted already: --launch-latency-us and "
                 "--host-pause-us do not apply to it\n",
                 path.c_str());
  }
  return run;
}

}  // namespace

int run_diff(int argc, char** argv) {
  std::set<std::string> valued = accounting_option_names();
  for (const char* name : {"fail-if-slower", "out", "resamples", "seed"}) valued.insert(name);
  Args args(valued, {"help", "json"}, {{'o', "out"}, {'h', "help"}});
  if (!args.parse(argc, argv)) {
    std::fprintf(stderr, "gpuacct diff: %s\n(see gpuacct diff --help)\n", args.error().c_str());
    return kExitError;
  }
  if (args.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 2) {
    std::fprintf(stderr,
                 "gpuacct diff: needs two inputs, BASE and NEW (%zu given)\n"
                 "(see gpuacct diff --help)\n",
                 args.positional().size());
    return kExitError;
  }
  AccountingConfig cfg;
  std::set<std::string> given;
  DiffOptions options;
  std::string error;
  double fail_percent = -1;
  const auto resamples = args.get_number("resamples", options.resamples, 1, 1e6);
  const auto seed = args.get_number("seed", static_cast<double>(options.seed), 0, 1e15);
  if (!parse_accounting_options(args, &cfg, &given, &error) || !resamples || !seed) {
    std::fprintf(stderr, "gpuacct diff: %s\n",
                 error.empty() ? args.error().c_str() : error.c_str());
    return kExitError;
  }
  if (args.has("fail-if-slower") && !parse_percent(args.get("fail-if-slower"), &fail_percent)) {
    std::fprintf(stderr, "gpuacct diff: --fail-if-slower: '%s' is not a percentage such as 5%%\n",
                 args.get("fail-if-slower").c_str());
    return kExitError;
  }
  options.resamples = static_cast<int>(*resamples);
  options.seed = static_cast<uint64_t>(*seed);

  const std::string base_path = args.positional()[0], new_path = args.positional()[1];
  auto base = load_run(base_path, cfg, given);
  if (!base.ok()) {
    std::fprintf(stderr, "gpuacct diff: %s\n", base.status().message().c_str());
    return kExitError;
  }
  auto next = load_run(new_path, cfg, given);
  if (!next.ok()) {
    std::fprintf(stderr, "gpuacct diff: %s\n", next.status().message().c_str());
    return kExitError;
  }
  const RunDiff diff = diff_runs(base.value(), next.value(), options);
  nlohmann::json j = run_diff_to_json(diff);
  const bool slower = fail_percent >= 0 && slower_than(diff, fail_percent);
  if (fail_percent >= 0) {
    j["fail_if_slower"] = {{"percent", fail_percent}, {"failed", slower}};
  }
  if (args.has("out")) {
    if (const Status st = write_file_atomic(args.get("out"), dump_json(j, 2) + "\n"); !st.ok()) {
      std::fprintf(stderr, "gpuacct diff: %s\n", st.message().c_str());
      return kExitError;
    }
  }
  if (args.has("json")) {
    std::cout << dump_json(j, 2) << "\n";
  } else {
    std::cout << run_diff_text(diff);
    if (fail_percent >= 0) {
      std::cout << (slower ? "FAIL" : "ok") << ": --fail-if-slower " << fail_percent << "%: "
                << (slower ? "significantly slower by more than that\n"
                           : "not significantly slower by more than that\n");
    }
  }
  return slower ? kExitSlower : 0;
}

}  // namespace gpuacct::cli
