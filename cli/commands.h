// Sub-commands of the `gpuacct` tool.  Each returns the process exit code:
//   0 success, 1 bad input or failed analysis (one clear message on stderr), 2 usage error.
// `diff` alone differs, for CI gates: 1 means "slower than --fail-if-slower", so an input it
// cannot compare is 2, as a usage error (cli/cmd_diff.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/job/rank_inputs.h"

namespace gpuacct::cli {

int run_analyze(int argc, char** argv);
int run_report(int argc, char** argv);
int run_synth(int argc, char** argv);
int run_timeline(int argc, char** argv);
int run_diff(int argc, char** argv);
int run_job(int argc, char** argv);

// How the job view is printed and written (`gpuacct job`, and `gpuacct analyze` with several
// inputs).
struct JobCliSettings {
  std::string command = "job";  // the caller, for messages
  bool write_files = true;      // job.json into out_dir
  bool json = false;            // print job.json instead of the summary
  bool print = true;            // print at all
  std::string out_dir = "gpuacct-out";
  std::string export_dir;  // empty: no export tables
  std::string job_id;      // --job-id: the job's id (empty: the ranks' own, derived to export)
  int64_t window_steps = 8;
  double link_peak_gbs = 0;  // --link-peak-gbs: bus bandwidth shown against it; 0 = unknown
};
// The job view of loaded ranks: problems on stderr (one line each), the view printed, job.json
// and the export tables written.  1 when no rank is usable or a file could not be written.
int run_job_view(const JobInputs& inputs, const JobCliSettings& settings);
// Handed to the Python package (python -m gpuacct COMMAND ...): one name, `gpuacct`, for both
// halves of the tool (cli/cmd_python.cc).
int run_run(int argc, char** argv);
int run_plot(int argc, char** argv);
int run_job_parquet(int argc, char** argv);
int run_job_export(int argc, char** argv);
int run_job_query(int argc, char** argv);
int run_where(int argc, char** argv);
int run_python_command(const char* command, int argc, char** argv);

}  // namespace gpuacct::cli
