// gpuacct analyze: recording or trace -> accounting -> report files + terminal summary.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include "analysis/accounting/step_accountant.h"
#include "analysis/import/recording.h"
#include "analysis/model/file_io.h"
#include "analysis/report/cross_rank.h"
#include "analysis/report/report.h"
#include "cli/analyze_input.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace gpuacct::cli {
namespace {

const char kHelp[] =
    "usage: gpuacct analyze INPUT... [options]\n\n"
    "INPUT is a gpuacct recording (*.gpuacct, written by libgpuacct.so with GPUACCT_RECORD=1\n"
    "or by `gpuacct synth`) or a PyTorch-profiler trace (*.json / *.json.gz).  Several inputs\n"
    "(one per rank) give one report each.\n\n"
    "options:\n"
    "  -o, --out DIR             directory for <name>.report.json and <name>.steps.csv\n"
    "                            (default: gpuacct-out)\n"
    "      --no-files            print only; write nothing\n"
    "      --json                print the JSON report instead of the summary\n"
    "      --warmup N            steps left out of the summary (default: 2 for\n"
    "                            recordings, 0 for profiler traces)\n"
    "      --launch-latency-us X idle gap of an already-queued op counted as launch latency\n"
    "                            below X us (default 30)\n"
    "      --host-pause-us X     host pause between CUDA calls counted as host-other above\n"
    "                            X us (default 100)\n"
    "      --color               colour the summary\n"
    "  -h, --help                this text\n";

std::string stem_of(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* ext : {".gz", ".json", ".gpuacct", ".pt.trace"}) {
    const std::string e = ext;
    if (name.size() > e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0) {
      name.resize(name.size() - e.size());
    }
  }
  return name.empty() ? "report" : name;
}

}  // namespace

int run_analyze(int argc, char** argv) {
  Args args({"out", "warmup", "launch-latency-us", "host-pause-us"},
            {"help", "json", "no-files", "color"}, {{'o', "out"}, {'h', "help"}});
  if (!args.parse(argc, argv)) {
    std::fprintf(stderr, "gpuacct analyze: %s\n(see gpuacct analyze --help)\n",
                 args.error().c_str());
    return 2;
  }
  if (args.has("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().empty()) {
    std::fprintf(stderr, "gpuacct analyze: no input given\n(see gpuacct analyze --help)\n");
    return 2;
  }
  AccountingConfig cfg;
  const auto warmup = args.get_number("warmup", cfg.warmup_steps, 0, 1e6);
  const auto latency = args.get_number("launch-latency-us", 30, 0, 1e9);
  const auto pause = args.get_number("host-pause-us", 100, 0, 1e9);
  if (warmup && *warmup != static_cast<double>(static_cast<int64_t>(*warmup))) {
    std::fprintf(stderr, "gpuacct analyze: option '--warmup': '%s' is not a whole number\n",
                 args.get("warmup").c_str());
    return 2;
  }
  if (!warmup || !latency || !pause) {
    std::fprintf(stderr, "gpuacct analyze: %s\n", args.error().c_str());
    return 2;
  }
  // Without --warmup the source decides: recordings of whole runs leave out 2 warm-up steps,
  // profiler traces (already a steady-state capture) none.
  cfg.warmup_steps = args.has("warmup") ? static_cast<int>(*warmup) : -1;
  cfg.launch_latency_threshold_ns = static_cast<TimeNs>(*latency * 1000.0);
  cfg.host_pause_threshold_ns = static_cast<TimeNs>(*pause * 1000.0);

  const bool write_files = !args.has("no-files");
  const std::string out_dir = args.get("out", "gpuacct-out");
  if (write_files) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) {
      std::fprintf(stderr, "gpuacct analyze: cannot create output directory %s: %s\n",
                   out_dir.c_str(), ec.message().c_str());
      return 1;
    }
  }

  // One output name per input: inputs with the same file name (rank0/trace.json,
  // rank1/trace.json) get -2, -3... instead of overwriting each other's report.
  std::set<std::string> stems_used;
  auto unique_stem = [&](const std::string& input) {
    const std::string stem = stem_of(input);
    std::string name = stem;
    for (int n = 2; !stems_used.insert(name).second; ++n) name = stem + "-" + std::to_string(n);
    return name;
  };

  int rc = 0;
  std::vector<RankRows> ranks;  // for the cross-rank comparison of several inputs
  for (const std::string& input : args.positional()) {
    const std::string stem = unique_stem(input);
    auto analysed = analyze_input(input, cfg, /*progress=*/isatty(2) != 0);
    if (!analysed.ok()) {
      std::fprintf(stderr, "gpuacct analyze: %s\n", analysed.status().message().c_str());
      rc = 1;
      continue;
    }
    const nlohmann::json& report = analysed->report;
    // Nothing gpuacct supports in the input (another accelerator's trace): the report says
    // what was found, and the exit status says the input could not be accounted.
    const nlohmann::json verdict = report.value("verdict", nlohmann::json::object());
    if (verdict.value("reason", "") == "unsupported_device") {
      std::fprintf(stderr, "gpuacct analyze: %s: %s\n", input.c_str(),
                   verdict.value("headline", "").c_str());
      rc = 1;
    }
    if (write_files) {
      const std::string base = out_dir + "/" + stem;
      // The pair is written CSV first, report last, and the CSV removed if the report fails:
      // a report file on disk always has its CSV beside it, never half a result.
      Status st = write_file_atomic(base + ".steps.csv", step_rows_csv(analysed->rows));
      if (st.ok()) {
        st = write_file_atomic(base + ".report.json", report.dump(2) + "\n");
        if (!st.ok()) std::remove((base + ".steps.csv").c_str());
      }
      if (!st.ok()) {
        std::fprintf(stderr, "gpuacct analyze: %s\n", st.message().c_str());
        rc = 1;
        continue;
      }
      std::fprintf(stderr, "gpuacct: wrote %s.report.json and %s.steps.csv\n", base.c_str(),
                   base.c_str());
    }
    if (args.has("json")) {
      std::cout << report.dump(2) << "\n";
    } else {
      auto text = render_terminal_summary(report, args.has("color"));
      std::cout << (text.ok() ? text.value() : text.status().message()) << "\n";
    }
    ranks.push_back(RankRows{report.value("run", nlohmann::json::object()).value("rank", -1), stem,
                             analysed->rows});
  }
  if (ranks.size() > 1) {
    const RankComparison cmp = compare_ranks(ranks);
    if (!args.has("json")) std::cout << render_rank_comparison(cmp);
    if (write_files) {
      const Status st =
          write_file_atomic(out_dir + "/ranks.json", rank_comparison_to_json(cmp).dump(2) + "\n");
      if (!st.ok()) {
        std::fprintf(stderr, "gpuacct analyze: %s\n", st.message().c_str());
        rc = 1;
      }
    }
  }
  return rc;
}

}  // namespace gpuacct::cli
