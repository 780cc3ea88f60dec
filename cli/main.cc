// gpuacct: per-step GPU wall accounting.  This binary analyses recordings and traces after
// the fact; live accounting happens inside the injected libgpuacct.so.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "analysis/import/byte_source.h"
#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"analyze", gpuacct::cli::run_analyze,
     "account every step of a recording or PyTorch-profiler trace; print and write the report"},
    {"diff", gpuacct::cli::run_diff,
     "how the step time changed between two runs, by wall, with a confidence interval"},
    {"job", gpuacct::cli::run_job,
     "every rank of a distributed job in one answer: who arrives last, why, what it costs"},
    {"report", gpuacct::cli::run_report, "print the terminal summary of a JSON report"},
    {"synth", gpuacct::cli::run_synth,
     "write a synthetic recording with designed bottlenecks (demos and tests)"},
    {"timeline", gpuacct::cli::run_timeline,
     "write a Perfetto/Chrome timeline of a recording or trace"},
    {"run", gpuacct::cli::run_run,
     "run a program with libgpuacct.so injected (-- cmd...); Python launcher"},
    {"plot", gpuacct::cli::run_plot, "draw the walls of every step of a report as a PNG (Python)"},
    {"job-parquet", gpuacct::cli::run_job_parquet,
     "`gpuacct job --export` tables -> a Parquet dataset (Python)"},
    {"job-export", gpuacct::cli::run_job_export,
     "`gpuacct job --export` of the ranks' outputs, then job-parquet (Python)"},
    {"job-query", gpuacct::cli::run_job_query,
     "a named job-view query on a dataset, DuckDB or Spark (Python)"},
    {"where", gpuacct::cli::run_where, "which libgpuacct.so and gpuacct tool would be used (Python)"},
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: gpuacct <command> [options]\n\n"
               "Splits every training step's wall time into compute, communication, data,\n"
               "launch and other, and names the wall that dominates.\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-11s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\nRun `gpuacct <command> --help` for a command's options.\n"
               "Live runs: gpuacct run -- python train.py\n"
               "      (or CUDA_INJECTION64_PATH=/path/to/libgpuacct.so python train.py)\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("gpuacct %s\ngzip traces inflate with: %s\n", GPUACCT_VERSION_STRING,
                gpuacct::gzip_decoder_description().c_str());
    return 0;
  }
  for (const Command& c : kCommands) {
    if (cmd == c.name) {
      try {
        return c.run(argc - 1, argv + 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gpuacct %s: internal error: %s\n", c.name, e.what());
        return 1;
      }
    }
  }
  std::fprintf(stderr, "gpuacct: unknown command '%s'\n\n", cmd.c_str());
  usage(stderr);
  return 2;
}
