// gpuacct timeline: recording or Kineto trace -> Chrome-trace / Perfetto timeline JSON with GPU
// ops per stream, a "wall" track of the accounting category of every instant, step windows and
// host ranges.  Open the output in https://ui.perfetto.dev or chrome://tracing.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
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
         "  -o, --out FILE            output file (required)\n"
         "      --steps A:B           only steps A to B-1 (step indices, as the steps.csv's\n"
         "                            step_index; A: or :B leave one end open, A alone is one\n"
         "                            step): a long run's timeline is large (130 kB a step of\n"
         "                            `synth --preset demo`), more than a browser tab holds\n" +
         accounting_options_help() +
         "      --progress            show read progress on stderr\n"
         "  -h, --help                this text\n";
}

constexpr uintmax_t kLargeTimelineBytes = uintmax_t{500} << 20;

// "A:B", "A:", ":B" or "A" -> [first, end); nullopt when malformed.
std::optional<TimelineWriter::StepRange> parse_step_range(const std::string& text) {
  auto whole = [](std::string_view t, int64_t* v) {
    const auto r = std::from_chars(t.data(), t.data() + t.size(), *v);
    return !t.empty() && r.ec == std::errc() && r.ptr == t.data() + t.size() && *v >= 0;
  };
  TimelineWriter::StepRange range;
  const size_t colon = text.find(':');
  const std::string_view all(text);
  if (colon == std::string::npos) {
    if (!whole(all, &range.first) || range.first == std::numeric_limits<int64_t>::max()) {
      return std::nullopt;
    }
    range.end = range.first + 1;
    return range;
  }
  const std::string_view a = all.substr(0, colon), b = all.substr(colon + 1);
  if ((!a.empty() && !whole(a, &range.first)) || (!b.empty() && !whole(b, &range.end)) ||
      (a.empty() && b.empty()) || range.end <= range.first) {
    return std::nullopt;
  }
  return range;
}

}  // namespace

StatusOr<InputTimeline> timeline_of_input(const std::string& path, const AccountingConfig& cfg,
                                          bool progress, const std::set<std::string>& given,
                                          TimelineWriter::StepRange steps) {
  auto input = Input::open(path);
  if (!input.ok()) return input.status();
  InputTimeline out;
  out.names = std::make_unique<NameTable>();
  out.writer = std::make_unique<TimelineWriter>(*out.names);
  TimelineWriter& tw = *out.writer;
  tw.set_step_range(steps);
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
  valued.insert("steps");
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
  TimelineWriter::StepRange steps;
  if (args.has("steps")) {
    const auto range = parse_step_range(args.get("steps"));
    if (!range) {
      std::fprintf(stderr,
                   "gpuacct timeline: --steps wants A:B (step indices, A < B; A: or :B open), "
                   "not '%s'\n",
                   args.get("steps").c_str());
      return 2;
    }
    steps = *range;
  }
  const std::string input = args.positional()[0];
  const std::string out = args.get("out");
  auto timeline = timeline_of_input(input, cfg, args.has("progress"), given, steps);
  if (!timeline.ok()) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", timeline.status().message().c_str());
    return 1;
  }
  const TimelineWriter& tw = *timeline->writer;
  if (args.has("steps") && tw.rows().empty()) {
    std::fprintf(stderr, "gpuacct timeline: --steps %s: no such step (%s has %lld, 0 to %lld)\n",
                 args.get("steps").c_str(), input.c_str(),
                 static_cast<long long>(tw.steps_seen()),
                 static_cast<long long>(tw.steps_seen() - 1));
    return 1;
  }
  if (const Status st = tw.write(out); !st.ok()) {
    std::fprintf(stderr, "gpuacct timeline: %s\n", st.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "gpuacct timeline: wrote %s (%zu events, %zu steps)\n", out.c_str(),
               tw.events(), tw.rows().size());
  // Perfetto's UI runs in the browser's memory, about 2 GB, and holds a trace in 2-4x its size
  // (perfetto.dev/docs/visualization/large-traces).
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(out, ec);
  if (!ec && bytes > kLargeTimelineBytes) {
    std::fprintf(stderr,
                 "gpuacct timeline: %s is %.1f GB, too large for Perfetto's UI in a browser: "
                 "--steps A:B writes a part (or open it with trace_processor --httpd)\n",
                 out.c_str(), static_cast<double>(bytes) / 1e9);
  }
  return 0;
}

}  // namespace gpuacct::cli
