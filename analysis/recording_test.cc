#include "analysis/recording.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "analysis/step_accountant.h"
#include "analysis/synthetic.h"

namespace gpuacct {
namespace {

class Collect final : public EventSink {
 public:
  EventBatch b;
  int watermarks = 0;
  void on_gpu_op(const GpuOp& op) override { b.gpu_ops.push_back(op); }
  void on_api_call(const HostApiCall& c) override { b.api_calls.push_back(c); }
  void on_range(const HostRange& r) override { b.ranges.push_back(r); }
  void on_marker(const Marker& m) override { b.markers.push_back(m); }
  void on_watermark(TimeNs) override { ++watermarks; }
};

std::string tmp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

TEST(Recording, RoundTripsEventsNamesMetadataAndStats) {
  const std::string path = tmp_path("gpuacct_rt.gpuacct");
  NameTable names;
  Collect original;
  auto spec = SyntheticSpec::preset("comm_bound");
  ASSERT_TRUE(spec.ok());
  spec->steps = 5;
  generate_synthetic(*spec, names, original);
  RecordingWriter w;
  ASSERT_TRUE(w.open(path).ok());
  EXPECT_FALSE(std::filesystem::exists(path)) << "final name appears only on close";
  ASSERT_TRUE(w.write_new_names(names).ok());
  ASSERT_TRUE(w.write_batch(original.b).ok());
  ASSERT_TRUE(w.write_watermark(123).ok());
  RunMetadata meta;
  meta.hostname = "h";
  meta.rank = 3;
  meta.devices.push_back(DeviceInfo{0, "GPU \"zero\"", 132, 9, 0, 1ull << 36});
  ASSERT_TRUE(w.write_metadata(meta).ok());
  Stats st;
  st.add(Stat::cupti_records_dropped, 7);
  ASSERT_TRUE(w.write_stats(st).ok());
  ASSERT_TRUE(w.close().ok());
  ASSERT_TRUE(looks_like_recording(path));

  NameTable names2;
  names2.intern("something else first");  // ids differ: the reader must remap
  Collect back;
  Stats st2;
  auto res = read_recording(path, names2, back, st2);
  ASSERT_TRUE(res.ok()) << res.status().message();
  EXPECT_TRUE(res->closed_cleanly);
  EXPECT_EQ(res->metadata.rank, 3);
  EXPECT_EQ(res->metadata.devices.at(0).name, "GPU \"zero\"");
  EXPECT_EQ(st2.get(Stat::cupti_records_dropped), 7);
  EXPECT_EQ(back.watermarks, 1);
  ASSERT_EQ(back.b.gpu_ops.size(), original.b.gpu_ops.size());
  for (size_t i = 0; i < back.b.gpu_ops.size(); ++i) {
    EXPECT_EQ(back.b.gpu_ops[i].start, original.b.gpu_ops[i].start);
    EXPECT_EQ(names2.text(back.b.gpu_ops[i].name), names.text(original.b.gpu_ops[i].name));
  }
  EXPECT_EQ(back.b.api_calls.size(), original.b.api_calls.size());
  EXPECT_EQ(back.b.ranges.size(), original.b.ranges.size());
  std::remove(path.c_str());
}

TEST(Recording, BrokenFilesGiveClearErrors) {
  const std::string good = tmp_path("gpuacct_good.gpuacct");
  {
    NameTable names;
    Collect c;
    auto spec = SyntheticSpec::preset("balanced");
    spec->steps = 2;
    generate_synthetic(*spec, names, c);
    RecordingWriter w;
    ASSERT_TRUE(w.open(good).ok());
    ASSERT_TRUE(w.write_new_names(names).ok());
    ASSERT_TRUE(w.write_batch(c.b).ok());
    ASSERT_TRUE(w.close().ok());
  }
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto try_read = [&](const std::string& content) {
    const std::string p = tmp_path("gpuacct_bad.gpuacct");
    std::ofstream(p, std::ios::binary) << content;
    NameTable names;
    Collect c;
    Stats st;
    auto r = read_recording(p, names, c, st);
    std::remove(p.c_str());
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(try_read("").find("bad magic"), std::string::npos);
  EXPECT_NE(try_read("{\"traceEvents\": []}").find("not a gpuacct recording"), std::string::npos);
  EXPECT_NE(try_read(bytes.substr(0, 12)).find("truncated header"), std::string::npos);
  EXPECT_NE(try_read(bytes.substr(0, bytes.size() - 100)).find("byte"), std::string::npos);
  EXPECT_NE(try_read(bytes.substr(0, bytes.size() - 16)).find("without its END"),
            std::string::npos);
  std::string bad_version = bytes;
  bad_version[8] = 9;
  EXPECT_NE(try_read(bad_version).find("version 9"), std::string::npos);
  std::string huge = bytes;
  // First chunk header starts at 16: set its byte count absurdly high.
  huge[16 + 8 + 7] = '\x7f';
  EXPECT_NE(try_read(huge).find("corrupt length"), std::string::npos);
  EXPECT_EQ(try_read(bytes), "");

  // A chunk header claiming almost 1 GiB in a small file: an error, not a 1 GiB allocation.
  auto chunk = [](uint32_t type, uint32_t count, uint64_t nbytes, const std::string& payload) {
    std::string c(16, '\0');
    std::memcpy(c.data(), &type, 4);
    std::memcpy(c.data() + 4, &count, 4);
    std::memcpy(c.data() + 8, &nbytes, 8);
    return c + payload;
  };
  const std::string header = bytes.substr(0, 16);
  EXPECT_NE(try_read(header + chunk(2, 1, (1u << 30) - 8, "")).find("truncated chunk"),
            std::string::npos);
  // A name id far beyond anything the file could hold is corrupt (no huge remap table).
  std::string name_rec(8, '\0');
  const uint32_t id = (1u << 28) - 1, len = 0;
  std::memcpy(name_rec.data(), &id, 4);
  std::memcpy(name_rec.data() + 4, &len, 4);
  EXPECT_NE(try_read(header + chunk(1, 1, 8, name_rec) + chunk(9, 0, 0, "")).find("name id"),
            std::string::npos);
  std::remove(good.c_str());
}

TEST(Recording, CorruptStatsValuesAreIgnored) {
  const std::string path = tmp_path("gpuacct_stats.gpuacct");
  {
    RecordingWriter w;
    ASSERT_TRUE(w.open(path).ok());
    ASSERT_TRUE(w.close().ok());
  }
  // Rewrite: header + a STATS chunk with a negative and a non-integer value + END.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const std::string text = R"({"cupti_records_dropped": -5, "unknown_names": 2.5, "steps_finalized": 3})";
  std::string c(16, '\0');
  const uint32_t type = 8, count = 1;
  const uint64_t n = text.size();
  std::memcpy(c.data(), &type, 4);
  std::memcpy(c.data() + 4, &count, 4);
  std::memcpy(c.data() + 8, &n, 8);
  std::ofstream(path, std::ios::binary) << bytes.substr(0, 16) + c + text + bytes.substr(16);
  NameTable names;
  Collect sink;
  Stats st;
  auto r = read_recording(path, names, sink, st);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(st.get(Stat::cupti_records_dropped), 0);
  EXPECT_EQ(st.get(Stat::unknown_names), 0);
  EXPECT_EQ(st.get(Stat::steps_finalized), 3);
  std::remove(path.c_str());
}

TEST(Recording, AbandonedWriterLeavesNothing) {
  const std::string path = tmp_path("gpuacct_abandon.gpuacct");
  {
    RecordingWriter w;
    ASSERT_TRUE(w.open(path).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace gpuacct
