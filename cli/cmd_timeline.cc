// gpuacct timeline: recording or Kineto trace -> Chrome-trace / Perfetto timeline JSON with GPU
// ops per stream, a "wall" track of the accounting category of every instant, step windows and
// host ranges.  Open the output in https://ui.perfetto.dev or chrome://tracing.
#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "analysis/input/input.h"
#include "cli/accounting_options.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/pipelines.h"

namespace gpuacct::cli {
namespace {

std::string help_text() {
  return "usage: gpuacct timeline INPUT -o OUT.json [options]\n\n"
         "INPUT is a gpuacct recording or a PyTorch-profiler (Kineto) trace (*.json / "
         "*.json.gz).\n"
         "Writes a Chrome-trace JSON timeline: GPU ops per device and stream, one track per "
         "device\n"
         "with the accounting category of every instant, the step windows, and host ranges and "
         "CUDA\n"
         "calls per thread.  Load it in https://ui.perfetto.dev or chrome://tracing.  Steps are\n"
         "detected when the input marks none, and accounted as `gpuacct analyze` does.\n\n"
         "options:\n"
         "  -o, --out FILE            output file (required)\n" +
         accounting_options_help() +
         "      --progress            show read progress on stderr\n"
         "  -h, --help                this text\n";
}

}  // namespace

StatusOr<InputTimeline> timeline_of_input(const std::string& path, const AccountingConfig& cfg,
                                          bool progress, const std::set<std::string>& given) {
  auto input = Input::open(path);
  if (!input.ok()) return input.status();
  InputTimeline out;
  out.names = std::make_unique<NameTable>();
  out.writer = std::make_unique<TimelineWriter>(*out.names);
  TimelineWriter& tw = *out.writer;
  const AccountingObservers observers = timeline_observers(tw);
  InputOptions opts;
  opts.progress = progress;
  opts.given_settings = given;
  auto accounted = account_input(input.value(), cfg, *out.names, opts, observers);
  if (!accounted.ok()) return accounted.status();
  if (!accounted->contents.cut_off.empty()) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", accounted->contents.cut_off.c_str());
  }
  if (!accounted->contents.settings_note.empty()) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", accounted->contents.settings_note.c_str());
  }
  tw.set_metadata(accounted->contents.metadata);
  return out;
}

int run_timeline(int argc, char** argv) {
  std::set<std::string> valued = accounting_option_names();
  valued.insert("out");
  Args args(valued, {"help", "progress"}, {{'o', "out"}, {'h', "help"}});
  if (!args.parse(argc, argv)) {
    std::fprintf(stderr, "gpuacct timeline: %s\n(see gpuacct timeline --help)\n",
                 args.error().c_str());
    return 2;
  }
  if (args.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 1 || !args.has("out")) {
    std::fprintf(stderr, "gpuacct timeline: need exactly one INPUT and -o OUT.json\n%s",
                 help_text().c_str());
    return 2;
  }
  AccountingConfig cfg;
  std::set<std::string> given;
  if (std::string error; !parse_accounting_options(args, &cfg, &given, &error)) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", error.c_str());
    return 2;
  }
  const std::string input = args.positional()[0];
  const std::string out = args.get("out");
  auto timeline = timeline_of_input(input, cfg, args.has("progress"), given);
  if (!timeline.ok()) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", timeline.status().message().c_str());
    return 1;
  }
  const TimelineWriter& tw = *timeline->writer;
  if (const Status st = tw.write(out); !st.ok()) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", st.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "gpuacct timeline: wrote %s (%zu events, %zu steps)\n", out.c_str(),
               tw.events(), tw.rows().size());
  return 0;
}

}  // namespace gpuacct::cli
