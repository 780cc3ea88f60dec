// gpuacct job: many ranks' outputs -> the job view (terminal + job.json, --export tables).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "analysis/job/job_export.h"
#include "analysis/job/job_merge.h"
#include "analysis/job/rank_inputs.h"
#include "analysis/model/file_io.h"
#include "analysis/model/json_text.h"
#include "analysis/model/stable_hash.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace gpuacct::cli {
namespace {

std::string help_text() {
  return "usage: gpuacct job DIR|FILE... [options]\n\n"
         "One answer for every rank of a distributed job: who arrives last at the collectives,\n"
         "what it was doing instead (data, launch, host, compute), how long the others wait,\n"
         "and what the transfers achieve (bus bandwidth).  Inputs: each rank's outputs --\n"
         "<base>.report.json (or rankN/report.json), <base>.steps.jsonl, <base>.collectives.csv,\n"
         "recordings (*.gpuacct) or profiler traces -- as files, globs or directories (their\n"
         "files and their sub-folders' files).  Files of one rank share a base name, or a\n"
         "folder of their own; a file named brings the rank's files beside it.  Clocks of\n"
         "different hosts are aligned on the ends of matched collectives (docs/job_view.md).\n\n"
         "options:\n"
         "  -o, --out DIR      directory for job.json (default: gpuacct-out)\n"
         "      --no-files     print only; write nothing\n"
         "      --json         print job.json instead of the summary\n"
         "      --export DIR   write job_steps.csv and job_collectives.csv (every rank's rows on\n"
         "                     the job clock, with waits and blame) into DIR\n"
         "      --window N     steps merged at a time (default 8; memory grows with it)\n"
         "      --job-id ID    the job's id in job.json and the export (default: the id the\n"
         "                     ranks carry; the export derives nojob-<hash of hosts and file\n"
         "                     names> when they carry none: docs/job_view.md)\n"
         "      --link-peak-gbs X\n"
         "                     the link's peak bus bandwidth in GB/s (NVLink on H100/H200: 450\n"
         "                     per direction; InfiniBand NDR: 50 per port): each collective\n"
         "                     type's bus bandwidth is shown as a share of it, and transfers\n"
         "                     well below it blame the link (else the job's own fastest\n"
         "                     transfers are the reference)\n" +
         jobs_option_help(21) +
         "  -h, --help         this text\n\n"
         "Exit status: 0 with a job view (problems with some ranks are listed, one line each),\n"
         "1 when no rank could be used, 2 on a usage error.\n";
}

// The export's id for ranks that carry none (no GPUACCT_JOB_ID, SLURM_JOB_ID, ... in their
// run: synth recordings, profiler traces, single-node runs): the Parquet dataset is partitioned
// by job, so every row needs one.  Derived from what names the ranks -- hosts and the file
// names they share -- so the same files give the same id on every export, and two runs whose
// files differ (pids are in the library's file names) do not share one.
std::string derived_job_id(const JobInputs& inputs) {
  std::vector<std::string> names;
  for (const JobRank& r : inputs.ranks) {
    names.push_back(r.hostname + '\n' + std::to_string(r.rank) + '\n' +
                    std::filesystem::path(r.label).filename().string());
  }
  std::sort(names.begin(), names.end());
  uint64_t hash = stable_hash64("gpuacct job");
  for (const std::string& n : names) hash = stable_hash64(n + '\0', hash);
  char id[32];
  std::snprintf(id, sizeof id, "nojob-%08" PRIx32, static_cast<uint32_t>(hash ^ (hash >> 32)));
  return id;
}

}  // namespace

int run_job_view(const JobInputs& given, const JobCliSettings& s) {
  for (const std::string& p : given.problems) {
    std::fprintf(stderr, "gpuacct %s: %s\n", s.command.c_str(), p.c_str());
  }
  if (given.ranks.empty()) {
    std::fprintf(stderr, "gpuacct %s: no rank could be used\n", s.command.c_str());
    return 1;
  }
  JobExport exporter;
  const bool exporting = !s.export_dir.empty();
  // The job's name: --job-id, else the ranks' own, else (to export) a derived one.
  const JobInputs* in = &given;
  JobInputs named;
  if (!s.job_id.empty() || (exporting && given.job_id.empty())) {
    named = given;
    named.job_id = s.job_id.empty() ? derived_job_id(given) : s.job_id;
    if (s.job_id.empty()) {
      std::fprintf(stderr,
                   "gpuacct %s: the ranks carry no job id: the export calls the job %s "
                   "(--job-id ID names it)\n",
                   s.command.c_str(), named.job_id.c_str());
    }
    in = &named;
  }
  const JobInputs& inputs = *in;
  if (exporting) {
    if (const Status st = exporter.open(s.export_dir); !st.ok()) {
      std::fprintf(stderr, "gpuacct %s: %s\n", s.command.c_str(), st.message().c_str());
      return 1;
    }
  }
  JobOptions opts;
  opts.window_steps = s.window_steps;
  opts.link_peak_gbs = s.link_peak_gbs;
  const JobView view = build_job_view(inputs, opts, exporting ? &exporter : nullptr);
  // The merge's own problems (a file cut off, a rank that could not be reopened).
  for (size_t i = inputs.problems.size(); i < view.problems.size(); ++i) {
    std::fprintf(stderr, "gpuacct %s: %s\n", s.command.c_str(), view.problems[i].c_str());
  }
  int rc = 0;
  if (exporting) {
    if (const Status st = exporter.finish(); !st.ok()) {
      std::fprintf(stderr, "gpuacct %s: %s\n", s.command.c_str(), st.message().c_str());
      rc = 1;
    } else {
      std::fprintf(stderr, "gpuacct: wrote %s/%s (%lld rows) and %s/%s (%lld rows)\n",
                   s.export_dir.c_str(), kJobStepsCsv, static_cast<long long>(exporter.step_lines()),
                   s.export_dir.c_str(), kJobCollectivesCsv,
                   static_cast<long long>(exporter.collective_lines()));
    }
  }
  const nlohmann::json json = job_view_to_json(view);
  if (s.write_files) {
    std::error_code ec;
    std::filesystem::create_directories(s.out_dir, ec);
    const std::string path = s.out_dir + "/job.json";
    const Status st = ec ? Status::Error("cannot create output directory " + s.out_dir + ": " +
                                         ec.message())
                         : write_file_atomic(path, dump_json(json, 2) + "\n");
    if (!st.ok()) {
      std::fprintf(stderr, "gpuacct %s: %s\n", s.command.c_str(), st.message().c_str());
      rc = 1;
    } else {
      std::fprintf(stderr, "gpuacct: wrote %s\n", path.c_str());
    }
  }
  if (s.print && s.json) {
    std::cout << dump_json(json, 2) << "\n";
  } else if (s.print) {
    std::cout << render_job_view(view);
  }
  return rc;
}

int run_job(int argc, char** argv) {
  Args args({"out", "export", "window", "link-peak-gbs", "jobs", "job-id"}, {"help", "json", "no-files"},
            {{'o', "out"}, {'h', "help"}, {'j', "jobs"}});
  if (!args.parse(argc, argv)) {
    std::fprintf(stderr, "gpuacct job: %s\n(see gpuacct job --help)\n", args.error().c_str());
    return 2;
  }
  if (args.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().empty()) {
    std::fprintf(stderr, "gpuacct job: no input given\n(see gpuacct job --help)\n");
    return 2;
  }
  JobCliSettings s;
  s.command = "job";
  s.write_files = !args.has("no-files");
  s.json = args.has("json");
  s.out_dir = args.get("out", "gpuacct-out");
  s.export_dir = args.get("export", "");
  s.job_id = args.get("job-id", "");
  if (args.has("job-id") && (s.job_id.empty() || s.job_id.size() > 128 ||
                             s.job_id.find_first_of("/\\\n\r\t\"=,") != std::string::npos)) {
    std::fprintf(stderr,
                 "gpuacct job: --job-id wants 1-128 characters without / \\ = , quotes or line "
                 "breaks (it names a Parquet partition directory), not '%s'\n",
                 terminal_text(s.job_id).c_str());
    return 2;
  }
  const std::string window = args.get("window", "8");
  char* end = nullptr;
  const long long w = std::strtoll(window.c_str(), &end, 10);
  if (end == window.c_str() || *end != '\0' || w < 1 || w > 1'000'000) {
    std::fprintf(stderr, "gpuacct job: --window wants a number of steps >= 1, not '%s'\n",
                 window.c_str());
    return 2;
  }
  s.window_steps = w;
  const std::string peak = args.get("link-peak-gbs", "0");
  const double p = std::strtod(peak.c_str(), &end);
  if (end == peak.c_str() || *end != '\0' || !(p >= 0 && p <= 1e6)) {
    std::fprintf(stderr, "gpuacct job: --link-peak-gbs wants GB/s in [0, 1000000], not '%s'\n",
                 peak.c_str());
    return 2;
  }
  s.link_peak_gbs = p;
  unsigned jobs = 1;
  if (std::string error; !parse_jobs(args, &jobs, &error)) {
    std::fprintf(stderr, "gpuacct job: %s\n", error.c_str());
    return 2;
  }
  return run_job_view(load_job_inputs(args.positional(), jobs), s);
}

}  // namespace gpuacct::cli
