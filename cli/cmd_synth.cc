// gpuacct synth: write a recording of a synthetic training loop with designed walls.
#include <cstdio>
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
  Status flush() {
    if (!status_.ok()) return status_;
    Status st = w_.write_new_names(names_);
    if (st.ok()) st = w_.write_batch(batch_);
    batch_.clear();
    return st;
  }
  Status status() const { return status_; }

 private:
  void maybe_flush() {
    if (batch_.size() >= 65536 && status_.ok()) status_ = flush();
  }
  RecordingWriter& w_;
  NameTable& names_;
  EventBatch batch_;
  Status status_;
};

}  // namespace

int run_synth(int argc, char** argv) {
  Args args({"preset", "out", "steps", "seed", "devices", "data-wait-ms", "shift-step",
             "shift-data-ms", "spike-every", "spike-host-ms"},
            {"help", "markers", "no-steps"}, {{'o', "out"}, {'h', "help"}});
  if (!args.parse(argc, argv)) {
    std::fprintf(stderr, "gpuacct synth: %s\n", args.error().c_str());
    return 2;
  }
  if (args.has("help") || !args.has("out")) {
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
        "step the host pauses MS more.\n",
        args.has("help") ? stdout : stderr);
    return args.has("help") ? 0 : 2;
  }
  auto spec = SyntheticSpec::preset(args.get("preset", "demo"));
  if (!spec.ok()) {
    std::fprintf(stderr, "gpuacct synth: %s\n", spec.status().message().c_str());
    return 2;
  }
  const auto steps = args.get_number("steps", spec->steps, 1, 1e7);
  const auto seed = args.get_number("seed", static_cast<double>(spec->seed), 0, 1e15);
  const auto devices = args.get_number("devices", spec->devices, 1, 64);
  const auto data_wait_ms =
      args.get_number("data-wait-ms", static_cast<double>(spec->data_wait_ns) / 1e6, 0, 1e6);
  const auto shift_step = args.get_number("shift-step", -1, -1, 1e7);
  const auto shift_ms = args.get_number("shift-data-ms", 0, 0, 1e6);
  const auto spike_every = args.get_number("spike-every", 0, 0, 1e7);
  const auto spike_ms = args.get_number("spike-host-ms", 0, 0, 1e6);
  if (!steps || !seed || !devices || !data_wait_ms || !shift_step || !shift_ms || !spike_every ||
      !spike_ms) {
    std::fprintf(stderr, "gpuacct synth: %s\n", args.error().c_str());
    return 2;
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

  const std::string out = args.get("out");
  RecordingWriter writer;
  Status st = writer.open(out);
  if (!st.ok()) {
    std::fprintf(stderr, "gpuacct synth: %s\n", st.message().c_str());
    return 1;
  }
  NameTable names;
  RecordingSink sink(writer, names);
  const uint64_t events = generate_synthetic(*spec, names, sink);
  RunMetadata meta;
  meta.source = "synthetic";
  meta.hostname = "synthetic";
  meta.command = "gpuacct synth --preset " + args.get("preset", "demo");
  for (int d = 0; d < spec->devices; ++d) {
    meta.devices.push_back(DeviceInfo{d, "simulated GPU", 132, 9, 0, 0});
  }
  st = sink.flush();
  if (st.ok()) st = writer.write_metadata(meta);
  if (st.ok()) st = writer.close();
  if (!st.ok()) {
    std::fprintf(stderr, "gpuacct synth: %s\n", st.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "gpuacct synth: wrote %llu events to %s\n",
               static_cast<unsigned long long>(events), out.c_str());
  return 0;
}

}  // namespace gpuacct::cli
