// ActivityParser: CUPTI records -> event model, on the host clock.
#include "cupti_hooks/activity_parser.h"

#include <gtest/gtest.h>

#include <random>

#include "cupti_hooks/api_table.h"
#include "cupti_hooks/cupti_record_types.h"

namespace gpuacct::cupti {
namespace {

KernelRecord kernel(uint64_t start, uint64_t end, uint32_t corr) {
  KernelRecord k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.correlationId = corr;
  k.name = "k";
  return k;
}

ApiRecord launch_call(uint64_t start, uint64_t end, uint32_t corr, uint32_t result = 0) {
  ApiRecord a{};
  a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  a.start = start;
  a.end = end;
  a.correlationId = corr;
  a.threadId = 7;
  a.returnValue = result;
  return a;
}

// CUPTI on another clock (no timestamp callback): every timestamp moves by the measured offset,
// GPU and API alike, so durations and the gaps between them are unchanged; unknown (0)
// timestamps stay unknown.
TEST(ActivityParser, ClockOffsetMovesEveryTimestamp) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t offset =
        static_cast<int64_t>(rng() % 4'000'000'000'000'000'000ull) - 2'000'000'000'000'000'000;
    const uint64_t base = 3'000'000'000'000'000'000ull + rng() % 1'000'000;
    NameTable names;
    ActivityParser parser(names);
    parser.set_clock_offset(offset);
    EventBatch out;
    Stats stats;
    const KernelRecord k = kernel(base + 5000, base + 9000, 1);
    const ApiRecord a = launch_call(base, base + 4000, 1);
    const KernelRecord unfinished = kernel(0, 0, 2);
    parser.parse_record(&k, out, stats);
    parser.parse_record(&a, out, stats);
    parser.parse_record(&unfinished, out, stats);
    ASSERT_EQ(out.gpu_ops.size(), 2u);
    ASSERT_EQ(out.api_calls.size(), 1u);
    const TimeNs host_base = static_cast<TimeNs>(base) - offset;
    EXPECT_EQ(out.api_calls[0].start, host_base);
    EXPECT_EQ(out.api_calls[0].end, host_base + 4000);
    EXPECT_EQ(out.gpu_ops[0].start, host_base + 5000);
    EXPECT_EQ(out.gpu_ops[0].end, host_base + 9000);
    EXPECT_EQ(out.gpu_ops[1].start, 0) << "an unknown timestamp stays unknown";
    EXPECT_EQ(out.gpu_ops[1].end, 0);
  }
}

// A launch call that failed submitted nothing: it keeps its host time but names no op, so no
// step waits for one and nothing is counted as an unmatched launch.
TEST(ActivityParser, FailedCallNamesNoOp) {
  NameTable names;
  ActivityParser parser(names);
  EventBatch out;
  Stats stats;
  const ApiRecord ok = launch_call(100, 200, 11);
  const ApiRecord failed = launch_call(300, 400, 12, /*cudaErrorInvalidValue*/ 1);
  parser.parse_record(&ok, out, stats);
  parser.parse_record(&failed, out, stats);
  ASSERT_EQ(out.api_calls.size(), 2u);
  EXPECT_EQ(out.api_calls[0].correlation_id, 11u);
  EXPECT_EQ(out.api_calls[1].correlation_id, 0u);
  EXPECT_EQ(out.api_calls[1].kind, HostApiKind::kLaunch);
  EXPECT_EQ(out.api_calls[1].start, 300);
}

}  // namespace
}  // namespace gpuacct::cupti
