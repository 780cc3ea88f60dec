#include "analysis/report/timeline_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace gpuacct {
namespace {

std::string roundtrip(std::string_view text) {
  std::string s;
  append_json_string(s, text);
  return nlohmann::json::parse(s).get<std::string>();  // throws if not strict JSON
}

TEST(TimelineEscaping, LosslessForValidTextStrictJsonAlways) {
  EXPECT_EQ(roundtrip("plain"), "plain");
  EXPECT_EQ(roundtrip("a\"b\\c"), "a\"b\\c");
  EXPECT_EQ(roundtrip(std::string("ctl\x01\x1f\n\t\r\b\f\x7f", 12)),
            std::string("ctl\x01\x1f\n\t\r\b\f\x7f", 12));
  EXPECT_EQ(roundtrip(std::string("nul\0x", 5)), std::string("nul\0x", 5));
  EXPECT_EQ(roundtrip("\xc3\xa9\xf0\x9f\x98\x80"), "\xc3\xa9\xf0\x9f\x98\x80");
  // Bytes that are not UTF-8 are spelled \xHH (the original byte stays recoverable).
  EXPECT_EQ(roundtrip("bad\xff\xc3"), "bad\\xFF\\xC3");
  EXPECT_EQ(roundtrip(""), "");
}

TEST(TimelineWriter, TracksForOpsSegmentsStepsAndHost) {
  NameTable names;
  TimelineWriter tw(names);
  RunMetadata meta;
  meta.source = "kineto";
  meta.rank = 1;
  meta.pid = 4242;
  meta.devices.push_back(DeviceInfo{0, "NVIDIA H200", 132, 9, 0, 0});
  tw.set_metadata(meta);
  const TimeNs base = 1'700'000'000'000'000'000;  // a large epoch: exact ns must survive
  GpuOp k;
  k.name = names.intern("void k<\"q\">(\\)\x01\xfe");
  k.start = base + 1'001;
  k.end = base + 3'500;
  k.stream = 7;
  k.correlation_id = 9;
  tw.on_gpu_op(k);
  GpuOp c = k;
  c.kind = GpuOpKind::kMemcpy;
  c.copy_dir = CopyDir::kH2D;
  c.bytes = 4096;
  c.name = names.intern("Memcpy HtoD");
  c.stream = 9;
  c.start = base + 4'000;
  c.end = base + 5'000;
  tw.on_gpu_op(c);
  HostApiCall call;
  call.name = names.intern("cudaLaunchKernel");
  call.start = base;
  call.end = base + 900;
  call.thread = 11;
  call.correlation_id = 9;
  call.kind = HostApiKind::kLaunch;
  tw.on_api_call(call);
  HostRange r;
  r.name = names.intern("ProfilerStep#3");
  r.kind = RangeKind::kStep;
  r.number = 3;
  r.start = base;
  r.end = base + 6'000;
  r.thread = 11;
  tw.on_range(r);
  Marker m;
  m.name = names.intern("mark");
  m.ts = base + 10;
  m.thread = 11;
  tw.on_marker(m);
  tw.on_segment(CategorySegment{0, 0, base + 1'001, base + 3'500, Category::kCompute});
  tw.on_segment(CategorySegment{0, 0, base + 3'500, base + 4'000, Category::kLaunchGap});
  StepRow row;
  row.step_number = 3;
  row.window_begin = base + 1'001;
  row.window_end = base + 5'000;
  row.cat.compute = 2'499;
  row.cat.launch_gap = 1'500;
  tw.on_step_row(row);

  const auto j = nlohmann::json::parse(tw.to_json());
  EXPECT_EQ(j["otherData"]["origin_ns"].get<int64_t>(), base);
  int kernels = 0, memcpys = 0, walls = 0, steps = 0, host = 0, calls = 0, instants = 0;
  bool named_gpu = false;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "process_name" && e["pid"] == 0) {
        named_gpu = e["args"]["name"] == "GPU 0 (NVIDIA H200)";
      }
      continue;
    }
    const std::string cat = e.value("cat", "");
    if (cat == "kernel") {
      ++kernels;
      EXPECT_EQ(e["name"], "void k<\"q\">(\\)\x01\\xFE");
      EXPECT_EQ(e["pid"], 0);
      EXPECT_EQ(e["tid"], 7);
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.001);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2.499);
      EXPECT_EQ(e["args"]["correlation"], 9);
    } else if (cat == "gpu_memcpy") {
      ++memcpys;
      EXPECT_EQ(e["args"]["bytes"], 4096);
      EXPECT_EQ(e["tid"], 9);
    } else if (cat == "gpuacct_wall") {
      ++walls;
      EXPECT_EQ(e["tid"], TimelineWriter::kWallTid);
      EXPECT_TRUE(e["args"].contains("wall"));
    } else if (cat == "gpuacct_step") {
      ++steps;
      EXPECT_EQ(e["name"], "step 3");
      EXPECT_DOUBLE_EQ(e["args"]["launch_us"].get<double>(), 1.5);
    } else if (cat == "step") {
      ++host;
      EXPECT_EQ(e["pid"], TimelineWriter::kHostPid);
      EXPECT_EQ(e["tid"], 11);
    } else if (cat == "cuda_api") {
      ++calls;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.0);
    } else if (ph == "i") {
      ++instants;
    }
  }
  EXPECT_TRUE(named_gpu);
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(memcpys, 1);
  EXPECT_EQ(walls, 2);
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(host, 1);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(instants, 1);

  char tmpl[] = "/tmp/timeline_test_XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(tw.write(tmpl).ok());
  std::ifstream in(tmpl);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), tw.to_json());
  std::remove(tmpl);
}

TEST(TimelineWriter, EmptyTimelineIsValidJson) {
  NameTable names;
  TimelineWriter tw(names);
  const auto j = nlohmann::json::parse(tw.to_json());
  EXPECT_TRUE(j["traceEvents"].is_array());
  EXPECT_TRUE(j["traceEvents"].empty());
}

TEST(TimelineWriter, FromStepAccountantSegments) {
  NameTable names;
  TimelineWriter tw(names);
  StepAccountant acc;
  acc.set_segment_sink([&](const CategorySegment& s) { tw.on_segment(s); });
  acc.set_row_sink([&](const StepRow& r) { tw.on_step_row(r); });
  TeeSink sink({&tw});
  for (int s = 0; s < 4; ++s) {
    const TimeNs t0 = s * 1'000'000;
    HostRange r;
    r.kind = RangeKind::kStep;
    r.number = s;
    r.start = t0;
    r.end = t0 + 1'000'000;
    r.thread = 1;
    r.name = names.intern("ProfilerStep#" + std::to_string(s));
    tw.on_range(r);
    acc.add_range(r);
    for (int k = 0; k < 3; ++k) {
      HostApiCall c;
      c.kind = HostApiKind::kLaunch;
      c.thread = 1;
      c.correlation_id = static_cast<uint64_t>(s * 10 + k + 1);
      c.start = t0 + k * 200'000;
      c.end = c.start + 5'000;
      c.name = names.intern("cudaLaunchKernel");
      GpuOp op;
      op.correlation_id = c.correlation_id;
      op.start = c.start + 20'000;
      op.end = op.start + 100'000;
      op.stream = 7;
      op.name = names.intern("gemm");
      tw.on_api_call(c);
      tw.on_gpu_op(op);
      acc.add_api_call(c);
      acc.add_gpu_op(op);
    }
  }
  acc.finish();
  const auto j = nlohmann::json::parse(tw.to_json());
  int walls = 0, steps = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("cat", "") == "gpuacct_wall") ++walls;
    if (e.value("cat", "") == "gpuacct_step") ++steps;
  }
  EXPECT_GT(walls, 0);
  EXPECT_EQ(steps, static_cast<int>(acc.rows().size()));
  EXPECT_GT(steps, 0);
}

// Times at the ends of the int64 range: ts is taken from the earliest event (INT64_MIN here) and
// durations span the whole range.  Differences are computed without signed overflow.
TEST(TimelineWriter, ExtremeTimesDoNotOverflow) {
  NameTable names;
  TimelineWriter tw(names);
  GpuOp first;
  first.name = names.intern("first");
  first.start = INT64_MIN;
  first.end = INT64_MAX;  // a duration of 2^64 - 1 ns
  tw.on_gpu_op(first);
  GpuOp last = first;
  last.name = names.intern("last");
  last.stream = 1;
  last.start = INT64_MAX - 1000;
  last.end = INT64_MAX;
  tw.on_gpu_op(last);
  Marker m;
  m.ts = INT64_MAX;
  tw.on_marker(m);
  const std::string text = tw.to_json();
  const auto j = nlohmann::json::parse(text);
  std::map<std::string, const nlohmann::json*> by_name;
  for (const auto& e : j["traceEvents"]) by_name[e.value("name", "")] = &e;
  ASSERT_TRUE(by_name.count("first") && by_name.count("last"));
  // Exact values: the text keeps the nanoseconds, the parsed double does not.
  EXPECT_NE(text.find("\"ts\":0.000,\"dur\":18446744073709551.615"), std::string::npos) << text;
  EXPECT_NE(text.find("\"ts\":18446744073709550.615,\"dur\":1.000"), std::string::npos) << text;
  EXPECT_NE(text.find("\"ts\":18446744073709551.615}"), std::string::npos) << text;
  EXPECT_EQ(j["otherData"]["origin_ns"].get<int64_t>(), INT64_MIN);
}

}  // namespace
}  // namespace gpuacct
