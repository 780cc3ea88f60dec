// gpuacct synth: write a recording of a synthetic training loop with designed walls.  Bounded
// by what it writes: a run whose recording would not fit the free disk is refused before it
// starts, and the first failed write stops the generation (nothing is left behind).
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "analysis/import/recording.h"
#include "analysis/import/synthetic.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace gpuacct::cli {
namespace {

// Writes events to a recording in batches (what the injected library does, too).
class RecordingSink final : public EventSink {
 public:
  RecordingSink(RecordingWriter& w, NameTable& names) : w_(w), names_(names) {}
  void on_gpu_op(const GpuOp& op) override { batch_.gpu_ops.push_back(op), maybe_flush(); }
  void on_api_call(const HostApiCall& c) override { batch_.api_calls.push_back(c), maybe_flush(); }
  void on_range(const HostRange& r) override { batch_.ranges.push_back(r), maybe_flush(); }
  void on_marker(const Marker& m) override { batch_.markers.push_back(m), maybe_flush(); }
  // Written after the batch it follows (a reader finalises the steps before it).
  void on_watermark(TimeNs watermark) override { watermark_ = watermark; }
  Status flush() {
    if (!status_.ok()) return status_;
    Status st = w_.write_new_names(names_);
    if (st.ok()) st = w_.write_batch(batch_);
    if (st.ok() && watermark_) st = w_.write_watermark(*watermark_);
    batch_.clear();
    watermark_.reset();
    return st;
  }
  Status status() const { return status_; }

 private:
  void maybe_flush() {
    if (batch_.size() < 65536) return;
    if (status_.ok()) {
      status_ = flush();
    } else {
      batch_.clear();  // after a failed write nothing more is kept (the run stops at its step)
    }
  }
  RecordingWriter& w_;
  NameTable& names_;
  EventBatch batch_;
  std::optional<TimeNs> watermark_;
  Status status_;
};

// Counts the bytes the events take in a recording (the writer writes each record as it is).
class ByteCounter final : public EventSink {
 public:
  void on_gpu_op(const GpuOp&) override { bytes += sizeof(GpuOp); }
  void on_api_call(const HostApiCall&) override { bytes += sizeof(HostApiCall); }
  void on_range(const HostRange&) override { bytes += sizeof(HostRange); }
  void on_marker(const Marker&) override { bytes += sizeof(Marker); }
  uint64_t bytes = 0;
};

// The recording's size: the first steps generated and counted, times the steps asked for
// (every step of a preset has the same events; planted changes move times, not counts).
double estimated_bytes(const SyntheticSpec& spec) {
  SyntheticSpec probe = spec;
  probe.steps = std::min(spec.steps, 4);
  NameTable names;
  ByteCounter counter;
  generate_synthetic(probe, names, counter);
  return static_cast<double>(counter.bytes) / probe.steps * spec.steps;
}

// Bytes free for an unprivileged writer where `out` will be written; nullopt when unknown.
std::optional<double> free_bytes_for(const std::string& out) {
  std::filesystem::path dir = std::filesystem::path(out).parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
}

std::string gigabytes(double bytes) {
  char text[32];
  if (bytes >= 1e9) {
    std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
  } else {
    std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  }
  return text;
}

// The preset named by --preset with the options' changes; the error is one line.
StatusOr<SyntheticSpec> spec_from_args(Args& args) {
  auto spec = SyntheticSpec::preset(args.get("preset"));
  if (!spec.ok()) return spec.status();
  const auto steps = args.get_integer("steps", spec->steps, 1, 10'000'000);
  const auto seed = args.get_integer("seed", static_cast<int64_t>(spec->seed), 0,
                                     1'000'000'000'000'000);
  const auto devices = args.get_integer("devices", spec->devices, 1, 64);
  const auto data_wait_ms =
      args.get_number("data-wait-ms", static_cast<double>(spec->data_wait_ns) / 1e6, 0, 1e6);
  const auto shift_step = args.get_integer("shift-step", -1, -1, 10'000'000);
  const auto shift_ms = args.get_number("shift-data-ms", 0, 0, 1e6);
  const auto spike_every = args.get_integer("spike-every", 0, 0, 10'000'000);
  const auto spike_ms = args.get_number("spike-host-ms", 0, 0, 1e6);
  if (!steps || !seed || !devices || !data_wait_ms || !shift_step || !shift_ms || !spike_every ||
      !spike_ms) {
    return Status::Error(args.error());
  }
  spec->steps = static_cast<int>(*steps);
  spec->seed = static_cast<uint64_t>(*seed);
  spec->devices = static_cast<int>(*devices);
  if (args.has("data-wait-ms")) spec->data_wait_ns = static_cast<TimeNs>(*data_wait_ms * 1e6);
  spec->shift_step = static_cast<int>(*shift_step);
  spec->shift_data_wait_ns = static_cast<TimeNs>(*shift_ms * 1e6);
  spec->spike_every = static_cast<int>(*spike_every);
  spec->spike_host_ns = static_cast<TimeNs>(*spike_ms * 1e6);
  spec->use_markers = args.has("markers");
  spec->emit_steps = !args.has("no-steps");
  // A watermark after each step, as the library's recordings carry them: readers finalise
  // steps as they go instead of holding the whole run.
  spec->step_watermarks = true;
  return spec;
}

constexpr const char* kPresets =
    "demo, data_bound, launch_bound, comm_bound, copy_bound, balanced, bench";

}  // namespace

int run_synth(int argc, char** argv) {
  Args args({"preset", "out", "steps", "seed", "devices", "data-wait-ms", "shift-step",
             "shift-data-ms", "spike-every", "spike-host-ms"},
            {"help", "markers", "no-steps"}, {{'o', "out"}, {'h', "help"}});
  if (!args.parse(argc, argv)) {
    std::fprintf(stderr, "gpuacct synth: %s\n", args.error().c_str());
    return 2;
  }
  if (args.has("help") || !args.has("out") || !args.has("preset")) {
    if (!args.has("help")) {
      // One line: what is missing (the usage is --help's).
      std::fprintf(stderr, "gpuacct synth: %s (presets: %s; see gpuacct synth --help)\n",
                   !args.has("preset") ? "which run? --preset NAME is needed"
                                       : "where to? -o FILE.gpuacct is needed",
                   kPresets);
      return 2;
    }
    std::fputs(
        "usage: gpuacct synth --preset NAME -o FILE.gpuacct [--steps N] [--seed S]\n"
        "                     [--devices N] [--data-wait-ms MS] [--markers | --no-steps]\n"
        "                     [--shift-step K --shift-data-ms MS]\n"
        "                     [--spike-every N --spike-host-ms MS]\n\n"
        "Simulates a training loop whose bottleneck is designed by the preset and writes\n"
        "it as a gpuacct recording.  Presets: demo, data_bound, launch_bound, comm_bound,\n"
        "copy_bound, balanced, bench.  --data-wait-ms sets how long each step waits for its\n"
        "input (the data wall; e.g. two runs for `gpuacct diff`).  Planted changes\n"
        "(docs/change_points.md): from step K on each step waits MS more for data; every Nth\n"
        "step the host pauses MS more.  A recording that would not fit the free disk is\n"
        "refused before it starts; a failed write stops it and leaves no file.\n",
        stdout);
    return 0;
  }
  auto spec = spec_from_args(args);
  if (!spec.ok()) {
    std::fprintf(stderr, "gpuacct synth: %s\n", spec.status().message().c_str());
    return 2;
  }

  const std::string out = args.get("out");
  const double need = estimated_bytes(*spec);
  if (const auto free = free_bytes_for(out); free && need > *free) {
    std::fprintf(stderr,
                 "gpuacct synth: %lld steps on %d device(s) make a recording of about %s; %s "
                 "are free where %s goes: fewer --steps\n",
                 static_cast<long long>(spec->steps), spec->devices, gigabytes(need).c_str(),
                 gigabytes(*free).c_str(), out.c_str());
    return 1;
  }
  RecordingWriter writer;
  Status st = writer.open(out);
  if (!st.ok()) {
    std::fprintf(stderr, "gpuacct synth: %s\n", st.message().c_str());
    return 1;
  }
  NameTable names;
  RecordingSink sink(writer, names);
  int stopped_at = -1;  // the step a failed write stopped the run at
  const uint64_t events = generate_synthetic(*spec, names, sink, [&](int step) {
    if (sink.status().ok()) return true;
    stopped_at = step;
    return false;
  });
  RunMetadata meta;
  meta.source = "synthetic";
  meta.hostname = "synthetic";
  meta.command = "gpuacct synth --preset " + args.get("preset");
  for (int d = 0; d < spec->devices; ++d) {
    meta.devices.push_back(DeviceInfo{d, "simulated GPU", 132, 9, 0, 0});
  }
  st = sink.flush();
  if (st.ok()) st = writer.write_metadata(meta);
  if (st.ok()) st = writer.close();
  if (!st.ok()) {
    writer.abandon();
    if (stopped_at >= 0) {
      std::fprintf(stderr, "gpuacct synth: %s (stopped at step %d of %d; nothing written)\n",
                   st.message().c_str(), stopped_at, spec->steps);
    } else {
      std::fprintf(stderr, "gpuacct synth: %s (nothing written)\n", st.message().c_str());
    }
    return 1;
  }
  std::fprintf(stderr, "gpuacct synth: wrote %llu events to %s\n",
               static_cast<unsigned long long>(events), out.c_str());
  return 0;
}

}  // namespace gpuacct::cli
