// gpuacct analyze: recording or trace -> accounting -> report files + terminal summary.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "analysis/input/input.h"
#include "analysis/job/rank_files.h"
#include "analysis/job/rank_inputs.h"
#include "analysis/model/collective_rows.h"
#include "analysis/model/file_io.h"
#include "analysis/model/json_text.h"
#include "analysis/model/ordered_parallel.h"
#include "analysis/report/cost.h"
#include "analysis/report/report.h"
#include "cli/accounting_options.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/pipelines.h"

namespace gpuacct::cli {
namespace {

std::string help_text() {
  return "usage: gpuacct analyze INPUT... [options]\n\n"
         "INPUT is a gpuacct recording (*.gpuacct, written by libgpuacct.so with GPUACCT_RECORD=1\n"
         "or by `gpuacct synth`), a PyTorch-profiler trace (*.json / *.json.gz) or a live run's\n"
         "step stream (*.steps.jsonl: its rows summarised).  A killed job's recording\n"
         "(*.gpuacct.tmp.PID) or stream is read up to where it was cut.  A gpuacct report\n"
         "(*.report.json) is shown as it was written.  Several inputs (one per rank) give one\n"
         "report each, then the job view of them all (as `gpuacct job`: job.json; a rank's\n"
         "<base>.collectives.csv beside its input is used).\n\n"
         "options:\n"
         "  -o, --out DIR             directory for <name>.report.json and <name>.steps.csv, and\n"
         "                            <name>.collectives.csv when the input has NCCL collectives\n"
         "                            (default: gpuacct-out)\n"
         "      --no-files            print only; write nothing\n"
         "      --json                print the JSON report instead of the summary\n" +
         jobs_option_help(28) +
         accounting_options_help() + cost_options_help() +
         "      --color               colour the summary\n"
         "  -h, --help                this text\n";
}

// One output name per input: inputs with the same file name (rank0/trace.json,
// rank1/trace.json) get -2, -3... instead of overwriting each other's report.
class OutputNames {
 public:
  std::string unique_stem(const std::string& input) {
    const std::string stem = output_stem(input);
    std::string name = stem;
    for (int n = 2; !used_.insert(name).second; ++n) name = stem + "-" + std::to_string(n);
    return name;
  }

 private:
  std::set<std::string> used_;
};

struct AnalyzeSettings {
  AccountingConfig cfg;
  unsigned jobs = 1;  // inputs read at once
  std::set<std::string> given;  // the accounting options given
  bool write_files = true;
  bool json = false;
  bool color = false;
  std::string out_dir;
  CostModel cost;  // none: no cost section
};

// The collectives rows file (analysis/model/collective_rows.h) from the spooled records.
Status write_collectives(const std::string& path, const AnalyzedInput& analysed) {
  CollectiveRowWriter writer;
  GPUACCT_RETURN_IF_ERROR(writer.open(path, analysed.collectives_header));
  if (!analysed.collectives->for_each([&](const CollectiveRecord& r) { writer.append(r); }))
    return Status::Error(path + ": could not read back the collectives held in a temporary file");
  writer.count_lost(analysed.collectives->lost());
  return writer.finish();
}

bool has_collectives(const AnalyzedInput& analysed) {
  return analysed.collectives != nullptr &&
         analysed.collectives->count() + analysed.collectives->lost() > 0;
}

// The files are written CSVs first, report last, and the CSVs removed if a later one fails: a
// report file on disk always has its CSVs beside it, never half a result.  An input of events
// without collectives leaves no <name>.collectives.csv (one from an earlier analysis is
// removed: it would be read as this report's); a step stream's is the live run's own: kept.
Status write_outputs(const std::string& base, const AnalyzedInput& analysed) {
  const std::string steps = step_rows_csv_file(base);
  const std::string collectives = rank_file(base, RankFileKind::kCollectives);
  Status st = write_file_atomic(steps, step_rows_csv(analysed.rows));
  if (st.ok() && has_collectives(analysed)) {
    st = write_collectives(collectives, analysed);
    if (!st.ok()) std::remove(steps.c_str());
  }
  if (st.ok()) {
    st = write_file_atomic(rank_file(base, RankFileKind::kReport),
                           dump_json(analysed.report, 2) + "\n");
    if (!st.ok()) {
      std::remove(steps.c_str());
      if (has_collectives(analysed)) std::remove(collectives.c_str());
    }
  }
  if (st.ok() && analysed.collectives_known && !has_collectives(analysed)) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(std::filesystem::symlink_status(collectives, ec)))
      std::filesystem::remove(collectives, ec);
  }
  return st;
}

// True if one of `paths` is in `dir` or below it (paths as the file system resolves them).
bool any_inside(const std::vector<std::string>& paths, const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::weakly_canonical(dir, ec);
  if (ec) return true;  // cannot tell: one at a time is always right
  for (const std::string& p : paths) {
    const std::filesystem::path file = std::filesystem::weakly_canonical(p, ec);
    if (ec) return true;
    const auto [r, f] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
    if (r == root.end()) return true;
  }
  return false;
}

// Analyses one input, writes and prints its report.  Returns the exit status (0 or 1) and
// appends the rank for the job view.
int analyze_one(const std::string& input, const std::string& stem, const AnalyzeSettings& s,
                StatusOr<AnalyzedInput> analysed, std::vector<JobRank>* ranks) {
  if (!analysed.ok()) {
    std::fprintf(stderr, "gpuacct analyze: %s\n", analysed.status().message().c_str());
    return 1;
  }
  // A killed job's input: what was lost, in one line (the report's cut_off section has it).
  if (!analysed->cut_off.empty()) {
    std::fprintf(stderr, "gpuacct analyze: %s\n", analysed->cut_off.c_str());
  }
  // A flag overrode the run's own setting: the rows are not the live report's (one line).
  if (!analysed->settings_note.empty()) {
    std::fprintf(stderr, "gpuacct analyze: %s\n", analysed->settings_note.c_str());
  }
  int rc = 0;
  const nlohmann::json& report = analysed->report;
  // Nothing gpuacct supports in the input (another accelerator's trace): the report says what
  // was found, and the exit status says the input could not be accounted.
  const nlohmann::json verdict = report.value("verdict", nlohmann::json::object());
  if (verdict.value("reason", "") == "unsupported_device" ||
      verdict.value("reason", "") == "all_warmup") {
    std::fprintf(stderr, "gpuacct analyze: %s: %s\n", input.c_str(),
                 verdict.value("headline", "").c_str());
    rc = 1;
  }
  if (s.write_files) {
    const std::string base = s.out_dir + "/" + stem;
    if (const Status st = write_outputs(base, *analysed); !st.ok()) {
      std::fprintf(stderr, "gpuacct analyze: %s\n", st.message().c_str());
      return 1;
    }
    const std::string report_file = rank_file(base, RankFileKind::kReport);
    const std::string steps_file = step_rows_csv_file(base);
    if (has_collectives(*analysed)) {
      std::fprintf(stderr, "gpuacct: wrote %s, %s and %s\n", report_file.c_str(),
                   steps_file.c_str(), rank_file(base, RankFileKind::kCollectives).c_str());
    } else {
      std::fprintf(stderr, "gpuacct: wrote %s and %s\n", report_file.c_str(), steps_file.c_str());
    }
  }
  if (s.json) {
    std::cout << dump_json(report, 2) << "\n";
  } else {
    auto text = render_terminal_summary(report, s.color);
    std::cout << (text.ok() ? text.value() : text.status().message()) << "\n";
  }
  // The rank for the job view, as `gpuacct job` builds it (analysis/job/rank_inputs.h).
  std::vector<CollectiveRecord> held;
  if (has_collectives(*analysed) && !s.write_files) {
    analysed->collectives->for_each([&](const CollectiveRecord& r) { held.push_back(r); });
  }
  const std::string written = has_collectives(*analysed) && s.write_files
                                  ? rank_file(s.out_dir + "/" + stem, RankFileKind::kCollectives)
                                  : std::string();
  ranks->push_back(
      rank_of_analysed_input(input, report, std::move(analysed->rows), written, std::move(held)));
  return rc;
}

// Several ranks: the job view (printed, and job.json), as `gpuacct job` gives it.
int job_view_of(std::vector<JobRank> ranks, const AnalyzeSettings& s) {
  JobInputs inputs;
  check_job_ranks(std::move(ranks), &inputs);
  JobCliSettings js;
  js.command = "analyze";
  js.write_files = s.write_files;
  js.out_dir = s.out_dir;
  js.print = !s.json;
  return run_job_view(inputs, js);
}

}  // namespace

StatusOr<AnalyzedInput> analyze_input(const std::string& path, const AccountingConfig& cfg,
                                      bool progress, const std::set<std::string>& given,
                                      const CostModel& cost) {
  auto input = Input::open(path);
  if (!input.ok()) return input.status();
  NameTable names;
  InputOptions opts;
  opts.progress = progress;
  opts.given_settings = given;
  opts.cost = cost;
  AnalyzedInput out;
  out.collectives = std::make_unique<CollectiveSpool>();
  // A step stream or a report holds rows, not events: its collectives are the live run's file.
  out.collectives_known =
      input->format() != InputFormat::kStepStream && input->format() != InputFormat::kReport;
  AccountingObservers observers;
  observers.on_collective = [spool = out.collectives.get()](const CollectiveRecord& r) {
    spool->add(r);
  };
  auto reported = report_input(input.value(), cfg, names, opts, observers);
  if (!reported.ok()) return reported.status();
  out.report = std::move(reported->report);
  out.rows = std::move(reported->rows);
  out.cut_off = std::move(reported->cut_off);
  out.settings_note = std::move(reported->settings_note);
  out.collectives_header = std::move(reported->collectives_header);
  return out;
}

int run_analyze(int argc, char** argv) {
  std::set<std::string> valued = accounting_option_names();
  valued.insert("out");
  for (const std::string& name : cost_option_names()) valued.insert(name);
  valued.insert("jobs");
  Args args(valued, {"help", "json", "no-files", "color"},
            {{'o', "out"}, {'h', "help"}, {'j', "jobs"}});
  if (!args.parse(argc, argv)) {
    std::fprintf(stderr, "gpuacct analyze: %s\n(see gpuacct analyze --help)\n",
                 args.error().c_str());
    return 2;
  }
  if (args.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().empty()) {
    std::fprintf(stderr, "gpuacct analyze: no input given\n(see gpuacct analyze --help)\n");
    return 2;
  }
  AnalyzeSettings s;
  if (std::string error; !parse_accounting_options(args, &s.cfg, &s.given, &error) ||
                          !parse_cost_options(args, &s.cost, &error) ||
                          !parse_jobs(args, &s.jobs, &error)) {
    std::fprintf(stderr, "gpuacct analyze: %s\n", error.c_str());
    return 2;
  }
  s.write_files = !args.has("no-files");
  s.json = args.has("json");
  s.color = args.has("color");
  s.out_dir = args.get("out", "gpuacct-out");
  if (s.write_files) {
    std::error_code ec;
    std::filesystem::create_directories(s.out_dir, ec);
    if (ec) {
      std::fprintf(stderr, "gpuacct analyze: cannot create output directory %s: %s\n",
                   s.out_dir.c_str(), ec.message().c_str());
      return 1;
    }
  }
  const std::vector<std::string>& inputs = args.positional();
  OutputNames names;
  std::vector<std::string> stems;
  for (const std::string& input : inputs) stems.push_back(names.unique_stem(input));
  int rc = 0;
  std::vector<JobRank> ranks;  // for the job view of several inputs
  // Several inputs are read at once (--jobs), their reports printed and written in the order
  // given: the same bytes as one at a time.  Not when an input lies in the output directory: it
  // may be what an earlier input writes there.  A progress line only for one at a time
  // (several would interleave).
  if (s.write_files && any_inside(inputs, s.out_dir)) s.jobs = 1;
  const bool progress = isatty(2) != 0 && (s.jobs <= 1 || inputs.size() <= 1);
  ordered_parallel<StatusOr<AnalyzedInput>>(
      inputs.size(), s.jobs,
      [&](size_t i) -> StatusOr<AnalyzedInput> {
        // analysis/ reports errors as Status; what throws (an allocation) is this input's
        // error, and the other inputs go on.
        try {
          return analyze_input(inputs[i], s.cfg, progress, s.given, s.cost);
        } catch (const std::bad_alloc&) {
          return Status::Error(inputs[i] + ": out of memory (fewer --jobs may help)");
        } catch (const std::exception& e) {
          return Status::Error(inputs[i] + ": " + e.what());
        }
      },
      [&](size_t i, StatusOr<AnalyzedInput>&& analysed) {
        rc |= analyze_one(inputs[i], stems[i], s, std::move(analysed), &ranks);
      });
  if (ranks.size() > 1) rc |= job_view_of(std::move(ranks), s);
  return rc;
}

}  // namespace gpuacct::cli
