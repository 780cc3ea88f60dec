// gpuacct report: the ten-second summary of a JSON report written by analyze or the library,
// or of a live run's step stream (<base>.steps.jsonl, recognised by its header line): all its
// rows summarised with the one C++ summary (analysis/input/input.h report_input), a killed
// job's stream included.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analysis/input/input.h"
#include "analysis/job/job_summary.h"
#include "analysis/model/file_io.h"
#include "analysis/model/json_text.h"
#include "analysis/report/cost.h"
#include "analysis/report/report.h"
#include "cli/accounting_options.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace gpuacct::cli {
namespace {

// What a file that is not a report or a step stream is, and the command that reads it, in one
// line; empty when it looks like neither (then it is parsed as a report and said to be none).
std::string which_command_reads(const std::string& path, InputFormat format) {
  if (format == InputFormat::kRecording) {
    return path + " is a recording, not a report: `gpuacct analyze " + path +
           "` accounts it and prints its summary";
  }
  if (format != InputFormat::kKinetoTrace) return "";
  std::ifstream in(path, std::ios::binary);
  std::string head(1 << 16, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  const std::string job = kJobSchema;
  if (head.find("\"" + job + "\"") != std::string::npos) {
    return path + " is a job view (" + job +
           "), not a report: `gpuacct job` prints it from the ranks' outputs "
           "(gpuacct job DIR|FILE...)";
  }
  if (head.find("\"traceEvents\"") != std::string::npos || head.rfind("\x1f\x8b", 0) == 0) {
    return path + " is a profiler trace, not a report: `gpuacct analyze " + path +
           "` accounts it and prints its summary";
  }
  return "";
}

}  // namespace

int run_report(int argc, char** argv) {
  // --json is the Python package's report (summary and verdict as JSON): one name, `gpuacct`,
  // for both (cli/cmd_python.cc).
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json") return run_python_command("report", argc, argv);
  }
  Args args(cost_option_names(), {"help", "color"}, {{'h', "help"}});
  CostModel cost;
  std::string error;
  if (!args.parse(argc, argv) || !parse_cost_options(args, &cost, &error)) {
    std::fprintf(stderr, "gpuacct report: %s\n", error.empty() ? args.error().c_str() : error.c_str());
    return 2;
  }
  if (args.has("help") || args.positional().size() != 1) {
    std::fputs(
        ("usage: gpuacct report REPORT.json|STREAM.steps.jsonl [--color] [cost options]\n\n"
        "Prints the terminal summary (walls, verdict, recommendation) of a report\n"
        "written by `gpuacct analyze` or by libgpuacct.so, or of the step rows of a\n"
        "run's step stream (also of a job that was killed: every row it wrote).\n\n"
        "options:\n" + cost_options_help() +
        "      --json                summary and verdict as JSON (the Python package's\n"
        "                            report: python -m gpuacct report --json)\n").c_str(),
        args.has("help") ? stdout : stderr);
    return args.has("help") ? 0 : 2;
  }
  const std::string path = args.positional().front();
  if (const Status st = check_input_file(path); !st.ok()) {
    std::fprintf(stderr, "gpuacct report: %s\n", st.message().c_str());
    return 1;
  }
  auto input = Input::open(path);
  if (input.ok()) {
    if (const std::string other = which_command_reads(path, input->format()); !other.empty()) {
      std::fprintf(stderr, "gpuacct report: %s\n", other.c_str());
      return 1;
    }
  }
  if (input.ok() && input->format() == InputFormat::kStepStream) {
    NameTable names;
    AccountingConfig cfg;
    cfg.warmup_steps = AccountingConfig::kWarmupBySource;  // the rows' own warm-up flags
    InputOptions opts;
    opts.cost = cost;
    auto reported = report_input(input.value(), cfg, names, opts);
    if (!reported.ok()) {
      std::fprintf(stderr, "gpuacct report: %s\n", reported.status().message().c_str());
      return 1;
    }
    if (!reported->cut_off.empty()) {
      std::fprintf(stderr, "gpuacct report: %s\n", reported->cut_off.c_str());
    }
    auto text = render_terminal_summary(reported->report, args.has("color"));
    if (!text.ok()) {
      std::fprintf(stderr, "gpuacct report: %s: %s\n", path.c_str(),
                   text.status().message().c_str());
      return 1;
    }
    std::cout << text.value();
    return 0;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "gpuacct report: cannot open %s\n", path.c_str());
    return 1;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  size_t error_byte = 0;
  nlohmann::json j = parse_json(text, &error_byte);
  if (j.is_discarded()) {
    std::fprintf(stderr,
                 "gpuacct report: %s is not valid JSON (byte %zu): not a report "
                 "(<name>.report.json) or step stream (<name>.steps.jsonl); recordings and "
                 "traces: gpuacct analyze\n",
                 path.c_str(), error_byte);
    return 1;
  }
  // A report already assembled: cost options given here re-price it (they replace the cost it
  // was written with, if any).
  if (j.is_object() && j.contains("summary")) add_cost_section(cost, &j);
  auto summary = render_terminal_summary(j, args.has("color"));
  if (!summary.ok()) {
    std::fprintf(stderr,
                 "gpuacct report: %s: %s; `gpuacct report` reads what `gpuacct analyze` or the "
                 "library wrote (<name>.report.json, <name>.steps.jsonl)\n",
                 path.c_str(), summary.status().message().c_str());
    return 1;
  }
  std::cout << summary.value();
  return 0;
}

}  // namespace gpuacct::cli
