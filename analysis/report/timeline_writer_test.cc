#include "analysis/report/timeline_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/import/synthetic.h"

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

namespace gpuacct {
namespace {

// The events of a timeline, keyed by what they are and where they lie in absolute ns: ts is
// written as exact us with three decimals on an origin given in otherData.
std::multiset<std::string> timeline_events(const nlohmann::json& t) {
  std::multiset<std::string> out;
  const int64_t origin = t["otherData"]["origin_ns"].get<int64_t>();
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M") continue;  // track names: only the tracks shown
    nlohmann::json k = e;
    k["ts"] = origin + std::llround(e["ts"].get<double>() * 1000);
    out.insert(k.dump());
  }
  return out;
}

// --steps A:B against the whole timeline, on runs with 1-3 devices and detected or marked
// steps, ranges anywhere: exactly the rows and wall segments of those steps and every event
// overlapping their span (windows and host ranges), no other; and the writer holds a bounded
// share of the run, not all of it.
TEST(TimelineWriter, StepRangeIsTheWholeTimelineFiltered) {
  struct Case {
    int devices;
    bool markers;
    int64_t first, end;
  };
  for (const Case& c : {Case{1, false, 0, 3}, Case{2, false, 40, 43}, Case{3, true, 57, 60},
                        Case{2, false, 10, 11}, Case{1, true, 55, 100}}) {
    SCOPED_TRACE(::testing::Message() << "devices " << c.devices << " steps " << c.first << ":"
                                      << c.end);
    SyntheticSpec spec = SyntheticSpec::preset("demo").value();
    spec.steps = 60;
    spec.devices = c.devices;
    spec.use_markers = c.markers;
    spec.step_watermarks = true;
    spec.seed = static_cast<uint64_t>(c.first + 1);
    NameTable names;
    TimelineWriter full(names), part(names);
    part.set_step_range({c.first, c.end});
    StepAccountant acc;
    std::vector<StepRow> rows;
    acc.set_row_sink([&](const StepRow& r) {
      rows.push_back(r);
      full.on_step_row(r);
      part.on_step_row(r);
    });
    acc.set_segment_sink([&](const CategorySegment& g) {
      full.on_segment(g);
      part.on_segment(g);
    });
    TeeSink sink({&acc, &full, &part});
    size_t most_held = 0;
    generate_synthetic(spec, names, sink, [&](int) {
      most_held = std::max(most_held, part.held_events());
      return true;
    });
    acc.finish();
    // The span of the steps asked for.
    TimeNs lo = INT64_MAX, hi = INT64_MIN;
    for (const StepRow& r : rows) {
      if (r.step_index < c.first || r.step_index >= c.end) continue;
      lo = std::min({lo, r.window_begin, r.host_begin});
      hi = std::max({hi, r.window_end, r.host_end});
    }
    ASSERT_LT(lo, hi);
    const nlohmann::json whole = nlohmann::json::parse(full.to_json());
    const int64_t origin = whole["otherData"]["origin_ns"].get<int64_t>();
    nlohmann::json expected = whole;
    expected["traceEvents"] = nlohmann::json::array();
    for (const auto& e : whole["traceEvents"]) {
      const std::string cat = e.value("cat", "");
      if (cat == "gpuacct_step" || cat == "gpuacct_wall") {
        const int64_t i = e["args"]["step_index"].get<int64_t>();
        if (i >= c.first && i < c.end) expected["traceEvents"].push_back(e);
        continue;
      }
      if (e["ph"] == "M") continue;
      const int64_t start = origin + std::llround(e["ts"].get<double>() * 1000);
      const int64_t end = start + std::llround(e.value("dur", 0.0) * 1000);
      if (end >= lo && start <= hi) expected["traceEvents"].push_back(e);
    }
    const std::string text = part.to_json();
    const nlohmann::json got = nlohmann::json::parse(text);
    EXPECT_EQ(timeline_events(got), timeline_events(expected));
    // Written to a file, the same text.
    char tmpl[] = "/tmp/gpuacct_tl_range_XXXXXX";
    const int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    close(fd);
    ASSERT_TRUE(part.write(tmpl).ok());
    std::ifstream in(tmpl);
    std::stringstream ss;
    ss << in.rdbuf();
    std::remove(tmpl);
    EXPECT_EQ(ss.str(), text);
    // Memory: what is kept and the latest two steps, twice over (dropping is amortised: a
    // pass each time the events held doubled, 4,096 at least), never the run's.
    const size_t per_step = full.held_events() / static_cast<size_t>(spec.steps);
    EXPECT_LE(most_held, 2 * (part.held_events() + 2 * per_step) + 4096)
        << "held " << most_held << " of " << full.held_events();
  }
}

}  // namespace
}  // namespace gpuacct
