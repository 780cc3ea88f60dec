#include "analysis/import/kineto_importer.h"
#include "analysis/import/gzip_for_tests.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace gpuacct {
namespace {

struct Capture : EventSink {
  std::vector<GpuOp> ops;
  std::vector<HostApiCall> calls;
  std::vector<HostRange> ranges;
  std::vector<Marker> markers;
  void on_gpu_op(const GpuOp& o) override { ops.push_back(o); }
  void on_api_call(const HostApiCall& c) override { calls.push_back(c); }
  void on_range(const HostRange& r) override { ranges.push_back(r); }
  void on_marker(const Marker& m) override { markers.push_back(m); }
};

std::string gzip(const std::string& in, int level = 6) {
  std::string z = testing_support::gzip(in, level);
  EXPECT_FALSE(z.empty()) << "zlib could not compress the test input";
  return z;
}

struct Result {
  bool ok = false;
  std::string error;
  RunMetadata meta;
  Capture cap;
  Stats stats;
  NameTable names;
};

void run(const std::string& data, Result& r) {
  auto m = import_kineto_buffer(data, r.names, r.cap, r.stats);
  r.ok = m.ok();
  if (m.ok())
    r.meta = m.value();
  else
    r.error = m.status().message();
}

std::string trace(const std::string& events, const std::string& extra = "") {
  return "{\"schemaVersion\": 1," + extra + " \"traceEvents\": [" + events + "]}";
}

const char* kKernel =
    R"J({"ph": "X", "cat": "kernel", "name": "void gemm_kernel<float>(int) [clone]", "pid": 0, "tid": 7,
        "ts": 1000.5, "dur": 20.25, "args": {"device": 0, "stream": 7, "correlation": 42,
        "grid": [1, 2, 3], "est. achieved occupancy %": 50}})J";
const char* kLaunch =
    R"J({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 101,
        "ts": 990, "dur": 5, "args": {"cbid": 211, "correlation": 42}})J";

TEST(ParseUsToNs, ExactDecimal) {
  int64_t v = 0;
  ASSERT_TRUE(parse_us_to_ns("1234567.891", &v));
  EXPECT_EQ(v, 1234567891);
  ASSERT_TRUE(parse_us_to_ns("4458676522690.655", &v));
  EXPECT_EQ(v, 4458676522690655);  // exact: no binary rounding
  ASSERT_TRUE(parse_us_to_ns("1682725898236567", &v));
  EXPECT_EQ(v, 1682725898236567000);
  ASSERT_TRUE(parse_us_to_ns("0.0005", &v));
  EXPECT_EQ(v, 1);  // half rounds away from zero
  ASSERT_TRUE(parse_us_to_ns("0.0004999", &v));
  EXPECT_EQ(v, 0);
  ASSERT_TRUE(parse_us_to_ns("2.9999", &v));
  EXPECT_EQ(v, 3000);
  ASSERT_TRUE(parse_us_to_ns("1.5e3", &v));
  EXPECT_EQ(v, 1500000);
  ASSERT_TRUE(parse_us_to_ns("15E-1", &v));
  EXPECT_EQ(v, 1500);
  ASSERT_TRUE(parse_us_to_ns("-2.5", &v));
  EXPECT_EQ(v, -2500);
  ASSERT_TRUE(parse_us_to_ns("0", &v));
  EXPECT_EQ(v, 0);
  ASSERT_TRUE(parse_us_to_ns("0.000", &v));
  EXPECT_EQ(v, 0);
  ASSERT_TRUE(parse_us_to_ns("000123.4560", &v));
  EXPECT_EQ(v, 123456);
  EXPECT_FALSE(parse_us_to_ns("", &v));
  EXPECT_FALSE(parse_us_to_ns("abc", &v));
  EXPECT_FALSE(parse_us_to_ns("1.2.3", &v));
  EXPECT_FALSE(parse_us_to_ns("1e", &v));
  EXPECT_FALSE(parse_us_to_ns("99999999999999999", &v));  // 1e17 us = 1e20 ns: overflow
  EXPECT_FALSE(parse_us_to_ns("1e400", &v));
  ASSERT_TRUE(parse_us_to_ns("1e-400", &v));
  EXPECT_EQ(v, 0);
}

// Issue 8, item 1: Kineto's ts and dur are decimal microseconds.  Rounded to ns one by one,
// ts=1000.0006 dur=1.0006 ends at 1,001,002 ns while the next step (ts=1001.0012) begins at
// 1,001,001 ns: the steps overlapped by a rounding nanosecond and one was dropped.  The end
// is ts + dur rounded once: 1001.0012 us -> 1,001,001 ns, exactly where the next one begins.
TEST(KinetoImporter, EndIsTsPlusDurRoundedOnceSoTouchingEventsTouch) {
  const std::string ev = R"J(
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
     "ts": 1000.0006, "dur": 1.0006},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1,
     "ts": 1001.0012, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0.0004, "dur": 0.0004,
     "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
     "ts": 4458676522690.6554, "dur": 2.0002, "args": {"correlation": 3}})J";
  Result r;
  run(trace(ev), r);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.cap.ranges.size(), 2u);
  EXPECT_EQ(r.cap.ranges[0].start, 1'000'001);
  EXPECT_EQ(r.cap.ranges[0].end, 1'001'001);  // not 1,001,002
  EXPECT_EQ(r.cap.ranges[1].start, 1'001'001);
  EXPECT_EQ(r.cap.ranges[0].end, r.cap.ranges[1].start);
  ASSERT_EQ(r.cap.ops.size(), 1u);
  EXPECT_EQ(r.cap.ops[0].start, 0);  // 0.4 ns
  EXPECT_EQ(r.cap.ops[0].end, 1);    // 0.8 ns
  ASSERT_EQ(r.cap.calls.size(), 1u);
  EXPECT_EQ(r.cap.calls[0].start, 4458676522690655);  // 0.4 ns rounds down
  EXPECT_EQ(r.cap.calls[0].end, 4458676522692656);    // 0.6 ns rounds up
}

TEST(KinetoImporter, MapsKernelAndLaunch) {
  Result r;
  run(trace(std::string(kKernel) + "," + kLaunch), r);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.cap.ops.size(), 1u);
  const GpuOp& op = r.cap.ops[0];
  EXPECT_EQ(op.kind, GpuOpKind::kKernel);
  EXPECT_EQ(op.start, 1000500);
  EXPECT_EQ(op.end, 1020750);
  EXPECT_EQ(op.device, 0);
  EXPECT_EQ(op.stream, 7u);
  EXPECT_EQ(op.correlation_id, 42u);
  EXPECT_EQ(op.collective, CollectiveType::kNone);
  EXPECT_EQ(r.names.text(op.name), "void gemm_kernel<float>(int) [clone]");
  ASSERT_EQ(r.cap.calls.size(), 1u);
  EXPECT_EQ(r.cap.calls[0].kind, HostApiKind::kLaunch);
  EXPECT_EQ(r.cap.calls[0].thread, 101u);
  EXPECT_EQ(r.cap.calls[0].correlation_id, 42u);
  EXPECT_EQ(r.cap.calls[0].start, 990000);
  EXPECT_EQ(r.cap.calls[0].end, 995000);
  EXPECT_EQ(r.meta.source, "kineto");
  EXPECT_EQ(r.meta.pid, 100);
  EXPECT_EQ(r.stats.get(Stat::importer_events_skipped), 0);
}

TEST(KinetoImporter, MapsEveryCategory) {
  const std::string ev = R"J(
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 1, "tid": 9,
     "ts": 10, "dur": 2, "args": {"device": 1, "stream": 9, "correlation": 5, "bytes": 4096}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 1, "tid": 9,
     "ts": 12, "dur": 2, "args": {"device": 1, "stream": 9, "correlation": 6, "bytes": 8}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 1, "tid": 9, "ts": 14, "dur": 1, "args": {"device": 1, "stream": 9}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "pid": 1, "tid": 9, "ts": 15, "dur": 1, "args": {"device": 1, "stream": 9}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoH (Pinned -> Pinned)", "pid": 1, "tid": 9, "ts": 16, "dur": 1, "args": {"device": 1, "stream": 9}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 1, "tid": 9, "ts": 17, "dur": 1, "args": {"device": 1, "stream": 9, "bytes": 64}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>) [clone]", "pid": 1, "tid": 20, "ts": 20, "dur": 5, "args": {"device": 1, "stream": 20}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "pid": 1, "tid": 20, "ts": 30, "dur": 5,
     "args": {"device": 1, "stream": 20, "Collective name": "allreduce"}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 9, "tid": 9, "ts": 1, "dur": 1, "args": {"correlation": 5}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 9, "tid": 9, "ts": 2, "dur": 1, "args": {"correlation": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 9, "tid": 9, "ts": 3, "dur": 1, "args": {"correlation": 8}},
    {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 9, "tid": 9, "ts": 4, "dur": 1, "args": {"correlation": 9}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 9, "tid": 9, "ts": 5, "dur": 1, "args": {"correlation": 10}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaGetDevice", "pid": 9, "tid": 9, "ts": 6, "dur": 1, "args": {"correlation": 11}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#12", "pid": 9, "tid": 9, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep #13", "pid": 9, "tid": 9, "ts": 100, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 9, "tid": 9, "ts": 1, "dur": 3},
    {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataPipe)#ShufflerIterDataPipe", "pid": 9, "tid": 9, "ts": 4, "dur": 1},
    {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 9, "tid": 9, "ts": 5, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9, "ts": 5, "dur": 1},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "forward", "pid": 1, "tid": 9, "ts": 5, "dur": 1},
    {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "GPU 1"}},
    {"ph": "i", "name": "Iteration Start", "pid": 9, "tid": 9, "ts": 0, "s": "g"}
  )J";
  const std::string meta = R"J(
    "deviceProperties": [{"id": 0, "name": "NVIDIA A100", "totalGlobalMem": 85000000000,
                          "computeMajor": 8, "computeMinor": 0, "numSms": 108}],
    "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},)J";
  Result r;
  run(trace(ev, meta), r);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.get(Stat::importer_events_skipped), 0);
  EXPECT_EQ(r.stats.get(Stat::importer_unknown_categories), 0);
  ASSERT_EQ(r.cap.ops.size(), 8u);
  EXPECT_EQ(r.cap.ops[0].kind, GpuOpKind::kMemcpy);
  EXPECT_EQ(r.cap.ops[0].copy_dir, CopyDir::kH2D);
  EXPECT_EQ(r.cap.ops[0].bytes, 4096u);
  EXPECT_TRUE(r.cap.ops[0].flags & kGpuOpPageable);
  EXPECT_EQ(r.cap.ops[0].device, 1);
  EXPECT_EQ(r.cap.ops[1].copy_dir, CopyDir::kD2H);
  EXPECT_FALSE(r.cap.ops[1].flags & kGpuOpPageable);
  EXPECT_EQ(r.cap.ops[2].copy_dir, CopyDir::kD2D);
  EXPECT_EQ(r.cap.ops[3].copy_dir, CopyDir::kP2P);
  EXPECT_EQ(r.cap.ops[4].copy_dir, CopyDir::kH2H);
  EXPECT_EQ(r.cap.ops[5].kind, GpuOpKind::kMemset);
  EXPECT_EQ(r.cap.ops[5].bytes, 64u);
  EXPECT_EQ(r.cap.ops[6].collective, CollectiveType::kAllGather);
  EXPECT_EQ(r.cap.ops[7].collective, CollectiveType::kAllReduce);  // args win over the name
  ASSERT_EQ(r.cap.calls.size(), 6u);
  EXPECT_EQ(r.cap.calls[0].kind, HostApiKind::kCopy);
  EXPECT_EQ(r.cap.calls[1].kind, HostApiKind::kSync);
  EXPECT_EQ(r.cap.calls[2].kind, HostApiKind::kOther);  // cudaStreamWaitEvent: host goes on
  EXPECT_EQ(r.cap.calls[3].kind, HostApiKind::kLaunch);
  EXPECT_EQ(r.cap.calls[4].kind, HostApiKind::kLaunch);
  EXPECT_EQ(r.cap.calls[5].kind, HostApiKind::kOther);
  ASSERT_EQ(r.cap.ranges.size(), 5u);
  EXPECT_EQ(r.cap.ranges[0].kind, RangeKind::kStep);
  EXPECT_EQ(r.cap.ranges[0].number, 12);
  EXPECT_EQ(r.cap.ranges[1].kind, RangeKind::kStep);
  EXPECT_EQ(r.cap.ranges[1].number, 13);
  EXPECT_EQ(r.cap.ranges[2].kind, RangeKind::kData);
  EXPECT_EQ(r.cap.ranges[3].kind, RangeKind::kData);
  EXPECT_EQ(r.cap.ranges[4].kind, RangeKind::kUser);
  EXPECT_EQ(r.meta.rank, 3);
  EXPECT_EQ(r.meta.world_size, 8);
  ASSERT_EQ(r.meta.devices.size(), 1u);
  EXPECT_EQ(r.meta.devices[0].name, "NVIDIA A100");
  EXPECT_EQ(r.meta.devices[0].sm_count, 108);
  EXPECT_EQ(r.meta.devices[0].compute_major, 8);
  EXPECT_EQ(r.meta.devices[0].total_memory, 85000000000u);
}

TEST(KinetoImporter, GzipIsDetectedByMagicNotName) {
  const std::string plain = trace(std::string(kKernel) + "," + kLaunch);
  Result a, b;
  run(gzip(plain), a);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_EQ(a.cap.ops.size(), 1u);
  // A file named .gz holding plain JSON is read as plain JSON.
  char tmpl[] = "/tmp/kineto_test_XXXXXX.json.gz";
  int fd = mkstemps(tmpl, 8);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, plain.data(), plain.size()), static_cast<ssize_t>(plain.size()));
  close(fd);
  NameTable names;
  Stats stats;
  Capture cap;
  auto m = import_kineto_trace(tmpl, names, cap, stats);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(cap.ops.size(), 1u);
  EXPECT_EQ(m->source_path, tmpl);
  EXPECT_TRUE(looks_like_kineto_trace(tmpl));
  std::remove(tmpl);
}

TEST(KinetoImporter, MultiMemberGzip) {
  const std::string plain = trace(std::string(kKernel) + "," + kLaunch);
  const std::string half = plain.substr(0, plain.size() / 2);
  Result r;
  run(gzip(half) + gzip(plain.substr(plain.size() / 2)), r);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.cap.ops.size(), 1u);
}

TEST(KinetoImporter, TruncatedGzipIsAClearError) {
  std::string z = gzip(trace(std::string(kKernel) + "," + kLaunch));
  Result r;
  run(z.substr(0, z.size() / 2), r);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("truncated gzip"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("byte offset"), std::string::npos) << r.error;
}

TEST(KinetoImporter, CorruptGzipIsAClearError) {
  std::string z = gzip(trace(std::string(kKernel) + "," + kLaunch));
  for (size_t i = 12; i < z.size() - 8; i += 3) z[i] = static_cast<char>(z[i] ^ 0x5a);
  Result r;
  run(z, r);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("gzip"), std::string::npos) << r.error;
}

TEST(KinetoImporter, EmptyInput) {
  Result r;
  run("", r);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("empty"), std::string::npos) << r.error;
  Result w;
  run("  \n ", w);
  ASSERT_FALSE(w.ok);
  EXPECT_NE(w.error.find("not a Kineto trace"), std::string::npos) << w.error;
}

TEST(KinetoImporter, BrokenJsonNamesTheByteOffsetAndEvent) {
  const std::string good = trace(std::string(kKernel) + "," + kLaunch);
  std::string bad = good;
  const size_t at = bad.find("\"dur\": 5");
  bad[at + 6] = '}';  // "dur": } ...
  Result r;
  run(bad, r);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("byte offset " + std::to_string(at + 6)), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("element 1"), std::string::npos) << r.error;
}

TEST(KinetoImporter, TruncatedJsonIsAClearError) {
  const std::string good = trace(std::string(kKernel) + "," + kLaunch);
  for (size_t cut :
       {size_t{5}, good.size() / 3, good.size() / 2, good.size() - 2, good.size() - 1}) {
    Result r;
    run(good.substr(0, cut), r);
    ASSERT_FALSE(r.ok) << cut;
    EXPECT_NE(r.error.find("unexpected end of input"), std::string::npos) << r.error;
  }
}

TEST(KinetoImporter, MissingAndMistypedFieldsAreSkippedAndCounted) {
  const std::string ev = R"J(
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "dur": 1, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "1", "dur": 1, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": 5, "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": -1, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": "x", "tid": 7, "ts": 1, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"device": "0", "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"device": 0, "stream": 7, "correlation": -3}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"device": 0, "stream": 7, "bytes": 1.5}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"correlation": "7"}},
    {"ph": "X", "cat": 7, "name": "k", "ts": 1, "dur": 1},
    {"ph": 1, "cat": "kernel", "name": "k", "ts": 1, "dur": 1},
    {"cat": "kernel", "name": "k", "ts": 1, "dur": 1},
    [1, 2], 17, "str", null,
    {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"device": 0, "stream": 7}}
  )J";
  Result r;
  run(trace(ev), r);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.cap.ops.size(), 1u);
  EXPECT_EQ(r.names.text(r.cap.ops[0].name), "ok");
  EXPECT_EQ(r.stats.get(Stat::importer_events_skipped), 18);
}

TEST(KinetoImporter, DeviceAndStreamFallBackToPidTid) {
  Result r;
  run(trace(
          R"J({"ph": "X", "cat": "kernel", "name": "k", "pid": 2, "tid": 13, "ts": 1, "dur": 1})J"),
      r);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.cap.ops.size(), 1u);
  EXPECT_EQ(r.cap.ops[0].device, 2);
  EXPECT_EQ(r.cap.ops[0].stream, 13u);
}

TEST(KinetoImporter, OutOfOrderEventsAreAllDelivered) {
  std::string ev;
  for (int i = 99; i >= 0; --i) {
    if (!ev.empty()) ev += ",";
    ev += R"J({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": )J" +
          std::to_string(i * 10) +
          R"J(, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": )J" +
          std::to_string(i + 1) + "}}";
  }
  Result r;
  run(trace(ev), r);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.cap.ops.size(), 100u);
  EXPECT_EQ(r.cap.ops.front().start, 990000);
  EXPECT_EQ(r.cap.ops.back().start, 0);
}

TEST(KinetoImporter, UnknownCategoriesAreCounted) {
  Result r;
  run(trace(R"J({"ph": "X", "cat": "mtia_ccp_events", "name": "x", "ts": 1, "dur": 1},
               {"ph": "X", "cat": "something_new", "name": "y", "ts": 1, "dur": 1},
               {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 1})J"),
      r);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.stats.get(Stat::importer_unknown_categories), 2);
  EXPECT_EQ(r.stats.get(Stat::importer_events_skipped), 0);
}

// Issue 8, item 7: a trace of another accelerator (MTIA) is not silently "no GPU activity":
// the importer says what it found, by category.
TEST(KinetoImporter, OtherAcceleratorEventsAreCountedByCategory) {
  const std::string ev = R"J(
    {"ph": "X", "cat": "mtia_ccp_events", "name": "job", "pid": 2, "tid": 3, "ts": 160, "dur": 50,
     "args": {"correlation": 1, "stream": 3}},
    {"ph": "X", "cat": "mtia_ccp_events", "name": "job", "pid": 2, "tid": 3, "ts": 260, "dur": 50},
    {"ph": "X", "cat": "mtia_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 150, "dur": 5},
    {"ph": "X", "cat": "xpu_runtime", "name": "urEnqueueKernelLaunch", "pid": 1, "tid": 1,
     "ts": 150, "dur": 5},
    {"ph": "X", "cat": "no_such_category", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J";
  Result r;
  run(trace(ev), r);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.cap.ops.empty());
  EXPECT_TRUE(r.cap.calls.empty());
  const std::vector<std::pair<std::string, int64_t>> want = {
      {"mtia_ccp_events", 2}, {"mtia_runtime", 1}, {"xpu_runtime", 1}};
  EXPECT_EQ(r.meta.other_accelerator_events, want);
  EXPECT_EQ(r.stats.get(Stat::importer_unknown_categories), 5);
}

TEST(KinetoImporter, NonKinetoJsonIsRejected) {
  for (const char* doc : {R"J({"a": 1, "b": [1, 2, 3]})J", "42", "\"text\"", "true", "nul",
                          R"J({"traceEvents": 5})J", "<html></html>", "\x01\x02garbage"}) {
    Result r;
    run(doc, r);
    EXPECT_FALSE(r.ok) << doc;
    EXPECT_FALSE(r.error.empty());
  }
  Result r;
  run(R"J({"a": 1})J", r);
  EXPECT_NE(r.error.find("no \"traceEvents\""), std::string::npos) << r.error;
}

TEST(KinetoImporter, ChromeArrayFormat) {
  Result r;
  run("[" + std::string(kKernel) + "," + kLaunch + "]", r);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.cap.ops.size(), 1u);
  Result n;
  run("[1, 2, 3]", n);
  EXPECT_FALSE(n.ok);
}

TEST(KinetoImporter, TrailingGarbageIsAnError) {
  Result r;
  run(trace(kKernel) + " x", r);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("after the end"), std::string::npos) << r.error;
}

TEST(KinetoImporter, DeepNestingIsAnErrorNotACrash) {
  std::string deep(100000, '[');
  Result r;
  run(trace(R"J({"ph": "X", "args": {"x": )J" + deep + "}}"), r);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.error.find("nested too deeply"), std::string::npos) << r.error;
}

TEST(KinetoImporter, StringEscapesAreDecoded) {
  Result r;
  run(trace(R"J({"ph": "X", "cat": "kernel", "name": "a\"b\\c\/\n\u00e9\ud83d\ude00\ud800x",
                "pid": 0, "tid": 1, "ts": 1, "dur": 1})J"),
      r);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.cap.ops.size(), 1u);
  EXPECT_EQ(r.names.text(r.cap.ops[0].name), "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbdx");
  Result bad;
  run(trace(R"J({"ph": "X", "name": "a\qb"})J"), bad);
  EXPECT_FALSE(bad.ok);
}

TEST(KinetoImporter, Ac2gFlowsSupplyMissingCorrelation) {
  const std::string ev = R"J(
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 6, "ts": 100, "dur": 4},
    {"ph": "s", "id": 77, "pid": 5, "tid": 6, "ts": 100, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 77, "pid": 0, "tid": 7, "ts": 110, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 110, "dur": 3, "args": {"device": 0, "stream": 7}},
    {"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 200, "dur": 3, "args": {"device": 0, "stream": 7}}
  )J";
  Result r;
  run(trace(ev), r);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.cap.calls.size(), 1u);
  EXPECT_EQ(r.cap.calls[0].correlation_id, 77u);
  ASSERT_EQ(r.cap.ops.size(), 2u);
  uint64_t k = 0, orphan = 99;
  for (const auto& op : r.cap.ops) {
    if (r.names.text(op.name) == "k")
      k = op.correlation_id;
    else
      orphan = op.correlation_id;
  }
  EXPECT_EQ(k, 77u);
  EXPECT_EQ(orphan, 0u);
}

TEST(KinetoImporter, LargeEventsAndManyChunks) {
  // A 3 MiB kernel name (larger than the 1 MiB read chunk) and enough events to cross many
  // chunk boundaries, plain and gzip, from memory and from a file.
  std::string big(3 << 20, 'n');
  std::string ev =
      R"J({"ph": "X", "cat": "kernel", "name": ")J" + big +
      R"J(", "pid": 0, "tid": 7, "ts": 1, "dur": 1, "args": {"correlation": 1000000}})J";
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    ev += R"J(, {"ph": "X", "cat": "kernel", "name": "kernel_)J" + std::to_string(i % 50) +
          R"J(", "pid": 0, "tid": 7, "ts": )J" + std::to_string(i) +
          ".125, \"dur\": 0.5, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": " +
          std::to_string(i + 1) + "}}";
  }
  const std::string doc = trace(ev);
  for (const std::string& data : {doc, gzip(doc, 1)}) {
    Result r;
    run(data, r);
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.cap.ops.size(), static_cast<size_t>(n + 1));
    EXPECT_EQ(r.names.text(r.cap.ops[0].name).size(), big.size());
    EXPECT_EQ(r.cap.ops[n].start, int64_t{n - 1} * 1000 + 125);
    EXPECT_EQ(r.cap.ops[n].end, int64_t{n - 1} * 1000 + 625);
  }
  char tmpl[] = "/tmp/kineto_test_XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  const std::string z = gzip(doc);
  ASSERT_EQ(write(fd, z.data(), z.size()), static_cast<ssize_t>(z.size()));
  close(fd);
  NameTable names;
  Stats stats;
  Capture cap;
  KinetoImportOptions opts;
  opts.progress = true;  // harmless when stderr is not a terminal
  auto m = import_kineto_trace(tmpl, names, cap, stats, opts);
  std::remove(tmpl);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(cap.ops.size(), static_cast<size_t>(n + 1));
}

TEST(KinetoImporter, OutOfRangeMetadataNumbersAreIgnored) {
  // Found by the fuzzer: a float too large for int64 in deviceProperties (UB when cast).
  Result r;
  run(trace("", R"J("deviceProperties": [{"id": 1e300, "totalGlobalMem": 85000000000000000000,
                      "numSms": -5, "computeMajor": 8.5}],
                     "distributedInfo": {"rank": 1e30, "world_size": "8"},)J"),
      r);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.meta.devices.size(), 1u);
  EXPECT_EQ(r.meta.devices[0].id, 0);
  EXPECT_EQ(r.meta.devices[0].total_memory, 0u);
  EXPECT_EQ(r.meta.devices[0].sm_count, 0);
  EXPECT_EQ(r.meta.devices[0].compute_major, 0);
  EXPECT_EQ(r.meta.rank, -1);
  EXPECT_EQ(r.meta.world_size, 0);
}

TEST(KinetoImporter, MissingFileAndDirectory) {
  NameTable names;
  Stats stats;
  Capture cap;
  auto m = import_kineto_trace("/nonexistent/trace.json", names, cap, stats);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/nonexistent/trace.json"), std::string::npos);
  auto d = import_kineto_trace("/tmp", names, cap, stats);
  ASSERT_FALSE(d.ok());
  EXPECT_FALSE(looks_like_kineto_trace("/nonexistent"));
}

}  // namespace
}  // namespace gpuacct
