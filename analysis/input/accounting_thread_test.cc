// The front door with the accounting on its own thread (InputOptions::accounting_thread,
// analysis/model/threaded_sink.h) gives what one thread gives: the same report, step rows,
// collectives and events, on every trace and recording it reads -- including the collectives,
// whose parts run on both threads (input.cc says which).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/import/recording.h"
#include "analysis/import/synthetic.h"
#include "analysis/input/input.h"
#include "analysis/model/collective_rows.h"
#include "analysis/model/json_text.h"
#include "analysis/model/threaded_sink.h"
#include "analysis/report/report.h"

namespace gpuacct {
namespace {

// What a caller can see of one read: the report, rows, collectives, and a digest of the
// events the observers got.
struct Seen {
  std::string report, rows, collectives;
  std::vector<std::string> events;
};

class EventDigest final : public EventSink {
 public:
  explicit EventDigest(std::vector<std::string>* out) : out_(out) {}
  void on_gpu_op(const GpuOp& e) override { add('g', &e, sizeof e); }
  void on_api_call(const HostApiCall& e) override { add('a', &e, sizeof e); }
  void on_range(const HostRange& e) override { add('r', &e, sizeof e); }
  void on_marker(const Marker& e) override { add('m', &e, sizeof e); }
  void on_watermark(TimeNs w) override { add('w', &w, sizeof w); }

 private:
  void add(char kind, const void* bytes, size_t size) {
    out_->emplace_back(1, kind);
    out_->back().append(static_cast<const char*>(bytes), size);
  }
  std::vector<std::string>* out_;
};

// One read of `input`; its error, if it has one, in `error` (the events seen before it stay).
Seen read_input(const Input& input, bool thread, std::string* error) {
  Seen seen;
  NameTable names;
  InputOptions opts;
  opts.accounting_thread = thread;
  EventDigest digest(&seen.events);
  AccountingObservers observers;
  observers.events = &digest;
  observers.on_collective = [&](const CollectiveRecord& r) {
    seen.collectives += collective_row_csv(r);
  };
  auto out = report_input(input, AccountingConfig{}, names, opts, observers);
  if (!out.ok()) {
    *error = out.status().message();
    return seen;
  }
  seen.report = dump_json(out->report);
  seen.rows = step_rows_csv(out->rows);
  return seen;
}

Seen read_with(const std::string& path, bool thread) {
  auto input = Input::open(path);
  EXPECT_TRUE(input.ok()) << input.status().message();
  if (!input.ok()) return Seen{};
  std::string error;
  Seen seen = read_input(*input, thread, &error);
  EXPECT_EQ(error, "") << path;
  return seen;
}

void expect_same_both_ways(const std::string& path, size_t min_events) {
  const Seen one = read_with(path, false);
  const Seen two = read_with(path, true);
  ASSERT_GE(one.events.size(), min_events) << path;
  ASSERT_FALSE(one.rows.empty()) << path;
  EXPECT_EQ(one.report, two.report) << path;
  EXPECT_EQ(one.rows, two.rows) << path;
  EXPECT_EQ(one.collectives, two.collectives) << path;
  EXPECT_TRUE(one.events == two.events) << path;
}

TEST(AccountingThread, TracesGiveWhatOneThreadGives) {
  const std::string dir = std::string(GPUACCT_TEST_DATA_DIR) + "/kineto/";
  // nccl_data: 12 k mapped events (two batches) and collective args; the sampled ranks: NCCL
  // kernels numbered by kernel order; the handmade ones: cuda_sync rows and GPU-side steps.
  expect_same_both_ways(dir + "nccl_data.json.gz", ThreadedSink::kBatchEvents + 1);
  ASSERT_FALSE(read_with(dir + "nccl_data.json.gz", true).collectives.empty());
  for (const char* name : {"sampled_rank-0.json.gz", "sampled_rank-1.json.gz",
                           "handmade_cuda_sync.json", "handmade_gpu_step_annotations.json",
                           "handmade_stream_overlap.json"}) {
    expect_same_both_ways(dir + name, 1);
  }
}

// Writes events to a recording with the watermarks where the source put them.
class RecordingSink final : public EventSink {
 public:
  RecordingSink(RecordingWriter& w, const NameTable& names) : w_(w), names_(names) {}
  void on_gpu_op(const GpuOp& e) override { batch_.gpu_ops.push_back(e); }
  void on_api_call(const HostApiCall& e) override { batch_.api_calls.push_back(e); }
  void on_range(const HostRange& e) override { batch_.ranges.push_back(e); }
  void on_marker(const Marker& e) override { batch_.markers.push_back(e); }
  void on_watermark(TimeNs w) override {
    flush();
    EXPECT_TRUE(w_.write_watermark(w).ok());
  }
  void flush() {
    EXPECT_TRUE(w_.write_new_names(names_).ok());
    EXPECT_TRUE(w_.write_batch(batch_).ok());
    batch_ = EventBatch{};
  }

 private:
  RecordingWriter& w_;
  const NameTable& names_;
  EventBatch batch_;
};

// A comm-bound run delivered as CUPTI buffers would be (shuffled, with watermarks).
void write_comm_bound_recording(const std::string& path) {
  {
    auto spec = SyntheticSpec::preset("comm_bound");
    ASSERT_TRUE(spec.ok());
    spec->steps = 400;
    spec->shuffle_batch = 500;
    NameTable names;
    RecordingWriter writer;
    ASSERT_TRUE(writer.open(path).ok());
    RecordingSink sink(writer, names);
    generate_synthetic(*spec, names, sink);
    sink.flush();
    ASSERT_TRUE(writer.write_metadata(RunMetadata{}).ok());
    ASSERT_TRUE(writer.close().ok());
  }
}

TEST(AccountingThread, RecordingGivesWhatOneThreadGives) {
  // Its NCCL kernels are numbered by kernel order as the events come, on the accounting's
  // thread.
  const std::string path =
      (std::filesystem::temp_directory_path() / "gpuacct_accounting_thread.gpuacct").string();
  write_comm_bound_recording(path);
  expect_same_both_ways(path, 3 * ThreadedSink::kBatchEvents);
  EXPECT_FALSE(read_with(path, true).collectives.empty());
  std::filesystem::remove(path);
}

// An input that ends or fails midway, batches after the reader started: the same error, the
// same events before it, the same report of what was read -- and no hang.
TEST(AccountingThread, InputFailingMidwayGivesWhatOneThreadGives) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "gpuacct_accounting_thread_cut.gpuacct").string();
  write_comm_bound_recording(path);
  std::ifstream in(path, std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  ASSERT_GT(whole.size(), 1000u);
  std::string corrupt = whole;
  for (size_t i = 0; i < 8; ++i) corrupt[whole.size() / 2 + i] ^= '\x5a';  // a chunk's checksum
  std::string cut = whole.substr(0, whole.size() * 2 / 3);  // a killed writer's file
  for (const std::string* bytes : {&corrupt, &cut}) {
    const Input input = Input::from_buffer(*bytes, "midway.gpuacct");
    std::string error_one, error_two;
    const Seen one = read_input(input, false, &error_one);
    const Seen two = read_input(input, true, &error_two);
    ASSERT_GE(one.events.size(), ThreadedSink::kBatchEvents);  // several batches before the end
    EXPECT_EQ(error_one, error_two);
    EXPECT_EQ(one.report, two.report);
    EXPECT_EQ(one.rows, two.rows);
    EXPECT_EQ(one.collectives, two.collectives);
    EXPECT_TRUE(one.events == two.events);
  }
  // The corrupt one fails (its chunk fails its checksum), the cut one is read up to the cut.
  std::string error;
  read_input(Input::from_buffer(corrupt, "midway.gpuacct"), true, &error);
  EXPECT_NE(error, "");
  error.clear();
  EXPECT_NE(read_input(Input::from_buffer(cut, "midway.gpuacct"), true, &error).report, "");
  EXPECT_EQ(error, "");
}

}  // namespace
}  // namespace gpuacct
