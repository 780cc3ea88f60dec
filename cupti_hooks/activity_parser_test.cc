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
    ASSERT_EQ(out.gpu_ops.size(), 1u) << "an unknown timestamp is not moved into a time";
    ASSERT_EQ(out.api_calls.size(), 1u);
    const TimeNs host_base = static_cast<TimeNs>(base) - offset;
    EXPECT_EQ(out.api_calls[0].start, host_base);
    EXPECT_EQ(out.api_calls[0].end, host_base + 4000);
    EXPECT_EQ(out.gpu_ops[0].start, host_base + 5000);
    EXPECT_EQ(out.gpu_ops[0].end, host_base + 9000);
    EXPECT_EQ(stats.get(Stat::cupti_records_untimed), 1);
  }
}

// CUPTI_TIMESTAMP_UNKNOWN (0) in a GPU record: during the run CUPTI could not time the op ("for
// lack of device memory", cupti_activity.h at cuptiActivityGetNextRecord; or a forced flush
// mid-run), so its time is lost -- data loss; in the closing forced flush it was still running
// at exit -- skipped, an error.  Never an op with a 0 start or end.
TEST(ActivityParser, UntimedGpuRecordsAreCountedByWhereTheyCameFrom) {
  NameTable names;
  ActivityParser parser(names);
  EventBatch out;
  Stats stats;
  KernelRecord no_end = kernel(1000, 0, 1);
  KernelRecord none = kernel(0, 0, 2);
  MemcpyRecord copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.correlationId = 3;
  MemsetRecord set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.start = 500;
  set.correlationId = 4;
  MemcpyPtoPRecord p2p{};
  p2p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  p2p.end = 700;
  const KernelRecord timed = kernel(100, 200, 5);
  for (const void* r : {static_cast<const void*>(&no_end), static_cast<const void*>(&none),
                        static_cast<const void*>(&copy), static_cast<const void*>(&set),
                        static_cast<const void*>(&p2p), static_cast<const void*>(&timed)}) {
    parser.parse_record(r, out, stats);
  }
  ASSERT_EQ(out.gpu_ops.size(), 1u);
  EXPECT_EQ(out.gpu_ops[0].correlation_id, 5u);
  EXPECT_EQ(stats.get(Stat::cupti_records_untimed), 5);
  EXPECT_EQ(stats.get(Stat::cupti_records_incomplete), 0);
  EXPECT_TRUE(stats.has_data_loss());

  parser.set_closing_flush(true);
  Stats closing;
  parser.parse_record(&none, out, closing);
  parser.parse_record(&copy, out, closing);
  parser.parse_record(&timed, out, closing);
  EXPECT_EQ(out.gpu_ops.size(), 2u);
  EXPECT_EQ(closing.get(Stat::cupti_records_incomplete), 2);
  EXPECT_EQ(closing.get(Stat::cupti_records_untimed), 0);
  EXPECT_FALSE(closing.has_data_loss());
  // Every kernel record still names its device (hardware counters follow the devices used).
  EXPECT_EQ(parser.totals().kernels, 5);
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

// SYSTEM thread ids refused: records carry CUPTI's pthread ids, left as they are by the parse
// and mapped afterwards by when the call was made.  Thread 100 had id P from 10 until it exited
// at 50; thread 200 got P from 60 (the C library reused the stack).
TEST(ThreadIds, AReusedPthreadIdNamesTheThreadThatHadItWhenTheCallWasMade) {
  constexpr uint32_t P = 0xabc000;
  ThreadIds ids;
  ids.started(P, 100, 10);
  ids.exited(P, 100, 50);
  ids.started(P, 200, 60);
  EXPECT_EQ(ids.resolve(P, 5), 100u) << "a call made before the thread's first mark";
  EXPECT_EQ(ids.resolve(P, 49), 100u) << "a record delivered after the next thread started";
  EXPECT_EQ(ids.resolve(P, 55), 200u) << "after the exit: the next thread's, even before it "
                                         "was seen (CUPTI may stamp a call before its callback)";
  EXPECT_EQ(ids.resolve(P, 1'000), 200u);
  EXPECT_EQ(ids.resolve(P + 1, 20), 0u) << "an id never seen";
}

// The next thread's start can be learnt before the old thread's exit (the worker has not seen
// the orphan yet): the old life ends at the new start, then at its exit once that is known.
TEST(ThreadIds, AnExitLearntAfterTheNextStartStillEndsTheOldLife) {
  constexpr uint32_t P = 7;
  ThreadIds ids;
  ids.started(P, 100, 10);
  ids.started(P, 200, 60);
  EXPECT_EQ(ids.resolve(P, 55), 100u);
  ids.exited(P, 100, 50);
  EXPECT_EQ(ids.resolve(P, 55), 200u);
  EXPECT_EQ(ids.resolve(P, 45), 100u);
  ids.exited(P, 100, 58);  // a later report of the same exit does not move it back
  EXPECT_EQ(ids.resolve(P, 55), 200u);
  ids.started(P, 200, 70);  // told twice
  EXPECT_EQ(ids.lives(), 2u);
}

// A clock that did not move between a thread's last call and its exit (the sim's virtual
// clock: a sync of 0 ns, then the program ends) stamps both with the same time.  The exit is
// stamped after the call returned, so a call at the very instant of the id's last known exit is
// that thread's (differential seed 3861: it was unknown whenever the worker learnt the exit
// before resolving the call's record, about 1 run in 40).
TEST(ThreadIds, ACallAtTheInstantItsThreadExitedIsThatThreads) {
  constexpr uint32_t P = 11;
  ThreadIds ids;
  ids.started(P, 100, 10);
  ids.exited(P, 100, 50);
  EXPECT_EQ(ids.resolve(P, 50), 100u) << "the last call, made as the thread exited";
  EXPECT_EQ(ids.resolve(P, 51), 0u) << "after the exit no thread had the id";
  ids.started(P, 200, 50);  // a successor at the same instant: its first call is its own
  EXPECT_EQ(ids.resolve(P, 50), 200u);
  EXPECT_EQ(ids.resolve(P, 49), 100u);
}

// Lives that ended before the watermark are forgotten; a record that still names one is
// unknown, never the id's next thread.
TEST(ThreadIds, ForgottenLivesAreUnknownNotTheNextThreads) {
  constexpr uint32_t P = 9;
  ThreadIds ids;
  ids.started(P, 100, 10);
  ids.exited(P, 100, 50);
  ids.started(P, 200, 60);
  ids.forget_before(55);
  EXPECT_EQ(ids.lives(), 1u);
  EXPECT_EQ(ids.resolve(P, 40), 0u);
  EXPECT_EQ(ids.resolve(P, 60), 200u);
  ids.forget_before(1'000);  // the live thread stays
  EXPECT_EQ(ids.resolve(P, 2'000), 200u);
}

// The parse leaves CUPTI's id; resolve_threads maps the calls parsed from `from` on and counts
// the ones whose thread stays unknown as data loss.
TEST(ActivityParser, ResolveThreadsMapsPthreadIdsAndCountsTheUnknown) {
  NameTable names;
  ActivityParser parser(names);
  EventBatch out;
  Stats stats;
  out.api_calls.push_back(HostApiCall{});  // an earlier collect's call: left alone
  out.api_calls[0].thread = 7;
  ApiRecord known = launch_call(100, 200, 1);  // threadId 7
  ApiRecord unknown = launch_call(300, 400, 2);
  unknown.threadId = 8;
  parser.parse_record(&known, out, stats);
  parser.parse_record(&unknown, out, stats);
  ASSERT_EQ(out.api_calls.size(), 3u);
  EXPECT_EQ(out.api_calls[1].thread, 7u) << "the parse keeps CUPTI's id";
  parser.thread_ids().started(7, 4242, 50);
  parser.resolve_threads(out.api_calls, 1, stats);
  EXPECT_EQ(out.api_calls[0].thread, 7u);
  EXPECT_EQ(out.api_calls[1].thread, 4242u);
  EXPECT_EQ(out.api_calls[2].thread, 8u);
  EXPECT_EQ(stats.get(Stat::cupti_thread_ids_unknown), 1);
  EXPECT_TRUE(stats.has_data_loss());
}

}  // namespace
}  // namespace gpuacct::cupti
