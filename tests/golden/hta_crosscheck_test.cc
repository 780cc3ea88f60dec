// Cross-check: gpuacct's whole-trace totals (analysis/report/trace_totals.h) against HTA's numbers
// on the Kineto traces in tests/data/kineto/ (provenance and licence there): exactly, every number.
//
//  - the three real traces: HTA 0.6.1's published temporal breakdown and overlap; the idle
//    breakdown per stream as HTA 0.5.0 (PyPI) computes it -- its temporal numbers on these
//    traces are 0.6.1's to the microsecond;
//  - small hand-made traces with what real ones rarely show side by side: cuda_sync rows
//    (Stream Sync, Stream Wait Event, Context Sync), ops of one stream that overlap, GPU-side
//    step annotations; and two from bench/hta_differential.py's findings (ratios HTA rounds
//    half to even and divides by a negative total; one step name written twice).  Their
//    expected values are computed by hand below, with the arithmetic; HTA 0.5.0 gives the same.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/import/kineto_importer.h"
#include "analysis/report/trace_totals.h"

#ifndef GPUACCT_KINETO_TRACE_DIR
#define GPUACCT_KINETO_TRACE_DIR "tests/data/kineto"
#endif

namespace gpuacct {
namespace {

struct StreamIdle {
  uint32_t stream;
  int64_t host_wait_us, kernel_wait_us, other_us;
};

struct Expected {
  const char* file;
  int rank;
  int64_t idle_us, compute_us, non_compute_us, kernel_time_us;
  double overlap_pct;
  std::vector<StreamIdle> idle_by_stream;  // sorted by stream
  int64_t cuda_sync_rows;
};

// Hand computation of handmade_cuda_sync.json.  HTA rounds start up and end down:
//   K1 gemm  s7  [ceil 1020.4, floor 1119.6] = [1021, 1119]  launch 1010.2 -> 1011
//   WE "Stream Wait Event" s7 [1031, floor 1033.1 = 1033]    call 1030
//   K2 relu  s7  [ceil 1129.7, floor 1159.7] = [1130, 1159]  launch 1040
//   SS "Stream Sync" s7 [ceil 1050.3, floor 1159.8] = [1051, 1159]  call 1050
//   K3 gemm  s7  [ceil 1310.5, floor 1360.5] = [1311, 1360]  launch 1300
//   CS "Context Sync": stream -1, not a GPU row for HTA's breakdowns
//   K4 nccl  s13 [ceil 2020.2, floor 2120.2] = [2021, 2120]  launch 2010
//   K5 gemm  s7  [2050, 2090]                                launch 2015
//   SS s13   [ceil 2030.4, floor 2120.3] = [2031, 2120]      call 2030
//   K6 and its SS (step 3, the last: launched at 3010 / 3040 >= 3000) are dropped.
// Temporal: union = [1021, 1159] (K1 + WE + SS + K2: the sync row covers K1..K2's 11 us gap)
//   + [1311, 1360] + [2021, 2120] = 138 + 49 + 99 = 286; kernel_time = 2120 - 1021 = 1099;
//   idle = 1099 - 286 = 813; compute = K1 98 + K2 29 + K3 49 + K5 40 = 216;
//   non_compute = 1099 - 216 - 813 = 70 (without the sync rows: idle 824, non_compute 59).
//   Overlap = |[2021,2120] ∩ [2050,2090]| / 99 = 40 / 99 = 40.40 %.
// Idle breakdown (GPU ops only): stream 7: K2 1130 - 1119 = 11, launch 1040 < 1119: kernel
//   wait; K3 1311 - 1159 = 152, launch 1300 > 1159: host wait; K5 2050 - 1360 = 690, launch
//   2015 > 1360: host wait -> host 842, kernel 11.  Stream 13: K4 alone, nothing.
//
// Hand computation of handmade_stream_overlap.json (one ProfilerStep: nothing is dropped):
//   s7: K1 [ceil 110.3, floor 190.3] = [111, 190] launch 100; K2 [171, floor 220.6 = 220]
//   launch 105; M3 memcpy [201, floor 210.2 = 210] launch 107; K4 [ceil 212.5 = 213,
//   floor 232.5 = 232] launch 108; K5 [260, 270] no correlation; K6 [410, 420] launch 400;
//   K7 [470, 480] launch 405.  s20: nccl C1 [150, 250] launch 101.
// Temporal: union = [111, 250] + [260, 270] + [410, 420] + [470, 480] = 139 + 30 = 169;
//   kernel_time = 480 - 111 = 369; idle = 200; compute = [111, 232] 121 + 3 x 10 = 151;
//   non_compute = 369 - 151 - 200 = 18; overlap = |[150, 250] ∩ [111, 232]| / 100 = 82 %.
// Idle breakdown, stream 7 (gap = start - the previous op's end):
//   K2 171 - 190 = -19 kernel wait (launch 105 < 190); M3 201 - 220 = -19 kernel wait;
//   K4 213 - 210 = 3 kernel wait (the previous op is M3, ending at 210, not K2 at 220);
//   K5 260 - 232 = 28 kernel wait (no launch call, < 30); K6 410 - 270 = 140 host wait
//   (launch 400 > 270); K7 470 - 420 = 50 other (launch 405 < 420, >= 30).
//   -> host 140, kernel -19 - 19 + 3 + 28 = -7, other 50.
//
// Hand computation of handmade_gpu_step_annotations.json (3 ProfilerSteps on the CPU at 1000,
// 2000, 3000, and the same three as gpu_user_annotation on the GPU timeline, no stream; the
// last at ts 3499.4).  HTA's last step begins at the latest ProfilerStep among its CPU rows
// (stream -1), which include the GPU-side annotations: ceil(3499.4) = 3500, not 3000.
//   K1 s7 [ceil 1100.5, floor 1200.5] = [1101, 1200] launch 1010
//   K2 s7 [2100, 2200] launch 2010;  M (DtoD memcpy) s7 [2250, 2260] launch 2020
//   K3 s7 [ceil 3500.2, floor 3600.2] = [3501, 3600] launch 3100 < 3500: kept
//   K4 s7 [3600, 3700] launch 3200 < 3500: kept
//   K5 s7 [3800, 3850] launch ceil(3499.6) = 3500, not < 3500: dropped
// Temporal: union = 99 + 100 + 10 + [3501, 3700] 199 = 408; kernel_time = 3700 - 1101 = 2599;
//   idle = 2191; compute = 99 + 100 + 99 + 100 = 398; non_compute = 2599 - 398 - 2191 = 10.
// Idle breakdown, stream 7: K2 launch 2010 > 1200: host 900; M launch 2020 < 2200, gap 50:
//   other 50; K3 launch 3100 > 2260: host 1241; K4 launch 3200 < 3600, gap 0: kernel 0
//   -> host 2141, kernel 0, other 50.
// With the CPU steps alone (the last step at 3000: K3, K4 dropped): kernel_time 1159, idle
//   950, compute 199, non_compute 10, host 900 / kernel 0 / other 50.
//
// handmade_idle_ratios.json (one ProfilerStep: nothing dropped; all times whole µs):
//   s7: K1 [100, 200] launch 90; K2 [201, 210] launch 200.5 -> 201 > 200: host wait 1;
//       K3 [217, 230] launch 205 < 210, gap 7: kernel wait 7.  Ratios 1/8 and 7/8: HTA rounds
//       them as numpy does, half to even: 0.12 and 0.88 (std::round gave 0.13).
//   s9: A [300, 400] launch 290; B [350, 360] launch 295: gap -50, kernel wait; C [364, 370]
//       launch 362 > 360: host wait 4.  The gaps sum to -46, and HTA divides by it: host
//       4 / -46 = -0.09, kernel -50 / -46 = 1.09 (a total <= 0 gave 0 before).
//   s13: nccl [1000, 1800] launch 990;  s11: gemm [1799, 1850] launch 1700.
// Temporal: union = 100 + 9 + 13 + 100 + [1000, 1850] 850 = 1072; kernel_time = 1850 - 100 =
//   1750; idle = 678; compute = 100 + 9 + 13 + 100 + 51 = 273; non_compute = 799.
//   Overlap = |[1000, 1800] ∩ [1799, 1850]| / 800 = 1 / 800 = 0.125 % -> 0.12 (half to even).
//
// handmade_repeated_step_name.json: ProfilerStep#1 twice (a user_annotation at 1000 on
// thread 1, a cpu_op at 1400 on thread 2).  HTA counts step *names*: one, so nothing is
// dropped (gpuacct counted two ranges and dropped what was launched from 1400 on).
//   K1 [1020, 1100] launch 1010; K2 [1510, 1600] launch 1500; K3 [2110, 2200] launch 2100.
// Temporal: kernel_time = 2200 - 1020 = 1180; union = 80 + 90 + 90 = 260; idle = 920;
//   compute = 260; non_compute = 0.  Idle, s7: K2 host 410, K3 host 510 -> host 920.
//   (Before: kernel_time 80, idle 0, compute 80.)
const std::vector<Expected>& expected() {
  static const std::vector<Expected> kExpected = {
      {"nccl_data.json.gz",
       0,
       338781,
       75169,
       21636,
       435586,
       14.31,
       {{7, 357247, 2155, 0}, {40, 381499, 0, 0}},
       0},
      {"sampled_rank-0.json.gz",
       0,
       321378,
       106252,
       172428,
       600058,
       11.81,
       {{7, 213825, 1985, 261740},
        {23, 596037, 70, 34},
        {25, 0, 9, 47865},
        {84, 148934, 6, 0},
        {203, 0, 0, 0}},
       0},
      {"sampled_rank-1.json.gz",
       1,
       328671,
       135548,
       136455,
       600674,
       20.05,
       {{7, 156827, 1816, 281064},
        {23, 596313, 100, 0},
        {25, 0, 9, 53028},
        {84, 251860, 0, 23247},
        {203, 0, 0, 0}},
       0},
      {"handmade_cuda_sync.json",
       0,
       813,
       216,
       70,
       1099,
       40.40,
       {{7, 842, 11, 0}, {13, 0, 0, 0}},
       4},
      {"handmade_stream_overlap.json",
       0,
       200,
       151,
       18,
       369,
       82.00,
       {{7, 140, -7, 50}, {20, 0, 0, 0}},
       0},
      {"handmade_gpu_step_annotations.json",
       0,
       2191,
       398,
       10,
       2599,
       0.0,
       {{7, 2141, 0, 50}},
       0},
      {"handmade_idle_ratios.json",
       0,
       678,
       273,
       799,
       1750,
       0.12,
       {{7, 1, 7, 0}, {9, 4, -50, 0}, {11, 0, 0, 0}, {13, 0, 0, 0}},
       0},
      {"handmade_repeated_step_name.json", 0, 920, 260, 0, 1180, 0.0, {{7, 920, 0, 0}}, 0},
  };
  return kExpected;
}

// Readable test names in ctest instead of a byte dump.
void PrintTo(const Expected& e, std::ostream* os) {
  *os << e.file;
}

std::string trace_path(const char* file) {
  return std::string(GPUACCT_KINETO_TRACE_DIR) + "/" + file;
}

// Imports a trace the way `gpuacct analyze` does for its hta_totals: GPU work, cuda_sync rows
// and the GPU-side ProfilerSteps (TraceTotals::attach).
StatusOr<RunMetadata> import_for_totals(const std::string& path, NameTable& names,
                                        TraceTotals& totals, Stats& stats) {
  KinetoImportOptions opts;
  totals.attach(&opts);
  return import_kineto_trace(path, names, totals, stats, opts);
}

class HtaCrossCheck : public ::testing::TestWithParam<Expected> {};

TEST_P(HtaCrossCheck, TotalsEqualHta) {
  const Expected& e = GetParam();
  const std::string path = trace_path(e.file);
  if (!std::filesystem::exists(path))
    GTEST_FAIL()
        << "trace not found: " << path
        << " (tests/data/kineto is part of the repository; or set GPUACCT_KINETO_TRACE_DIR)";
  NameTable names;
  Stats stats;
  TraceTotals totals(names);
  auto meta = import_for_totals(path, names, totals, stats);
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  EXPECT_EQ(meta->rank, e.rank);
  const HtaTotals t = totals.compute();
  EXPECT_EQ(t.kernel_time_us, e.kernel_time_us);
  EXPECT_EQ(t.idle_us, e.idle_us);
  EXPECT_EQ(t.compute_us, e.compute_us);
  EXPECT_EQ(t.non_compute_us, e.non_compute_us);
  // HTA prints the overlap rounded to 2 decimals; so does the report.
  EXPECT_DOUBLE_EQ(totals.to_json()["comm_compute_overlap_pct"].get<double>(), e.overlap_pct);
  EXPECT_EQ(t.cuda_sync_rows, e.cuda_sync_rows);
  ASSERT_EQ(t.idle_by_stream.size(), e.idle_by_stream.size());
  for (size_t i = 0; i < e.idle_by_stream.size(); ++i) {
    const HtaStreamIdle& got = t.idle_by_stream[i];
    const StreamIdle& want = e.idle_by_stream[i];
    EXPECT_EQ(got.stream, want.stream) << i;
    EXPECT_EQ(got.host_wait_us, want.host_wait_us) << "stream " << want.stream;
    EXPECT_EQ(got.kernel_wait_us, want.kernel_wait_us) << "stream " << want.stream;
    EXPECT_EQ(got.other_us, want.other_us) << "stream " << want.stream;
  }
  EXPECT_EQ(stats.get(Stat::importer_events_skipped), 0);
  std::printf(
      "[hta] %s: kernel_time %lld (HTA %lld) idle %lld (%lld) compute %lld (%lld) "
      "non_compute %lld (%lld) overlap %.2f%% (%.2f%%)\n",
      e.file, static_cast<long long>(t.kernel_time_us), static_cast<long long>(e.kernel_time_us),
      static_cast<long long>(t.idle_us), static_cast<long long>(e.idle_us),
      static_cast<long long>(t.compute_us), static_cast<long long>(e.compute_us),
      static_cast<long long>(t.non_compute_us), static_cast<long long>(e.non_compute_us),
      t.comm_comp_overlap_pct, e.overlap_pct);
}

INSTANTIATE_TEST_SUITE_P(KinetoTraces, HtaCrossCheck, ::testing::ValuesIn(expected()),
                         [](const ::testing::TestParamInfo<Expected>& param_info) {
                           std::string n = param_info.param.file;
                           n = n.substr(0, n.find('.'));
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

// The report's percentages and per-stream ratios as HTA 0.5.0 prints them on
// handmade_idle_ratios.json (get_temporal_breakdown's *_pctg, get_idle_time_breakdown's
// idle_time_ratio; arithmetic above).  HTA's NaN (a stream whose gaps sum to 0: streams 11 and
// 13, one op each) is 0 in the report.
TEST(HtaCrossCheckRatios, RoundedAndDividedAsHtaDoes) {
  NameTable names;
  Stats stats;
  TraceTotals totals(names);
  ASSERT_TRUE(import_for_totals(trace_path("handmade_idle_ratios.json"), names, totals, stats).ok());
  const nlohmann::json j = totals.to_json();
  EXPECT_DOUBLE_EQ(j["idle_pct"].get<double>(), 38.74);
  EXPECT_DOUBLE_EQ(j["compute_pct"].get<double>(), 15.6);
  EXPECT_DOUBLE_EQ(j["non_compute_pct"].get<double>(), 45.66);
  EXPECT_DOUBLE_EQ(j["comm_compute_overlap_pct"].get<double>(), 0.12);
  struct Ratios {
    uint32_t stream;
    double host, kernel, other;
  };
  const Ratios want[] = {{7, 0.12, 0.88, 0.0}, {9, -0.09, 1.09, 0.0}, {11, 0, 0, 0}, {13, 0, 0, 0}};
  ASSERT_EQ(j["idle_by_stream"].size(), std::size(want));
  for (size_t i = 0; i < std::size(want); ++i) {
    const nlohmann::json& s = j["idle_by_stream"][i];
    EXPECT_EQ(s["stream"].get<uint32_t>(), want[i].stream);
    EXPECT_DOUBLE_EQ(s["host_wait_ratio"].get<double>(), want[i].host) << want[i].stream;
    EXPECT_DOUBLE_EQ(s["kernel_wait_ratio"].get<double>(), want[i].kernel) << want[i].stream;
    EXPECT_DOUBLE_EQ(s["other_ratio"].get<double>(), want[i].other) << want[i].stream;
  }
}

// cuda_sync rows are HTA's, not GPU work: the step accounting never sees them.
TEST(HtaCrossCheckSync, CudaSyncRowsOnlyReachTheTotals) {
  const std::string path = trace_path("handmade_cuda_sync.json");
  NameTable names;
  Stats stats;
  TraceTotals totals(names);
  struct Count : EventSink {
    int ops = 0;
    void on_gpu_op(const GpuOp&) override { ++ops; }
    void on_api_call(const HostApiCall&) override {}
    void on_range(const HostRange&) override {}
    void on_marker(const Marker&) override {}
  } count;
  TeeSink tee({&totals, &count});
  KinetoImportOptions opts;
  int syncs = 0;
  opts.on_cuda_sync = [&](const GpuOp& row) {
    ++syncs;
    totals.on_cuda_sync(row);
  };
  ASSERT_TRUE(import_kineto_trace(path, names, tee, stats, opts).ok());
  EXPECT_EQ(count.ops, 6);  // kernels only
  EXPECT_EQ(syncs, 4);      // the Context Sync row (stream -1) is not one of HTA's GPU rows
  EXPECT_EQ(totals.compute().gpu_ops, 10);
}

// Every trace in the directory (including any added later) imports without error.
TEST(HtaCrossCheckAll, EveryTraceInTheDirectoryImports) {
  const std::filesystem::path dir(GPUACCT_KINETO_TRACE_DIR);
  if (!std::filesystem::is_directory(dir))
    GTEST_FAIL() << "no trace dir: " << dir << " (tests/data/kineto is part of the repository)";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string p = entry.path().string();
    if (p.size() < 5 || (p.substr(p.size() - 5) != ".json" && p.substr(p.size() - 8) != ".json.gz"))
      continue;
    NameTable names;
    Stats stats;
    TraceTotals totals(names);
    auto meta = import_for_totals(p, names, totals, stats);
    ASSERT_TRUE(meta.ok()) << p << ": " << meta.status().message();
    EXPECT_GT(totals.compute().kernel_time_us, 0) << p;
    ++n;
  }
  EXPECT_GE(n, 8);
}

}  // namespace
}  // namespace gpuacct
