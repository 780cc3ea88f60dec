// Sub-commands of the `gpuacct` tool.  Each returns the process exit code:
//   0 success, 1 bad input or failed analysis (one clear message on stderr), 2 usage error.
#pragma once

namespace gpuacct::cli {

int run_analyze(int argc, char** argv);
int run_report(int argc, char** argv);
int run_synth(int argc, char** argv);
int run_timeline(int argc, char** argv);
// Handed to the Python package (python -m gpuacct run|plot).
int run_run(int argc, char** argv);
int run_plot(int argc, char** argv);

}  // namespace gpuacct::cli
