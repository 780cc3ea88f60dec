// The live pipeline's collectives file: NCCL profiler-plugin records (ingest_plugin_records, as
// drained from the plugin's queues) matched to simulated CUPTI launch calls and kernels, given
// their steps, written to <base>.collectives.csv; and the kernel-order fallback without them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fstream>

#include <nlohmann/json.hpp>

#include "analysis/import/kernel_order.h"
#include "analysis/model/collective_rows.h"
#include "inject/pipeline/pipeline.h"
#include "inject/pipeline/pipeline_test_events.h"

namespace gpuacct::inject {
namespace {

namespace fs = std::filesystem;

constexpr TimeNs kStepNs = 10'000'000;
constexpr TimeNs kStart = 1'000'000'000;
constexpr uint32_t kThread = 1;
constexpr uint64_t kComm = 0x9f2c0a11d2e4b7aaull;

class PipelineCollectivesTest : public PipelineOutputTest {
 protected:
  void SetUp() override {
    PipelineOutputTest::SetUp();
    cfg_.rank = 3;
    cfg_.world_size = 8;
    cfg_.warmup_steps = 0;
  }
  std::string rows_path() const { return dir_ + "/run.collectives.csv"; }
  nlohmann::json plugin_section() const {
    return report()["collection"].value("nccl_plugin", nlohmann::json());
  }
};

HostApiCall launch_call(uint64_t correlation, TimeNs start) {
  HostApiCall c;
  c.start = start;
  c.end = start + 5'000;
  c.correlation_id = correlation;
  c.thread = kThread;
  c.kind = HostApiKind::kLaunch;
  return c;
}

GpuOp kernel_op(uint64_t correlation, TimeNs start, TimeNs end, bool nccl) {
  GpuOp op;
  op.start = start;
  op.end = end;
  op.correlation_id = correlation;
  op.stream = nccl ? 21 : 7;
  op.device = 0;
  op.collective = nccl ? CollectiveType::kAllReduce : CollectiveType::kNone;
  return op;
}

PluginRecord plugin_record(uint64_t seq, TimeNs enqueued) {
  PluginRecord r;
  r.record.source = CollectiveSource::kNcclPlugin;
  r.record.comm_hash = kComm;
  r.record.seq = seq;
  r.record.bytes = 4096;
  r.record.rank = 3;
  r.record.nranks = 8;
  r.record.type = CollectiveType::kAllReduce;
  r.record.host_enqueue = enqueued;
  r.thread = kThread;
  return r;
}

// Step i: a step range; a compute launch and kernel; at t0 + 3 ms the collective(s) enqueued
// (two grouped ones every fourth step) and NCCL's kernel launched 20 us later.
struct Step {
  EventBatch events;
  std::vector<PluginRecord> records;
  GpuOp nccl_op;
};
// `launch_first`: NCCL's own order (the plan's kernel launched, then its events started);
// otherwise the events start 20 us before the launch.
Step make_step(int i, uint64_t* seq, bool launch_first = false) {
  Step s;
  const TimeNs t0 = kStart + i * kStepNs;
  s.events.ranges.push_back({t0, t0 + kStepNs, i, kThread, kNoName, RangeKind::kStep, {}});
  const auto base = static_cast<uint64_t>(i) * 10;
  s.events.api_calls.push_back(launch_call(base + 1, t0 + 1'000'000));
  s.events.gpu_ops.push_back(kernel_op(base + 1, t0 + 1'100'000, t0 + 2'900'000, false));
  const int grouped = i % 4 == 0 ? 2 : 1;
  const TimeNs enqueue = launch_first ? t0 + 3'040'000 : t0 + 3'000'000;
  for (int g = 0; g < grouped; ++g) s.records.push_back(plugin_record((*seq)++, enqueue + g));
  s.events.api_calls.push_back(launch_call(base + 2, t0 + 3'020'000));
  s.nccl_op = kernel_op(base + 2, t0 + 3'100'000, t0 + 8'000'000 + i, true);
  return s;
}

std::vector<CollectiveRecord> read_rows(const std::string& path, CollectiveRowsContents* c) {
  std::vector<CollectiveRecord> rows;
  auto read = read_collective_rows(path, [&](const CollectiveRecord& r) { rows.push_back(r); });
  EXPECT_TRUE(read.ok()) << read.status().message();
  if (read.ok()) *c = read.value();
  return rows;
}

class PipelineCollectivesOrderTest : public PipelineCollectivesTest,
                                     public ::testing::WithParamInterface<bool> {};
INSTANTIATE_TEST_SUITE_P(BothOrders, PipelineCollectivesOrderTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "LaunchFirst" : "RecordFirst";
                         });

TEST_P(PipelineCollectivesOrderTest, PluginRecordsGetTheirKernelsGpuTimesAndSteps) {
  const bool launch_first = GetParam();
  Pipeline p(cfg_);
  uint64_t seq = 100;
  std::map<uint64_t, std::pair<int, TimeNs>> expected;  // seq -> (step, gpu_start)
  std::map<uint64_t, TimeNs> enqueued;
  std::vector<GpuOp> late;
  constexpr int kSteps = 12;
  for (int i = 0; i < kSteps; ++i) {
    const uint64_t first = seq;
    Step s = make_step(i, &seq, launch_first);
    for (uint64_t q = first; q < seq; ++q) expected[q] = {i, s.nccl_op.start};
    for (const PluginRecord& r : s.records) enqueued[r.record.seq] = r.record.host_enqueue;
    // Every third step's NCCL kernel record comes two ticks late (another CUPTI buffer).
    if (i % 3 == 1) {
      late.push_back(s.nccl_op);
    } else {
      s.events.gpu_ops.push_back(s.nccl_op);
    }
    if (i % 3 == 0 && !late.empty()) {
      s.events.gpu_ops.insert(s.events.gpu_ops.end(), late.begin(), late.end());
      late.clear();
    }
    p.ingest_plugin_records(s.records);
    p.ingest_events(s.events);
    p.tick(kStart + i * kStepNs - kStepNs / 2);
  }
  // While the job runs the rows finalised so far are in the file's temporary name, readable
  // (as a cut-off file) should the job be killed now.
  ASSERT_FALSE(p.collectives().temp_path().empty());
  CollectiveRowsContents running;
  const std::vector<CollectiveRecord> so_far = read_rows(p.collectives().temp_path(), &running);
  EXPECT_TRUE(running.cut_off);
  EXPECT_GE(so_far.size(), 8u);
  EXPECT_LT(so_far.size(), 15u);
  EventBatch rest;
  rest.gpu_ops = late;
  p.ingest_events(rest);
  p.finish(GpuCollectionState{});

  EXPECT_EQ(p.collectives().identity(), CollectiveSource::kNcclPlugin);
  CollectiveRowsContents contents;
  const std::vector<CollectiveRecord> rows = read_rows(rows_path(), &contents);
  EXPECT_EQ(contents.header.identity, CollectiveSource::kNcclPlugin);
  EXPECT_TRUE(contents.header.identity_note.empty());
  EXPECT_EQ(contents.header.metadata.rank, 3);
  EXPECT_FALSE(contents.cut_off);
  ASSERT_EQ(rows.size(), expected.size());  // 12 steps, 3 of them with two grouped
  EXPECT_EQ(rows.size(), 15u);
  for (const CollectiveRecord& r : rows) {
    ASSERT_TRUE(expected.count(r.seq)) << r.seq;
    const auto [step, gpu_start] = expected[r.seq];
    EXPECT_EQ(r.step_index, step) << "seq " << r.seq;
    EXPECT_EQ(r.gpu_start, gpu_start) << "seq " << r.seq;
    EXPECT_GT(r.gpu_end, r.gpu_start);
    EXPECT_EQ(r.stream, 21u);
    EXPECT_EQ(r.comm_hash, kComm);
    EXPECT_EQ(r.source, CollectiveSource::kNcclPlugin);
    EXPECT_EQ(r.host_enqueue, enqueued[r.seq]);
  }
  EXPECT_EQ(p.accountant().stats().get(Stat::collectives_unmatched), 0);
  const nlohmann::json section = plugin_section();  // the report says what the file holds
  EXPECT_EQ(section["identity"], "nccl_plugin");
  EXPECT_EQ(section["rows"], 15);
}

TEST_F(PipelineCollectivesTest, WithoutPluginRecordsKernelsAreNumberedByOrder) {
  Pipeline p(cfg_);
  uint64_t seq = 0;
  constexpr int kSteps = 8;
  for (int i = 0; i < kSteps; ++i) {
    Step s = make_step(i, &seq);  // the plugin records are not delivered: no plugin
    s.events.gpu_ops.push_back(s.nccl_op);
    p.ingest_events(s.events);
    p.tick(kStart + i * kStepNs - kStepNs / 2);
  }
  p.finish(GpuCollectionState{});
  EXPECT_EQ(p.collectives().identity(), CollectiveSource::kKernelOrder);
  CollectiveRowsContents contents;
  const std::vector<CollectiveRecord> rows = read_rows(rows_path(), &contents);
  EXPECT_EQ(contents.header.identity, CollectiveSource::kKernelOrder);
  // Why, by what the plugin saw in this process (other tests here may have initialised it).
  const std::string why = nccl_plugin_counters().communicators == 0 ? "never initialised gpuacct"
                                                                    : "sent no collective event";
  EXPECT_NE(contents.header.identity_note.find(why), std::string::npos)
      << contents.header.identity_note;
  EXPECT_NE(contents.header.identity_note.find("numbered in order per stream"), std::string::npos);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kSteps));  // one NCCL kernel per step
  std::vector<bool> seen(kSteps, false);
  for (const CollectiveRecord& r : rows) {
    ASSERT_LT(r.seq, static_cast<uint64_t>(kSteps));
    seen[r.seq] = true;
    EXPECT_EQ(r.step_index, static_cast<int64_t>(r.seq));  // one per step, in order
    EXPECT_EQ(r.comm_hash, kernel_order_comm_hash(0));
    EXPECT_EQ(r.gpu_start, kStart + static_cast<TimeNs>(r.seq) * kStepNs + 3'100'000);
    EXPECT_EQ(r.source, CollectiveSource::kKernelOrder);
  }
  for (int i = 0; i < kSteps; ++i) EXPECT_TRUE(seen[static_cast<size_t>(i)]) << i;
  EXPECT_EQ(plugin_section()["identity"], "kernel_order");
  EXPECT_EQ(plugin_section()["rows"], kSteps);
}

TEST_F(PipelineCollectivesTest, NoCollectivesNoFile) {
  Pipeline p(cfg_);
  uint64_t seq = 0;
  for (int i = 0; i < 4; ++i) {
    Step s = make_step(i, &seq);
    s.events.api_calls.pop_back();  // no NCCL launch, no plugin record
    p.ingest_events(s.events);
  }
  p.finish(GpuCollectionState{});
  EXPECT_TRUE(fs::exists(dir_ + "/run.report.json"));
  EXPECT_FALSE(fs::exists(rows_path()));
  EXPECT_EQ(p.collectives().identity(), CollectiveSource::kNone);
}

TEST_F(PipelineCollectivesTest, CollectivesWithoutKernelsAreCountedUnmatched) {
  Pipeline p(cfg_);
  uint64_t seq = 0;
  for (int i = 0; i < 4; ++i) {
    Step s = make_step(i, &seq);
    if (i != 2) s.events.gpu_ops.push_back(s.nccl_op);  // step 2's kernel record is lost
    p.ingest_plugin_records(s.records);
    p.ingest_events(s.events);
  }
  p.finish(GpuCollectionState{});
  CollectiveRowsContents contents;
  const std::vector<CollectiveRecord> rows = read_rows(rows_path(), &contents);
  ASSERT_EQ(rows.size(), 5u);  // step 0 has two grouped
  int without_gpu = 0;
  for (const CollectiveRecord& r : rows) {
    if (r.gpu_start == 0) {
      ++without_gpu;
      EXPECT_EQ(r.step_index, 2);  // its step still comes from its host enqueue
    }
  }
  EXPECT_EQ(without_gpu, 1);
  EXPECT_EQ(p.accountant().stats().get(Stat::collectives_unmatched), 1);
}

}  // namespace
}  // namespace gpuacct::inject
