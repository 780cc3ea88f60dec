#include "analysis/import/recording.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "analysis/accounting/step_accountant.h"
#include "analysis/import/crc32c.h"
#include "analysis/import/synthetic.h"
#include "analysis/report/report.h"

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
  void on_counter_sample(const CounterSample& c) override { b.counter_samples.push_back(c); }
};

// Per process: build trees of several checkouts may run this test at once.
std::string tmp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Hand-built files (docs/recording_format.md).
std::string file_header(uint32_t version) {
  std::string h(kRecordingMagic, sizeof kRecordingMagic);
  const uint32_t words[2] = {version, 0};
  h.append(reinterpret_cast<const char*>(words), sizeof words);
  return h;
}
std::string chunk_head(uint32_t type, uint32_t count, uint64_t nbytes) {
  std::string c(16, '\0');
  std::memcpy(c.data(), &type, 4);
  std::memcpy(c.data() + 4, &count, 4);
  std::memcpy(c.data() + 8, &nbytes, 8);
  return c;
}
// Version 1: no checksum; `nbytes` may lie about the payload.
std::string chunk_v1(uint32_t type, uint32_t count, uint64_t nbytes, const std::string& payload) {
  return chunk_head(type, count, nbytes) + payload;
}
// Version 2: the header, its CRC-32C over header and payload, a zero word, the payload.
std::string chunk_v2(uint32_t type, uint32_t count, const std::string& payload) {
  const std::string head = chunk_head(type, count, payload.size());
  const uint32_t check[2] = {crc32c(payload.data(), payload.size(), crc32c(head.data(), 16)), 0};
  return head + std::string(reinterpret_cast<const char*>(check), sizeof check) + payload;
}

// Reads `content` (as a buffer); "" when it is accepted, else the error.
std::string read_error(const std::string& content, Collect* into = nullptr,
                       Stats* stats = nullptr) {
  NameTable names;
  Collect c;
  Stats st;
  auto r = read_recording_buffer(content, "f", names, into ? *into : c, stats ? *stats : st);
  return r.ok() ? std::string() : r.status().message();
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

// Counter samples (chunk 10, docs/counters.md) come back bit for bit, NaN included, and a
// re-analysis of the file gives the live run's counter columns.
TEST(Recording, CounterSamplesRoundTripAndAccountAsLive) {
  const std::string path = tmp_path("gpuacct_counters.gpuacct");
  NameTable names;
  Collect original;
  auto spec = SyntheticSpec::preset("comm_bound");
  ASSERT_TRUE(spec.ok());
  spec->steps = 4;
  generate_synthetic(*spec, names, original);
  TimeNs first = INT64_MAX, last = INT64_MIN;
  for (const GpuOp& op : original.b.gpu_ops) {
    first = std::min(first, op.start);
    last = std::max(last, op.end);
  }
  std::mt19937_64 rng(18);
  for (TimeNs a = first; a < last; a += 1'000'000) {
    CounterSample c;
    c.start = a;
    c.end = a + 1'000'000;
    for (double& v : c.pct) v = static_cast<double>(rng() % 10001) / 100.0;
    c.pct[static_cast<size_t>(CounterMetric::kDram)] = std::numeric_limits<double>::quiet_NaN();
    original.b.counter_samples.push_back(c);
  }
  ASSERT_FALSE(original.b.counter_samples.empty());
  RecordingWriter w;
  ASSERT_TRUE(w.open(path).ok());
  ASSERT_TRUE(w.write_new_names(names).ok());
  ASSERT_TRUE(w.write_batch(original.b).ok());
  ASSERT_TRUE(w.close().ok());

  NameTable names2;
  Collect back;
  Stats st;
  auto res = read_recording(path, names2, back, st);
  ASSERT_TRUE(res.ok()) << res.status().message();
  ASSERT_EQ(back.b.counter_samples.size(), original.b.counter_samples.size());
  EXPECT_EQ(std::memcmp(back.b.counter_samples.data(), original.b.counter_samples.data(),
                        original.b.counter_samples.size() * sizeof(CounterSample)),
            0);

  StepAccountant live, again;
  live.add(original.b);
  live.finish();
  NameTable names3;
  Stats st3;
  ASSERT_TRUE(read_recording(path, names3, again, st3).ok());
  again.finish();
  ASSERT_EQ(live.rows().size(), again.rows().size());
  int with_counters = 0;
  for (size_t i = 0; i < live.rows().size(); ++i) {
    const CounterTotals& a = live.rows()[i].counters;
    const CounterTotals& b = again.rows()[i].counters;
    EXPECT_EQ(a.covered_ns, b.covered_ns);
    EXPECT_EQ(a.weighted, b.weighted);
    with_counters += a.any() ? 1 : 0;
  }
  EXPECT_GT(with_counters, 0);
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
  const std::string bytes = read_bytes(good);
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
  // (A file cut after its header is what a killed writer leaves:
  // ACutFileIsReadToItsLastWholeChunk.)
  std::string bad_version = bytes;
  bad_version[8] = 9;
  EXPECT_NE(try_read(bad_version).find("version 9"), std::string::npos);
  bad_version[8] = 0;
  EXPECT_NE(try_read(bad_version).find("version 0"), std::string::npos);
  std::string huge = bytes;
  // First chunk header starts at 16: set its byte count absurdly high.
  huge[16 + 8 + 7] = '\x7f';
  EXPECT_NE(try_read(huge).find("corrupt length"), std::string::npos);
  EXPECT_EQ(try_read(bytes), "");

  // A chunk header claiming almost 1 GiB in a small file: never a 1 GiB allocation.  Ending
  // with its END chunk (version 2: so it was finished, the claim is corrupt) it is an error;
  // version 1 cannot tell a corrupt length from a cut (no checksums): read as cut, counted.
  const std::string claim = chunk_head(2, 1, (1u << 30) - 8) + std::string(8, '\0');
  EXPECT_NE(try_read(file_header(2) + claim + chunk_v2(9, 0, "")).find("truncated chunk"),
            std::string::npos);
  Stats v1_stats;
  EXPECT_EQ(read_error(file_header(1) + claim + chunk_v1(9, 0, 0, ""), nullptr, &v1_stats), "");
  EXPECT_EQ(v1_stats.get(Stat::inputs_cut_off), 1);
  // A name id far beyond anything the file could hold is corrupt (no huge remap table).
  std::string name_rec(8, '\0');
  const uint32_t id = (1u << 28) - 1, len = 0;
  std::memcpy(name_rec.data(), &id, 4);
  std::memcpy(name_rec.data() + 4, &len, 4);
  EXPECT_NE(try_read(file_header(1) + chunk_v1(1, 1, 8, name_rec) + chunk_v1(9, 0, 0, ""))
                .find("name id"),
            std::string::npos);
  EXPECT_NE(
      try_read(file_header(2) + chunk_v2(1, 1, name_rec) + chunk_v2(9, 0, "")).find("name id"),
      std::string::npos);
  std::remove(good.c_str());
}

TEST(Recording, CorruptStatsValuesAreIgnored) {
  // A STATS chunk with a negative and a non-integer value, in both versions.
  const std::string text =
      R"({"cupti_records_dropped": -5, "host_records_dropped": 2.5, "cupti_buffers_refused": 3})";
  for (const std::string& file :
       {file_header(1) + chunk_v1(8, 1, text.size(), text) + chunk_v1(9, 0, 0, ""),
        file_header(2) + chunk_v2(8, 1, text) + chunk_v2(9, 0, "")}) {
    Stats st;
    ASSERT_EQ(read_error(file, nullptr, &st), "");
    EXPECT_EQ(st.get(Stat::cupti_records_dropped), 0);
    EXPECT_EQ(st.get(Stat::host_records_dropped), 0);
    EXPECT_EQ(st.get(Stat::cupti_buffers_refused), 3);
  }
}

// A recording carries only what the collector alone knew (StatOrigin::kCollection).  The
// accountant's counters (events received, steps finalised, late drops, ...) are counted again by
// whoever analyses the recording: carried, they were counted twice (gpu_ops_received 200 live,
// 400 in `gpuacct analyze` of the run's recording).
TEST(Recording, CarriesOnlyTheCollectorsCounters) {
  Stats live;
  live.add(Stat::cupti_records_dropped, 7);
  live.add(Stat::host_ranges_dropped, 2);
  live.add(Stat::gpu_ops_received, 200);
  live.add(Stat::steps_finalized, 20);
  live.add(Stat::late_gpu_ops_dropped, 1);
  live.add(Stat::stream_rows_lost, 4);
  const std::string path = tmp_path("gpuacct_stats_origin.gpuacct");
  {
    RecordingWriter w;
    ASSERT_TRUE(w.open(path).ok());
    ASSERT_TRUE(w.write_stats(live).ok());
    ASSERT_TRUE(w.close().ok());
  }
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Stats read;
  ASSERT_EQ(read_error(file, nullptr, &read), "");
  for (size_t i = 0; i < kStatCount; ++i) {
    const auto s = static_cast<Stat>(i);
    const bool carried = stat_info(s).origin == StatOrigin::kCollection;
    EXPECT_EQ(read.get(s), carried ? live.get(s) : 0) << stat_info(s).name;
  }
  EXPECT_EQ(file.find("gpu_ops_received"), std::string::npos) << "not even written";
  // An older recording that holds the accountant's counters: they are ignored on reading.
  const std::string old_text = R"({"gpu_ops_received": 200, "cupti_records_dropped": 7})";
  Stats from_old;
  ASSERT_EQ(read_error(file_header(2) + chunk_v2(8, 1, old_text) + chunk_v2(9, 0, ""), nullptr,
                       &from_old),
            "");
  EXPECT_EQ(from_old.get(Stat::gpu_ops_received), 0);
  EXPECT_EQ(from_old.get(Stat::cupti_records_dropped), 7);
  std::remove(path.c_str());
}

TEST(Recording, AbandonedWriterLeavesNothing) {
  const std::string path = tmp_path("gpuacct_abandon.gpuacct");
  {
    RecordingWriter w;
    ASSERT_TRUE(w.open(path).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    EXPECT_EQ(e.path().string().rfind(path, 0), std::string::npos) << "left behind: " << e.path();
  }
}

// A 48-byte file whose WATERMARK chunk holds no value (count 0) was read through a null
// pointer (SIGSEGV in analyze and timeline).  A watermark is exactly one i64.
TEST(Recording, AWatermarkWithoutItsValueIsAnError) {
  const std::string v1 = file_header(1) + chunk_v1(6, 0, 0, "") + chunk_v1(9, 0, 0, "");
  ASSERT_EQ(v1.size(), 48u);
  EXPECT_EQ(read_error(v1), "f: malformed watermark chunk at byte 16");
  EXPECT_EQ(read_error(file_header(2) + chunk_v2(6, 0, "") + chunk_v2(9, 0, "")),
            "f: malformed watermark chunk at byte 16");
  EXPECT_EQ(read_error(file_header(2) + chunk_v2(6, 2, std::string(16, '\0')) + chunk_v2(9, 0, "")),
            "f: malformed watermark chunk at byte 16");
  const std::string path = tmp_path("gpuacct_wm0.gpuacct");
  std::ofstream(path, std::ios::binary) << v1;
  NameTable names;
  Collect c;
  Stats st;
  auto r = read_recording(path, names, c, st);
  std::remove(path.c_str());
  EXPECT_FALSE(r.ok());
}

// Metadata numbers that do not fit their field are an error, never a cast (1e300 became a pid
// of -2^63).
TEST(Recording, MetadataValuesOutOfRangeAreErrorsNotCasts) {
  auto with_meta = [](const std::string& json) {
    return file_header(2) + chunk_v2(7, 1, json) + chunk_v2(9, 0, "");
  };
  for (const char* bad :
       {R"({"rank":1e300,"pid":1e300})", R"({"pid":9223372036854775808})", R"({"rank":4294967296})",
        R"({"world_size":-2147483649})", R"({"rank":2.5})", R"({"devices":[{"id":1.5}]})",
        R"({"devices":[{"total_memory":-1}]})", R"({"devices":{"id":1}})", R"({"devices":[3]})",
        R"({"hostname":7})"}) {
    EXPECT_NE(read_error(with_meta(bad)).find("metadata"), std::string::npos) << bad;
  }
  // A field of the wrong JSON type is named (issue 14).
  EXPECT_NE(read_error(with_meta(R"({"hostname":7})")).find("'hostname' is not a string"),
            std::string::npos);
  EXPECT_NE(read_error(with_meta(R"({"devices":[{"name":[]}]})")).find("'name'"),
            std::string::npos);
  NameTable names;
  Collect c;
  Stats st;
  auto r = read_recording_buffer(
      with_meta(R"({"rank":-1,"pid":9223372036854775807,"world_size":8,)"
                R"("devices":[{"id":3,"total_memory":18446744073709551615}]})"),
      "f", names, c, st);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->metadata.pid, INT64_MAX);
  EXPECT_EQ(r->metadata.rank, -1);
  EXPECT_EQ(r->metadata.world_size, 8);
  ASSERT_EQ(r->metadata.devices.size(), 1u);
  EXPECT_EQ(r->metadata.devices[0].id, 3);
  EXPECT_EQ(r->metadata.devices[0].total_memory, UINT64_MAX);
}

// The counters' part of a fingerprint (last in it).
std::string stats_text(const Stats& st) {
  std::string out;
  for (size_t i = 0; i < kStatCount; ++i) out += std::to_string(st.get(static_cast<Stat>(i))) + ",";
  return out;
}
size_t stats_text_size() {
  return stats_text(Stats{}).size();
}

// Everything a reader hands on, names by text, in one string: equal strings, equal input.
std::string fingerprint(const std::string& bytes, std::string* error) {
  NameTable names;
  Collect c;
  Stats st;
  auto r = read_recording_buffer(bytes, "f", names, c, st);
  if (!r.ok()) {
    *error = r.status().message();
    return "";
  }
  std::string out;
  auto add = [&](auto e) {
    const NameId name = e.name;
    e.name = kNoName;
    out.append(reinterpret_cast<const char*>(&e), sizeof e);
    out.append(names.text(name));
    out.push_back('\n');
  };
  for (const auto& e : c.b.gpu_ops) add(e);
  for (const auto& e : c.b.api_calls) add(e);
  for (const auto& e : c.b.ranges) add(e);
  for (const auto& e : c.b.markers) add(e);
  const RunMetadata& m = r->metadata;
  out += m.source + m.hostname + m.command + std::to_string(m.pid) + std::to_string(m.rank) +
         std::to_string(m.devices.size()) + std::to_string(c.watermarks);
  return out + stats_text(st);
}

std::string small_recording(const std::string& path) {
  NameTable names;
  Collect c;
  auto spec = SyntheticSpec::preset("comm_bound");
  spec->steps = 2;
  generate_synthetic(*spec, names, c);
  RecordingWriter w;
  EXPECT_TRUE(w.open(path).ok());
  EXPECT_TRUE(w.write_new_names(names).ok());
  EXPECT_TRUE(w.write_batch(c.b).ok());
  EXPECT_TRUE(w.write_watermark(12345).ok());
  RunMetadata meta;
  meta.hostname = "host";
  meta.rank = 1;
  meta.devices.push_back(DeviceInfo{0, "GPU", 132, 9, 0, 1});
  EXPECT_TRUE(w.write_metadata(meta).ok());
  Stats st;
  st.add(Stat::cupti_records_dropped, 3);
  EXPECT_TRUE(w.write_stats(st).ok());
  EXPECT_TRUE(w.close().ok());
  const std::string bytes = read_bytes(path);
  std::remove(path.c_str());
  return bytes;
}

// Each chunk carries a CRC-32C: a flipped bit anywhere in a chunk is rejected.  In the file
// header a flip is rejected (magic, version) or changes nothing (the reserved word).  Before
// version 2 most flips were accepted and changed the result (30 steps became 6 to 87).  One
// kind of flip cannot be told from a killed writer: one in the END chunk's own length (it then
// claims bytes the file does not have, and the file no longer ends with END): the file is read
// as cut -- every chunk before END, whole and checksummed, the same events -- and counted
// (inputs_cut_off), never silently.
TEST(Recording, EveryFlippedBitIsRejectedOrHarmless) {
  const std::string bytes = small_recording(tmp_path("gpuacct_flip.gpuacct"));
  std::string err;
  const std::string original = fingerprint(bytes, &err);
  ASSERT_EQ(err, "");
  std::vector<size_t> bits;
  for (size_t b = 0; b < 8 * 64; ++b) bits.push_back(b);  // file header and first chunk headers
  std::mt19937_64 rng(9);
  for (int i = 0; i < 3000; ++i) bits.push_back(rng() % (8 * bytes.size()));
  size_t accepted = 0, rejected = 0, read_as_cut = 0;
  for (size_t bit : bits) {
    std::string flipped = bytes;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    err.clear();
    const std::string got = fingerprint(flipped, &err);
    if (!err.empty()) {
      ++rejected;
      continue;
    }
    ++accepted;
    const bool in_end_length = bit / 8 >= bytes.size() - 16 && bit / 8 < bytes.size() - 8;
    if (in_end_length && got != original) {
      const size_t events = original.size() - stats_text_size();
      EXPECT_EQ(got.substr(0, events), original.substr(0, events))
          << "bit " << bit << ": read as cut, the events must be the same";
      NameTable names;
      Collect c;
      Stats st;
      auto r = read_recording_buffer(flipped, "f", names, c, st);
      EXPECT_TRUE(r.ok() && r->cut && st.get(Stat::inputs_cut_off) == 1) << "bit " << bit;
      ++read_as_cut;
      continue;
    }
    EXPECT_EQ(got, original) << "bit " << bit << " (byte " << bit / 8 << ") changed the result";
    EXPECT_TRUE(bit / 8 >= 12 && bit / 8 < 16)
        << "bit " << bit << " accepted outside the reserved word";
  }
  EXPECT_GT(rejected, bits.size() * 9 / 10) << accepted << " accepted";
  EXPECT_LT(read_as_cut, 10u);
}

// The chunks of a well-formed file: where each ends, and its type.
struct ChunkEnd {
  size_t end;
  uint32_t type;
};
std::vector<ChunkEnd> chunk_ends(const std::string& bytes) {
  const size_t header = bytes.substr(8, 1) == std::string(1, '\x01') ? 16 : 24;
  std::vector<ChunkEnd> out;
  for (size_t at = 16; at + header <= bytes.size();) {
    uint32_t type = 0;
    uint64_t n = 0;
    std::memcpy(&type, bytes.data() + at, 4);
    std::memcpy(&n, bytes.data() + at + 8, 8);
    at += header + n;
    out.push_back({at, type});
  }
  return out;
}

// A killed writer leaves its file cut anywhere (docs/recording_format.md): at every cut position
// the reader takes every whole chunk before the cut -- the same events, watermarks and names as
// the whole file has there -- and counts the cut (inputs_cut_off) with where it is.  Before,
// every one of these files was refused ("truncated chunk", "without its END chunk").
TEST(Recording, ACutFileIsReadToItsLastWholeChunk) {
  const std::string v1_path =
      std::string(GPUACCT_TEST_DATA_DIR) + "/recordings/comm_bound4_v1.gpuacct";
  for (const std::string& bytes :
       {small_recording(tmp_path("gpuacct_cut.gpuacct")), read_bytes(v1_path)}) {
    const std::vector<ChunkEnd> ends = chunk_ends(bytes);
    ASSERT_EQ(ends.back().end, bytes.size());
    ASSERT_EQ(ends.back().type, 9u);
    size_t read = 0;
    for (size_t cut = 16; cut < bytes.size(); ++cut) {
      NameTable names;
      Collect c;
      Stats st;
      auto r = read_recording_buffer(bytes.substr(0, cut), "f", names, c, st);
      ASSERT_TRUE(r.ok()) << "cut at " << cut << ": " << r.status().message();
      size_t whole = 0, at = 16;
      int watermarks = 0;
      for (const ChunkEnd& e : ends) {
        if (e.end > cut) break;
        ++whole;
        at = e.end;
        watermarks += e.type == 6 ? 1 : 0;
      }
      EXPECT_TRUE(r->cut && !r->closed_cleanly);
      EXPECT_EQ(r->chunks, whole) << "cut at " << cut;
      EXPECT_EQ(r->cut_at_byte, at) << "cut at " << cut;
      EXPECT_EQ(r->bytes_cut, cut - at) << "cut at " << cut;
      EXPECT_EQ(c.watermarks, watermarks) << "cut at " << cut;
      EXPECT_EQ(r->last_watermark.has_value(), watermarks > 0);
      EXPECT_EQ(st.get(Stat::inputs_cut_off), 1);
      EXPECT_EQ(r->events, c.b.size());
      // The same events as the whole file's first `whole` chunks: a cut at a chunk's end
      // reads what a cut anywhere inside the next one reads.
      std::string err;
      const std::string mine = fingerprint(bytes.substr(0, cut), &err);
      const std::string at_boundary = fingerprint(bytes.substr(0, at), &err);
      EXPECT_EQ(mine, at_boundary) << "cut at " << cut;
      ++read;
    }
    EXPECT_EQ(read, bytes.size() - 16);
    // Whole, it is not cut.
    NameTable names;
    Collect c;
    Stats st;
    auto r = read_recording_buffer(bytes, "f", names, c, st);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->closed_cleanly && !r->cut);
    EXPECT_EQ(st.get(Stat::inputs_cut_off), 0);
  }
}

// Only a file that does not end with END is taken for a killed writer's: one that does was
// finished, and a chunk cut inside it is corruption, rejected as before.
TEST(Recording, AFinishedFileWithACutChunkInsideIsRejected) {
  const std::string bytes = small_recording(tmp_path("gpuacct_cut_inside.gpuacct"));
  const std::vector<ChunkEnd> ends = chunk_ends(bytes);
  const std::string end = bytes.substr(bytes.size() - 24);
  for (size_t k = 0; k + 2 < ends.size(); ++k) {
    const size_t cut = ends[k].end + 30;  // inside chunk k + 1
    ASSERT_LT(cut, ends[k + 1].end);
    EXPECT_NE(read_error(bytes.substr(0, cut) + end), "") << "chunk " << k + 1;
  }
}

// Version 1 files (no checksums) are still read; their events survive a rewrite as version 2.
TEST(Recording, ReadsVersion1Files) {
  const std::string path =
      std::string(GPUACCT_TEST_DATA_DIR) + "/recordings/comm_bound4_v1.gpuacct";
  const std::string v1 = read_bytes(path);
  ASSERT_EQ(v1.substr(8, 4), std::string("\x01\0\0\0", 4)) << "not a version-1 file";
  NameTable names;
  Collect c;
  Stats st;
  auto r = read_recording(path, names, c, st);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->closed_cleanly);
  EXPECT_EQ(r->metadata.source, "synthetic");
  EXPECT_EQ(r->metadata.command, "gpuacct synth --preset comm_bound");
  EXPECT_GT(c.b.gpu_ops.size(), 0u);
  EXPECT_GT(c.b.api_calls.size(), 0u);
  EXPECT_EQ(r->events, c.b.size());
  StepAccountant acc;
  acc.add(c.b);
  acc.finish();
  EXPECT_EQ(acc.rows().size(), 4u);

  const std::string again = tmp_path("gpuacct_v1_again.gpuacct");
  RecordingWriter w;
  ASSERT_TRUE(w.open(again).ok());
  ASSERT_TRUE(w.write_new_names(names).ok());
  ASSERT_TRUE(w.write_batch(c.b).ok());
  ASSERT_TRUE(w.write_metadata(r->metadata).ok());
  ASSERT_TRUE(w.write_stats(st).ok());
  ASSERT_TRUE(w.close().ok());
  const std::string v2 = read_bytes(again);
  std::remove(again.c_str());
  EXPECT_EQ(v2.substr(8, 4), std::string("\x02\0\0\0", 4));
  std::string e1, e2;
  EXPECT_EQ(fingerprint(v1, &e1), fingerprint(v2, &e2));
  EXPECT_EQ(e1 + e2, "");
}

// RFC 3720 B.4 check values, the classic "123456789", and streaming in pieces of every size
// against a bit-at-a-time reference.
TEST(Crc32c, KnownValuesAndStreaming) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0').data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff').data(), 32), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (size_t i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);

  auto reference = [](const std::string& s) {
    uint32_t c = 0xFFFFFFFFu;
    for (const char ch : s) {
      const auto b = static_cast<unsigned char>(ch);
      c ^= b;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
  };
  std::mt19937 rng(5);
  std::string data(1000, '\0');
  for (char& ch : data) ch = static_cast<char>(rng());
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 63u, 1000u}) {
    const std::string part = data.substr(0, n);
    const uint32_t want = reference(part);
    EXPECT_EQ(crc32c(part.data(), n), want) << n;
    for (size_t cut = 0; cut <= n; cut += 3) {  // also from unaligned addresses
      EXPECT_EQ(crc32c(part.data() + cut, n - cut, crc32c(part.data(), cut)), want)
          << n << "/" << cut;
    }
  }
}

// The run's accounting settings (RunMetadata::accounting) are type-checked like every metadata
// field: a wrong type is an error that names it; read_recording_metadata finds them without
// decoding the events (the front door reads them before it accounts, input.h resolve).
TEST(Recording, AccountingSettingsAreTypeChecked) {
  for (const std::string bad :
       {R"({"accounting":{"warmup_steps":"0"}})", R"({"accounting":{"warmup_steps":1.5}})",
        R"({"accounting":{"warmup_steps":null}})", R"({"accounting":{"warmup_steps":1e300}})",
        R"({"accounting":[1]})"}) {
    const std::string err = read_error(file_header(2) + chunk_v2(7, 1, bad) + chunk_v2(9, 0, ""));
    EXPECT_NE(err.find("metadata field 'accounting"), std::string::npos) << bad << ": " << err;
  }
  const std::string path = tmp_path("gpuacct_settings.gpuacct");
  NameTable names;
  Collect events;
  auto spec = SyntheticSpec::preset("data_bound");
  ASSERT_TRUE(spec.ok());
  generate_synthetic(*spec, names, events);
  RunMetadata meta;
  // In name order: a JSON object is read back sorted.
  meta.accounting = {{"launch_latency_threshold_ns", 12'000}, {"warmup_steps", 0}};
  {
    RecordingWriter w;
    ASSERT_TRUE(w.open(path).ok());
    ASSERT_TRUE(w.write_new_names(names).ok());
    ASSERT_TRUE(w.write_batch(events.b).ok());
    ASSERT_TRUE(w.write_metadata(meta).ok());
    ASSERT_TRUE(w.close().ok());
  }
  auto read = read_recording_metadata(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->accounting, meta.accounting);
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto from_bytes = read_recording_metadata("b", file);
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status().message();
  EXPECT_EQ(from_bytes->accounting, meta.accounting);
  // An older recording (no field): none, the reader's defaults apply.
  auto old = read_recording_metadata(
      "old", file_header(2) + chunk_v2(7, 1, R"({"source":"injected"})") + chunk_v2(9, 0, ""));
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_TRUE(old->accounting.empty());
  std::remove(path.c_str());
}

// `gpuacct synth` writes a watermark after each step (SyntheticSpec::step_watermarks), as live
// recordings carry them: a reader then finalises steps as it goes.  The rows are the same as
// without them, for every preset; and the generation stops where keep_going says.
TEST(Synthetic, StepWatermarksFinaliseEarlyAndChangeNoRow) {
  for (const char* preset : {"demo", "data_bound", "launch_bound", "comm_bound", "copy_bound",
                             "balanced"}) {
    SCOPED_TRACE(preset);
    SyntheticSpec spec = SyntheticSpec::preset(preset).value();
    spec.steps = 30;
    spec.devices = 2;
    std::vector<std::string> rows[2];
    size_t rows_before_finish = 0;
    for (const bool marks : {false, true}) {
      spec.step_watermarks = marks;
      NameTable names;
      StepAccountant acc;
      generate_synthetic(spec, names, acc);
      if (marks) rows_before_finish = acc.rows().size();
      acc.finish();
      for (const StepRow& r : acc.rows()) rows[marks].push_back(step_row_csv(r));
    }
    EXPECT_EQ(rows[0], rows[1]);
    EXPECT_EQ(rows[1].size(), 60U);
    EXPECT_GE(rows_before_finish, 56U);  // all but the last step or two, before finish()
  }
  SyntheticSpec spec = SyntheticSpec::preset("demo").value();
  NameTable names;
  StepAccountant acc;
  int asked = 0;
  generate_synthetic(spec, names, acc, [&](int step) {
    ++asked;
    return step < 5;
  });
  acc.finish();
  EXPECT_EQ(asked, 6);
  EXPECT_EQ(acc.rows().size(), 5U);
}

}  // namespace
}  // namespace gpuacct
