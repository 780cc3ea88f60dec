// gpuacct timeline: recording or Kineto trace -> Chrome-trace / Perfetto timeline JSON with GPU
// ops per stream, a "wall" track of the accounting category of every instant, step windows and
// host ranges.  Open the output in https://ui.perfetto.dev or chrome://tracing.
#include <cstdio>
#include <string>

#include "analysis/accounting/step_accountant.h"
#include "analysis/import/kineto_importer.h"
#include "analysis/import/recording.h"
#include "analysis/model/file_io.h"
#include "analysis/model/name_table.h"
#include "analysis/report/timeline_writer.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace gpuacct::cli {
namespace {

const char kHelp[] =
    "usage: gpuacct timeline INPUT -o OUT.json [options]\n\n"
    "INPUT is a gpuacct recording or a PyTorch-profiler (Kineto) trace (*.json / *.json.gz).\n"
    "Writes a Chrome-trace JSON timeline: GPU ops per device and stream, one track per device\n"
    "with the accounting category of every instant, the step windows, and host ranges and CUDA\n"
    "calls per thread.  Load it in https://ui.perfetto.dev or chrome://tracing.\n\n"
    "options:\n"
    "  -o, --out FILE            output file (required)\n"
    "      --warmup N            steps marked as warm-up (default 2)\n"
    "      --progress            show read progress on stderr\n"
    "  -h, --help                this text\n";

}  // namespace

int run_timeline(int argc, char** argv) {
  Args args({"out", "warmup"}, {"help", "progress"}, {{'o', "out"}, {'h', "help"}});
  if (!args.parse(argc, argv)) {
    std::fprintf(stderr, "gpuacct timeline: %s\n(see gpuacct timeline --help)\n",
                 args.error().c_str());
    return 2;
  }
  if (args.has("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (args.positional().size() != 1 || !args.has("out")) {
    std::fprintf(stderr, "gpuacct timeline: need exactly one INPUT and -o OUT.json\n%s", kHelp);
    return 2;
  }
  AccountingConfig cfg;
  auto warmup = args.get_number("warmup", cfg.warmup_steps, 0, 1e6);
  if (!warmup) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", args.error().c_str());
    return 2;
  }
  cfg.warmup_steps = static_cast<int>(*warmup);
  const std::string input = args.positional()[0];
  const std::string out = args.get("out");
  if (const Status in = check_input_file(input); !in.ok()) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", in.message().c_str());
    return 1;
  }

  NameTable names;
  StepAccountant acc(cfg);
  TimelineWriter tw(names);
  acc.set_segment_sink([&](const CategorySegment& s) { tw.on_segment(s); });
  acc.set_row_sink([&](const StepRow& r) { tw.on_step_row(r); });
  TeeSink tee({&acc, &tw});
  RunMetadata meta;
  if (looks_like_recording(input)) {
    auto contents = read_recording(input, names, tee, acc.mutable_stats());
    if (!contents.ok()) {
      std::fprintf(stderr, "gpuacct timeline: %s\n", contents.status().message().c_str());
      return 1;
    }
    meta = contents->metadata;
    if (meta.source.empty()) meta.source = "recording";
  } else {
    KinetoImportOptions opts;
    opts.progress = args.has("progress");
    auto m = import_kineto_trace(input, names, tee, acc.mutable_stats(), opts);
    if (!m.ok()) {
      std::fprintf(stderr, "gpuacct timeline: %s\n", m.status().message().c_str());
      return 1;
    }
    meta = m.value();
  }
  meta.source_path = input;
  acc.finish();
  tw.set_metadata(meta);
  Status st = tw.write(out);
  if (!st.ok()) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", st.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "gpuacct timeline: wrote %s (%zu events, %zu steps)\n", out.c_str(),
               tw.events(), acc.rows().size());
  return 0;
}

}  // namespace gpuacct::cli
