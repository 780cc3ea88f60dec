// The front door (analysis/input/input.h) on crafted inputs: a recording whose metadata holds
// fields of the wrong JSON type.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "analysis/import/recording.h"
#include "analysis/input/input.h"

namespace gpuacct {
namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// A whole recording (valid checksums: written by RecordingWriter) of two step ranges, one
// kernel each, with `step_detection` as the metadata's step_detection section.
std::string recording_with_detection(const std::string& step_detection) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            (std::to_string(::getpid()) + "_front_door.gpuacct"))
                               .string();
  NameTable names;
  EventBatch b;
  for (int i = 0; i < 2; ++i) {
    const TimeNs t = 1'000'000 * (i + 1);
    HostRange r;
    r.kind = RangeKind::kStep;
    r.start = t;
    r.end = t + 1'000'000;
    r.number = i;
    r.thread = 1;
    r.name = names.intern("step");
    b.ranges.push_back(r);
    HostApiCall c;
    c.kind = HostApiKind::kLaunch;
    c.thread = 1;
    c.start = t + 10'000;
    c.end = t + 15'000;
    c.correlation_id = static_cast<uint64_t>(i + 1);
    c.name = names.intern("cudaLaunchKernel");
    b.api_calls.push_back(c);
    GpuOp op;
    op.kind = GpuOpKind::kKernel;
    op.start = t + 20'000;
    op.end = t + 500'000;
    op.correlation_id = c.correlation_id;
    op.name = names.intern("gemm");
    b.gpu_ops.push_back(op);
  }
  RecordingWriter w;
  EXPECT_TRUE(w.open(path).ok());
  EXPECT_TRUE(w.write_new_names(names).ok());
  EXPECT_TRUE(w.write_batch(b).ok());
  RunMetadata meta;
  meta.source = "injected";
  meta.step_detection = step_detection;
  EXPECT_TRUE(w.write_metadata(meta).ok());
  EXPECT_TRUE(w.close().ok());
  std::string bytes = read_bytes(path);
  std::remove(path.c_str());
  return bytes;
}

// Reading finding A (issue 14): a checksummed recording whose metadata holds a field of the
// wrong JSON type ended in `.value(...)` throwing (the CLI's "internal error"); analysis/
// promises errors as Status.  Now a named error.
TEST(FrontDoor, MetadataOfTheWrongTypeIsANamedError) {
  for (const char* bad : {R"({"trailing_partial_step_dropped":"yes"})",
                          R"({"trailing_partial_step_dropped":1})",
                          R"({"trailing_partial_step_dropped":[true]})"}) {
    const std::string bytes = recording_with_detection(bad);
    ASSERT_FALSE(bytes.empty());
    NameTable names;
    auto accounted =
        account_input(Input::from_buffer(bytes, "crafted.gpuacct"), AccountingConfig{}, names);
    ASSERT_FALSE(accounted.ok()) << bad;
    EXPECT_NE(accounted.status().message().find("trailing_partial_step_dropped"),
              std::string::npos)
        << accounted.status().message();
  }
  // The same field of the right type is read as before; null is absent, as everywhere in
  // the metadata.
  const std::string good = recording_with_detection(R"({"trailing_partial_step_dropped":true})");
  NameTable names;
  auto accounted =
      account_input(Input::from_buffer(good, "good.gpuacct"), AccountingConfig{}, names);
  ASSERT_TRUE(accounted.ok()) << accounted.status().message();
  EXPECT_EQ(accounted->accountant->stats().get(Stat::incomplete_trailing_step), 1);
  const std::string null = recording_with_detection(R"({"trailing_partial_step_dropped":null})");
  auto absent =
      account_input(Input::from_buffer(null, "null.gpuacct"), AccountingConfig{}, names);
  ASSERT_TRUE(absent.ok()) << absent.status().message();
  EXPECT_EQ(absent->accountant->stats().get(Stat::incomplete_trailing_step), 0);
}

}  // namespace
}  // namespace gpuacct
