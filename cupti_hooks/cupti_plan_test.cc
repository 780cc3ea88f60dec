// CuptiPlan (what is asked of CUPTI), GraphNodeCounts, and the parser's GRAPH_TRACE records and
// sync totals from API records.
#include "cupti_hooks/cupti_plan.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "cupti_hooks/activity_parser.h"
#include "cupti_hooks/api_table.h"
#include "cupti_hooks/cupti_record_types.h"
#include "cupti_hooks/graph_nodes.h"

namespace gpuacct::cupti {
namespace {

// The design times the traced calls by their callbacks: every traced call, both domains,
// stacks or not (a runtime launch's id is the runtime callback's; launches that bypass the
// runtime are seen only in the driver domain), and asks for no API record.
TEST(CuptiPlan, TheDesignTimesEveryTracedCallByItsCallbacksInBothDomains) {
  const CuptiPlan design;
  EXPECT_EQ(design.kinds, kKindKernel | kKindCopy | kKindMemset | kKindGraph);
  EXPECT_EQ(design.api_source, ApiSource::kCallbacks);
  EXPECT_TRUE(api_from_callbacks(design));
  EXPECT_FALSE(design.experiment);
  for (bool stacks : {true, false}) {
    const CallbackSet set = callback_set(design, stacks, false);
    EXPECT_EQ(set.launch, kRuntimeDomain | kDriverDomain) << stacks;
    EXPECT_EQ(set.sync, kRuntimeDomain | kDriverDomain) << stacks;
    EXPECT_EQ(set.copy, kRuntimeDomain | kDriverDomain) << stacks;
  }
}

// With CUPTI's API records (GPUACCT_CUPTI_API=records, the design before): one callback domain
// per launch, the driver's, and none without stacks.
TEST(CuptiPlan, WithApiRecordsOneCallbackDomainPerLaunch) {
  CuptiPlan design;
  design.api_source = ApiSource::kRecords;
  EXPECT_FALSE(api_from_callbacks(design));
  EXPECT_TRUE(design.api_records);
  const CallbackSet with_stacks = callback_set(design, /*stacks=*/true, false);
  EXPECT_EQ(with_stacks.launch, kDriverDomain) << "launches: the driver domain only";
  EXPECT_EQ(with_stacks.sync, kRuntimeDomain | kDriverDomain);
  EXPECT_EQ(with_stacks.copy, 0);
  const CallbackSet no_stacks = callback_set(design, false, false);
  EXPECT_EQ(no_stacks.launch | no_stacks.sync | no_stacks.copy, 0);
  // Without SYSTEM thread ids every traced call is seen, whatever the plan.
  CuptiPlan none = design;
  none.callbacks = CallbackDomains::kNone;
  const CallbackSet identify = callback_set(none, false, /*identify_threads=*/true);
  EXPECT_EQ(identify.launch, kRuntimeDomain | kDriverDomain);
  EXPECT_EQ(identify.copy, kRuntimeDomain | kDriverDomain);
  CuptiPlan both = design;
  both.callbacks = CallbackDomains::kBoth;
  EXPECT_EQ(callback_set(both, false, false).launch, kRuntimeDomain | kDriverDomain);
  both.callbacks = CallbackDomains::kRuntime;
  EXPECT_EQ(callback_set(both, true, false).launch, kRuntimeDomain);
  ApiSource source{};
  EXPECT_TRUE(parse_api_source(" records ", &source));
  EXPECT_EQ(source, ApiSource::kRecords);
  EXPECT_TRUE(parse_api_source(to_string(ApiSource::kCallbacks), &source));
  EXPECT_EQ(source, ApiSource::kCallbacks);
  EXPECT_FALSE(parse_api_source("both", &source));
  EXPECT_EQ(source, ApiSource::kCallbacks) << "a refused value changes nothing";
}

TEST(CuptiPlan, ParsesItsSettingsAndRefusesOthers) {
  uint32_t kinds = 0;
  EXPECT_TRUE(parse_kinds(" kernel, graph ", &kinds));
  EXPECT_EQ(kinds, kKindKernel | kKindGraph);
  EXPECT_EQ(kinds_to_string(kinds), "kernel,graph");
  EXPECT_TRUE(parse_kinds("none", &kinds));
  EXPECT_EQ(kinds, 0u);
  EXPECT_EQ(kinds_to_string(0), "none");
  kinds = 7;
  EXPECT_FALSE(parse_kinds("kernel,gpu", &kinds));
  EXPECT_FALSE(parse_kinds(",", &kinds));
  EXPECT_EQ(kinds, 7u) << "a refused value changes nothing";
  EXPECT_TRUE(parse_kinds(kinds_to_string(kAllKinds), &kinds));
  EXPECT_EQ(kinds, kAllKinds);
  CallbackDomains d{};
  EXPECT_TRUE(parse_callback_domains("both", &d));
  EXPECT_EQ(d, CallbackDomains::kBoth);
  EXPECT_FALSE(parse_callback_domains("all", &d));
  TimestampSource t{};
  EXPECT_TRUE(parse_timestamp_source("callback", &t));
  EXPECT_EQ(t, TimestampSource::kCallback);
  EXPECT_FALSE(parse_timestamp_source("gpu", &t));
  SampleSwitch s{};
  EXPECT_TRUE(parse_sample_switch("activity", &s));
  EXPECT_EQ(s, SampleSwitch::kActivity);
  EXPECT_FALSE(parse_sample_switch("none", &s));
}

TEST(GraphNodeCounts, CountsPerGraphFromManyThreads) {
  static GraphNodeCounts counts;  // 32 KiB: not on the stack
  counts.clear_for_testing();
  EXPECT_EQ(counts.nodes(5), 0u);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) counts.add(static_cast<uint32_t>(i % 10), 1);
    });
  }
  for (auto& t : threads) t.join();
  for (uint32_t g = 0; g < 10; ++g) EXPECT_EQ(counts.nodes(g), 400u) << g;
  counts.add(3, -1000);
  EXPECT_EQ(counts.nodes(3), 0u) << "never below zero";
  EXPECT_EQ(counts.nodes(11), 0u);
  // A clone reported both as created and as cloned counts once; a node going leaves both.
  counts.add(50, 3, GraphNodeCounts::kCreated);
  counts.add(50, 3, GraphNodeCounts::kCloned);
  EXPECT_EQ(counts.nodes(50), 3u);
  counts.add(51, 2, GraphNodeCounts::kCloned);
  EXPECT_EQ(counts.nodes(51), 2u);
  counts.add(50, -1);
  EXPECT_EQ(counts.nodes(50), 2u);
  counts.add(52, -1);
  EXPECT_EQ(counts.nodes(52), 0u) << "a graph never counted stays unknown";
  counts.clear_for_testing();
  for (int i = 0; i < 400; ++i) counts.add(static_cast<uint32_t>(i % 10), 1);
  // A full table drops graphs, counted; those already in keep their counts.
  for (uint32_t g = 100; g < 100 + GraphNodeCounts::kSlots; ++g) counts.add(g, 2);
  EXPECT_EQ(counts.dropped(), 10u);
  EXPECT_EQ(counts.nodes(7), 40u);
  EXPECT_EQ(counts.nodes(100), 2u);
}

GraphTraceRecord graph_trace(uint64_t start, uint64_t end, uint32_t corr, uint32_t graph) {
  GraphTraceRecord g{};
  g.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
  g.start = start;
  g.end = end;
  g.correlationId = corr;
  g.graphId = graph;
  g.deviceId = 1;
  g.endDeviceId = 1;
  g.streamId = 13;
  return g;
}

// GRAPH_TRACE: one compute op for the whole launch, its span, the launch's correlation id, its
// graph's node count (the name says it), flagged as a span.
TEST(ActivityParser, GraphTraceIsOneSpanWithItsNodeCount) {
  static GraphNodeCounts counts;
  counts.clear_for_testing();
  counts.add(5, 998);
  NameTable names;
  ActivityParser parser(names);
  parser.set_graph_node_counts(&counts);
  EventBatch out;
  Stats stats;
  const GraphTraceRecord g = graph_trace(1000, 4000, 77, 5);
  GraphTraceRecord unknown = graph_trace(5000, 6000, 78, 9);
  unknown.deviceId = 0x7fffffff;  // begins on the host: the device is where it ends
  GraphTraceRecord untimed = graph_trace(0, 0, 79, 5);
  parser.parse_record(&g, out, stats);
  parser.parse_record(&unknown, out, stats);
  parser.parse_record(&untimed, out, stats);
  ASSERT_EQ(out.gpu_ops.size(), 2u);
  const GpuOp& op = out.gpu_ops[0];
  EXPECT_EQ(op.start, 1000);
  EXPECT_EQ(op.end, 4000);
  EXPECT_EQ(op.correlation_id, 77u);
  EXPECT_EQ(op.graph_id, 5u);
  EXPECT_EQ(op.device, 1);
  EXPECT_EQ(op.stream, 13u);
  EXPECT_TRUE(op.is_compute());
  EXPECT_NE(op.flags & kGpuOpGraphSpan, 0);
  EXPECT_EQ(op.graph_nodes, 998u);
  EXPECT_EQ(names.text(op.name), "[CUDA graph 5: 998 nodes]");
  EXPECT_EQ(out.gpu_ops[1].graph_nodes, 0u);
  EXPECT_EQ(names.text(out.gpu_ops[1].name), "[CUDA graph 9]");
  EXPECT_EQ(stats.get(Stat::cupti_records_untimed), 1);
  EXPECT_EQ(parser.totals().graph_spans, 3);
  EXPECT_EQ(parser.totals().graph_spans_without_nodes, 1);
  EXPECT_EQ(parser.totals().kernels, 0);
}

// Without SYNCHRONIZATION records the report's blocking-sync totals come from the sync calls'
// API records; with them, from the records alone (never both).
TEST(ActivityParser, SyncTotalsFromApiRecordsWhenTheKindIsOff) {
  ApiRecord sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  sync.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020;
  sync.start = 100;
  sync.end = 350;
  ApiRecord device = sync;
  device.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020;
  ApiRecord event = sync;
  event.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  event.cbid = CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize;
  for (bool from_api : {true, false}) {
    NameTable names;
    ActivityParser parser(names);
    parser.set_sync_from_api_calls(from_api);
    EventBatch out;
    Stats stats;
    for (const ApiRecord* r : {&sync, &device, &event}) parser.parse_record(r, out, stats);
    const SyncTotals& t = parser.totals().sync;
    const int64_t n = from_api ? 1 : 0;
    EXPECT_EQ(t.count[CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE], n);
    EXPECT_EQ(t.count[CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE], n);
    EXPECT_EQ(t.count[CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE], n);
    EXPECT_EQ(t.ns[CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE], 250 * n);
    EXPECT_EQ(out.api_calls.size(), 3u);
  }
}

}  // namespace
}  // namespace gpuacct::cupti
