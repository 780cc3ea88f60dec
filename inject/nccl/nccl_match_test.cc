// CollectiveMatcher: plugin records matched to simulated CUPTI launch calls and kernels.
#include "inject/nccl/nccl_match.h"

#include <gtest/gtest.h>

#include <vector>

#include "inject/recording/watermark.h"

namespace gpuacct::inject {
namespace {

constexpr uint32_t kThread = 7;
constexpr TimeNs kMs = 1'000'000;

PluginRecord plugin_record(uint64_t seq, TimeNs enqueued, uint32_t thread = kThread,
                           uint64_t group = 0) {
  PluginRecord r;
  r.group = group;
  r.record.source = CollectiveSource::kNcclPlugin;
  r.record.comm_hash = 0xabc;
  r.record.seq = seq;
  r.record.type = CollectiveType::kAllReduce;
  r.record.host_enqueue = enqueued;
  r.thread = thread;
  return r;
}

HostApiCall launch(uint64_t correlation, TimeNs start, uint32_t thread = kThread) {
  HostApiCall c;
  c.start = start;
  c.end = start + 5'000;
  c.correlation_id = correlation;
  c.thread = thread;
  c.kind = HostApiKind::kLaunch;
  return c;
}

GpuOp kernel(uint64_t correlation, TimeNs start, TimeNs end, bool nccl, uint32_t stream = 13) {
  GpuOp op;
  op.start = start;
  op.end = end;
  op.correlation_id = correlation;
  op.stream = stream;
  op.device = 2;
  op.kind = GpuOpKind::kKernel;
  op.collective = nccl ? CollectiveType::kAllReduce : CollectiveType::kNone;
  return op;
}

struct Harness {
  CollectiveMatcher matcher;
  Stats stats;
  std::vector<CollectiveRecord> out;
  void records(std::vector<PluginRecord> rs) { matcher.add_records(rs); }
  void events(std::vector<HostApiCall> calls, std::vector<GpuOp> ops) {
    EventBatch b;
    b.api_calls = std::move(calls);
    b.gpu_ops = std::move(ops);
    matcher.add_events(b);
  }
  void poll(int64_t watermark, bool final = false) { matcher.poll(watermark, final, out, stats); }
};

TEST(CollectiveMatcher, EachRecordTakesTheNextNcclKernelOfItsThread) {
  Harness h;
  h.records({plugin_record(1, 100 * kMs), plugin_record(2, 200 * kMs)});
  // A compute kernel launched before the collective, then NCCL's, for each collective.
  h.events({launch(10, 90 * kMs), launch(11, 100 * kMs + 20'000), launch(20, 200 * kMs + 30'000)},
           {kernel(10, 91 * kMs, 95 * kMs, false), kernel(11, 101 * kMs, 150 * kMs, true),
            kernel(20, 201 * kMs, 260 * kMs, true, 14)});
  h.poll(300 * kMs);
  ASSERT_EQ(h.out.size(), 2u);
  EXPECT_EQ(h.out[0].seq, 1u);
  EXPECT_EQ(h.out[0].gpu_start, 101 * kMs);
  EXPECT_EQ(h.out[0].gpu_end, 150 * kMs);
  EXPECT_EQ(h.out[0].correlation_id, 11u);
  EXPECT_EQ(h.out[0].device, 2);
  EXPECT_EQ(h.out[0].stream, 13u);
  EXPECT_EQ(h.out[0].host_enqueue, 100 * kMs);  // the enqueue time stays the plugin's
  EXPECT_EQ(h.out[1].gpu_start, 201 * kMs);
  EXPECT_EQ(h.out[1].stream, 14u);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
  EXPECT_EQ(h.matcher.pending(), 0u);
}

// The record-first order on a clock that ties: each record on the very nanosecond its own
// launch call starts (the simulated jobs' events_first order).  Such a launch is after the
// record (its call had not returned), so the thread is record-first and each record takes it.
TEST(CollectiveMatcher, RecordFirstLaunchOnTheRecordsNanosecond) {
  Harness h;
  h.records({plugin_record(1, 100 * kMs), plugin_record(2, 200 * kMs)});
  h.events({launch(11, 100 * kMs), launch(21, 200 * kMs)},
           {kernel(11, 101 * kMs, 150 * kMs, true), kernel(21, 201 * kMs, 260 * kMs, true)});
  h.poll(300 * kMs);
  ASSERT_EQ(h.out.size(), 2u);
  EXPECT_EQ(h.out[0].correlation_id, 11u);
  EXPECT_EQ(h.out[1].correlation_id, 21u);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
}

// CUPTI hands a thread's buffer back only once every record in it is complete: the buffer
// holding the call that launched a long NCCL kernel can come back after the next one, whose
// calls are later (seen in the simulated jobs under load).  Until the watermark passes, a record
// waits for the calls before it: it neither goes unmatched nor takes the next group's kernel.
TEST(CollectiveMatcher, RecordFirstLaunchCallDeliveredAfterLaterCallsIsWaitedFor) {
  Harness h;
  h.records(
      {plugin_record(1, 100 * kMs), plugin_record(2, 104 * kMs), plugin_record(3, 108 * kMs)});
  // Collective 1's launch (11) is held back; compute launches after it and collective 2's and
  // 3's launches come first.
  h.events({launch(12, 100 * kMs + 10'000), launch(13, 100 * kMs + 20'000), launch(21, 104 * kMs),
            launch(31, 108 * kMs)},
           {kernel(12, 101 * kMs, 102 * kMs, false), kernel(13, 102 * kMs, 103 * kMs, false),
            kernel(21, 105 * kMs, 106 * kMs, true), kernel(31, 109 * kMs, 110 * kMs, true)});
  h.poll(100 * kMs);  // the watermark has not passed collective 1's window: nothing decided
  EXPECT_TRUE(h.out.empty());
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
  h.events({launch(11, 100 * kMs)}, {kernel(11, 100 * kMs + 5'000, 103 * kMs, true)});
  h.poll(200 * kMs);
  ASSERT_EQ(h.out.size(), 3u);
  EXPECT_EQ(h.out[0].correlation_id, 11u);
  EXPECT_EQ(h.out[1].correlation_id, 21u);
  EXPECT_EQ(h.out[2].correlation_id, 31u);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
}

TEST(CollectiveMatcher, LaunchFirstLaunchCallDeliveredAfterLaterCallsIsWaitedFor) {
  Harness h;
  // NCCL's order: launch, then the record.  Collective 1's launch (11) was matched; collective
  // 2's launch call (21) is held back while a later call came: within kSameGroupNs, collective
  // 2 must not take collective 1's kernel as "the same group".
  h.events({launch(11, 100 * kMs)}, {kernel(11, 101 * kMs, 102 * kMs, true)});
  h.records({plugin_record(1, 100 * kMs + 10'000), plugin_record(2, 102 * kMs + 10'000)});
  h.events({launch(22, 103 * kMs)}, {kernel(22, 104 * kMs, 105 * kMs, false)});
  h.poll(100 * kMs + 20'000);
  // Collective 1 is matched but held until its plan is over (a kernel can carry several
  // operations: issue 31); collective 2's calls are not all in yet: it waits.
  EXPECT_TRUE(h.out.empty());
  h.poll(101 * kMs);
  EXPECT_TRUE(h.out.empty());
  h.events({launch(21, 102 * kMs)}, {kernel(21, 102 * kMs + 5'000, 103 * kMs, true)});
  h.poll(200 * kMs);
  ASSERT_EQ(h.out.size(), 2u);
  EXPECT_EQ(h.out[0].correlation_id, 11u);
  EXPECT_EQ(h.out[1].correlation_id, 21u);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
}

TEST(CollectiveMatcher, NonNcclLaunchesBetweenAreSkipped) {
  Harness h;
  h.records({plugin_record(1, 100 * kMs)});
  // NCCL may launch a helper kernel of its own (not a collective kernel) before.
  h.events({launch(30, 100 * kMs + 10), launch(31, 100 * kMs + 20)},
           {kernel(30, 101 * kMs, 102 * kMs, false), kernel(31, 103 * kMs, 110 * kMs, true)});
  h.poll(200 * kMs);
  ASSERT_EQ(h.out.size(), 1u);
  EXPECT_EQ(h.out[0].correlation_id, 31u);
}

TEST(CollectiveMatcher, GroupedCollectivesShareOneKernel) {
  Harness h;
  // ncclGroupStart; three AllReduces; ncclGroupEnd -> one kernel.  Then the next group.
  h.records({plugin_record(5, 100 * kMs), plugin_record(6, 100 * kMs + 100),
             plugin_record(7, 100 * kMs + 200), plugin_record(8, 300 * kMs)});
  h.events({launch(40, 100 * kMs + 50'000), launch(41, 300 * kMs + 50'000)},
           {kernel(40, 120 * kMs, 180 * kMs, true), kernel(41, 320 * kMs, 330 * kMs, true)});
  h.poll(400 * kMs);
  ASSERT_EQ(h.out.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(h.out[static_cast<size_t>(i)].correlation_id, 40u) << i;
    EXPECT_EQ(h.out[static_cast<size_t>(i)].gpu_end, 180 * kMs) << i;
  }
  EXPECT_EQ(h.out[3].correlation_id, 41u);
}

TEST(CollectiveMatcher, LateGpuRecordsAreWaitedFor) {
  Harness h;
  h.records({plugin_record(1, 100 * kMs)});
  h.events({launch(50, 100 * kMs + 10'000)}, {});
  h.poll(500 * kMs);  // the kernel's record has not come: nothing decided yet
  EXPECT_TRUE(h.out.empty());
  EXPECT_EQ(h.matcher.pending(), 1u);
  h.events({}, {kernel(50, 400 * kMs, 450 * kMs, true)});
  h.poll(600 * kMs);
  ASSERT_EQ(h.out.size(), 1u);
  EXPECT_EQ(h.out[0].gpu_start, 400 * kMs);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
}

TEST(CollectiveMatcher, GpuOpBeforeItsLaunchCallStillMatches) {
  Harness h;
  h.records({plugin_record(1, 100 * kMs)});
  h.events({}, {kernel(60, 110 * kMs, 120 * kMs, true)});  // op first (other buffer)
  h.poll(150 * kMs);
  EXPECT_TRUE(h.out.empty());
  h.events({launch(60, 100 * kMs + 5)}, {});
  h.poll(200 * kMs);
  ASSERT_EQ(h.out.size(), 1u);
  EXPECT_EQ(h.out[0].correlation_id, 60u);
}

TEST(CollectiveMatcher, AMissingKernelDoesNotStealTheNextGroups) {
  Harness h;
  // Collective 1's kernel is never recorded (dropped by CUPTI); collective 2's arrives.
  h.records({plugin_record(1, 100 * kMs), plugin_record(2, 200 * kMs)});
  h.events({launch(70, 100 * kMs + 10), launch(71, 200 * kMs + 10)},
           {kernel(71, 210 * kMs, 220 * kMs, true)});
  h.poll(300 * kMs);
  EXPECT_TRUE(h.out.empty());  // launch 70's op may still come
  h.poll(101 * kMs + CollectiveMatcher::kOwedLaunchNs);
  ASSERT_EQ(h.out.size(), 2u);
  EXPECT_EQ(h.out[0].seq, 1u);
  EXPECT_EQ(h.out[0].gpu_start, 0);  // unmatched: no GPU times, not collective 2's kernel
  EXPECT_EQ(h.out[0].correlation_id, 0u);
  EXPECT_EQ(h.out[1].correlation_id, 71u);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 1);
}

TEST(CollectiveMatcher, OtherThreadsLaunchesAreNotTaken) {
  Harness h;
  h.records({plugin_record(1, 100 * kMs, 7), plugin_record(2, 100 * kMs, 8)});
  h.events({launch(80, 100 * kMs + 10, 8), launch(81, 100 * kMs + 20, 7)},
           {kernel(80, 110 * kMs, 111 * kMs, true, 1), kernel(81, 112 * kMs, 113 * kMs, true, 2)});
  h.poll(200 * kMs);
  ASSERT_EQ(h.out.size(), 2u);
  for (const CollectiveRecord& r : h.out) {
    EXPECT_EQ(r.correlation_id, r.seq == 1 ? 81u : 80u);
  }
}

TEST(CollectiveMatcher, NoKernelEverIsUnmatchedAtTheEnd) {
  Harness h;
  h.records({plugin_record(1, 100 * kMs)});  // CUPTI off: no launch records at all
  h.poll(FlushWatermark::kNone);
  EXPECT_TRUE(h.out.empty());
  h.poll(FlushWatermark::kNone, /*final=*/true);
  ASSERT_EQ(h.out.size(), 1u);
  EXPECT_EQ(h.out[0].gpu_end, 0);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 1);
}

TEST(CollectiveMatcher, MemoryStaysBounded) {
  Harness h;
  // 20000 collectives, each with its kernel and a compute kernel around it.
  for (uint64_t i = 0; i < 20000; ++i) {
    const TimeNs t = static_cast<TimeNs>(i) * kMs + 1000 * kMs;
    h.records({plugin_record(i, t)});
    h.events({launch(3 * i + 1, t + 10), launch(3 * i + 2, t + 20)},
             {kernel(3 * i + 1, t + 100, t + 200, true), kernel(3 * i + 2, t + 300, t + 400, false)});
    h.poll(t - 100 * kMs);
  }
  // What is kept covers the last kKeepLaunchNs (2 s: ~2100 collectives, two launches and two
  // kernels each), not the whole run's 80000.
  EXPECT_LT(h.matcher.kept(), 4u * 2200u);
  EXPECT_GT(h.matcher.kept(), 0u);
  h.poll(1'000'000 * kMs, /*final=*/true);
  EXPECT_EQ(h.out.size(), 20000u);
  EXPECT_EQ(h.matcher.kept(), 0u);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
  EXPECT_EQ(h.matcher.pending(), 0u);
}

// ---- NCCL's own order: the plan's kernel is launched, then its collectives' events start ----

TEST(CollectiveMatcher, LaunchFirstEachRecordTakesTheLaunchBeforeIt) {
  Harness h;
  // compute, NCCL launch, record; compute, NCCL launch, record (as ncclLaunchKernel, then
  // ncclLaunchKernelAfter_NoCuda -> hostStreamPlanTask -> startEvent).
  h.events({launch(1, 90 * kMs), launch(2, 100 * kMs), launch(3, 150 * kMs), launch(4, 200 * kMs)},
           {kernel(1, 91 * kMs, 95 * kMs, false), kernel(2, 101 * kMs, 140 * kMs, true),
            kernel(3, 151 * kMs, 160 * kMs, false), kernel(4, 201 * kMs, 240 * kMs, true)});
  h.records({plugin_record(1, 100 * kMs + 30'000), plugin_record(2, 200 * kMs + 30'000)});
  h.poll(300 * kMs);
  ASSERT_EQ(h.out.size(), 2u);
  EXPECT_EQ(h.out[0].correlation_id, 2u);
  EXPECT_EQ(h.out[0].gpu_start, 101 * kMs);
  EXPECT_EQ(h.out[1].correlation_id, 4u);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
}

TEST(CollectiveMatcher, LaunchFirstPlansRecordsShareTheirLaunch) {
  Harness h;
  // One group of three collectives in one plan (one kernel), then a group split into two plans
  // (each plan's launch before its own records).
  h.events({launch(10, 100 * kMs), launch(11, 200 * kMs), launch(12, 200 * kMs + 50'000)},
           {kernel(10, 101 * kMs, 150 * kMs, true), kernel(11, 201 * kMs, 210 * kMs, true),
            kernel(12, 211 * kMs, 220 * kMs, true)});
  h.records({plugin_record(1, 100 * kMs + 20'000), plugin_record(2, 100 * kMs + 21'000),
             plugin_record(3, 100 * kMs + 22'000), plugin_record(4, 200 * kMs + 20'000),
             plugin_record(5, 200 * kMs + 70'000)});
  h.poll(300 * kMs);
  ASSERT_EQ(h.out.size(), 5u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(h.out[i].correlation_id, 10u) << i;
  EXPECT_EQ(h.out[3].correlation_id, 11u);
  EXPECT_EQ(h.out[4].correlation_id, 12u);
}

// A clock that does not move between calls (coarse, or the simulator's with no host cost per
// call) gives the next plan's launch the previous record's very nanosecond.  Found by the
// simulated jobs (tests/e2e/run_job.py, fake NCCL with no call cost): by start times alone, a
// record took the next plan's kernel and the next record shared it.
TEST(CollectiveMatcher, LaunchFirstNextLaunchOnTheRecordsNanosecond) {
  Harness h;
  // Launch calls of 4 us; each plan's record on the nanosecond the next plan's launch starts.
  auto call = [](uint64_t id, TimeNs start) {
    HostApiCall c = launch(id, start);
    c.end = start + 4'000;
    return c;
  };
  h.events({call(20, 100 * kMs), call(21, 100 * kMs + 10'000), call(22, 100 * kMs + 20'000)},
           {kernel(20, 101 * kMs, 110 * kMs, true), kernel(21, 111 * kMs, 120 * kMs, true),
            kernel(22, 121 * kMs, 130 * kMs, true)});
  h.records({plugin_record(1, 100 * kMs + 10'000), plugin_record(2, 100 * kMs + 20'000),
             plugin_record(3, 100 * kMs + 30'000)});
  h.poll(300 * kMs);
  ASSERT_EQ(h.out.size(), 3u);
  EXPECT_EQ(h.out[0].correlation_id, 20u);
  EXPECT_EQ(h.out[1].correlation_id, 21u);
  EXPECT_EQ(h.out[2].correlation_id, 22u);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
}

TEST(CollectiveMatcher, LaunchFirstLaunchInAnEarlierBatchThanItsRecord) {
  Harness h;
  // The launch call was delivered (and polled) before the plugin record was drained.
  h.events({launch(20, 100 * kMs)}, {});
  h.poll(FlushWatermark::kNone);
  h.events({}, {kernel(20, 101 * kMs, 120 * kMs, true)});
  h.poll(110 * kMs);
  h.records({plugin_record(1, 100 * kMs + 10'000)});
  h.poll(130 * kMs);
  ASSERT_EQ(h.out.size(), 1u);
  EXPECT_EQ(h.out[0].correlation_id, 20u);
}

TEST(CollectiveMatcher, LaunchFirstLateKernelIsWaitedFor) {
  Harness h;
  h.events({launch(30, 100 * kMs), launch(31, 200 * kMs)}, {kernel(31, 201 * kMs, 202 * kMs, true)});
  h.records({plugin_record(1, 100 * kMs + 10'000), plugin_record(2, 200 * kMs + 10'000)});
  h.poll(500 * kMs);  // launch 30's kernel has not come: it may be NCCL's
  EXPECT_TRUE(h.out.empty());
  h.events({}, {kernel(30, 400 * kMs, 450 * kMs, true)});
  h.poll(600 * kMs);
  ASSERT_EQ(h.out.size(), 2u);
  EXPECT_EQ(h.out[0].gpu_start, 400 * kMs);
  EXPECT_EQ(h.out[1].correlation_id, 31u);
}

TEST(CollectiveMatcher, LaunchFirstALostLaunchRecordDoesNotGiveThePreviousKernel) {
  Harness h;
  // Collective 2's launch call record was lost: it must not take collective 1's kernel.
  h.events({launch(40, 100 * kMs)}, {kernel(40, 101 * kMs, 110 * kMs, true)});
  h.records({plugin_record(1, 100 * kMs + 10'000), plugin_record(2, 200 * kMs + 10'000)});
  h.poll(200 * kMs + CollectiveMatcher::kOwedLaunchNs + kMs);
  ASSERT_EQ(h.out.size(), 2u);
  EXPECT_EQ(h.out[0].correlation_id, 40u);
  EXPECT_EQ(h.out[1].correlation_id, 0u);
  EXPECT_EQ(h.out[1].gpu_start, 0);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 1);
}

TEST(CollectiveMatcher, ThreadsWithoutCollectivesKeepOnlyRecentLaunches) {
  Harness h;
  for (uint64_t i = 1; i <= 1000; ++i) {
    h.events({launch(i, static_cast<TimeNs>(i) * kMs, 99)},
             {kernel(i, static_cast<TimeNs>(i) * kMs + 10, static_cast<TimeNs>(i) * kMs + 20, false)});
  }
  EXPECT_LE(h.matcher.kept(), 2 * CollectiveMatcher::kHistoryLaunches + 2);
}

// ---- shared kernels: NCCL's Group -> Coll / P2p hierarchy (PluginRecord::group) ------------

PluginRecord p2p_record(bool send, TimeNs enqueued, uint64_t group) {
  PluginRecord r = plugin_record(0, enqueued, kThread, group);
  r.record.type = CollectiveType::kSendRecv;
  r.peer = 0;
  r.record.seq = send ? 1 : 2;
  return r;
}

// The H200 run of tests/gpu/check.sh (NCCL 2.28, one GPU): per step a group of two send/receive
// pairs to the own rank ran as two SendRecv kernels, each followed by its plan's Group and the
// P2p events of one send and one receive.  Every record gets its kernel; each says it shared it.
TEST(CollectiveMatcher, SharedKernel_SendRecvPairsOfOneGroupSingleRank) {
  Harness h;
  std::vector<PluginRecord> rs;
  std::vector<HostApiCall> calls;
  std::vector<GpuOp> ops;
  uint64_t group = 0;
  for (int step = 0; step < 20; ++step) {
    const TimeNs t0 = (10 + step * 10) * kMs;
    for (int plan = 0; plan < 2; ++plan) {
      const TimeNs launch_at = t0 + plan * 100'000;
      const uint64_t corr = 100 + static_cast<uint64_t>(step * 2 + plan);
      calls.push_back(launch(corr, launch_at));
      ops.push_back(kernel(corr, launch_at + 20'000, launch_at + 40'000, true));
      ++group;
      rs.push_back(p2p_record(true, launch_at + 6'000, group));
      rs.push_back(p2p_record(false, launch_at + 6'500, group));
    }
  }
  h.records(rs);
  h.events(calls, ops);
  h.poll(1000 * kMs);
  ASSERT_EQ(h.out.size(), 80u);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
  for (size_t i = 0; i < h.out.size(); ++i) {
    EXPECT_EQ(h.out[i].correlation_id, 100 + i / 2) << i;
    EXPECT_GT(h.out[i].gpu_start, 0) << i;
    EXPECT_EQ(h.out[i].kernel_ops, 2) << i;
  }
  EXPECT_EQ(h.matcher.pending(), 0u);
}

// The group decides, not the time between records: the same plan's operations 20 ms apart
// still share their kernel (a descheduled thread), and an operation of another plan with no
// launch of its own is never given the previous plan's kernel (the timing rule would have).
TEST(CollectiveMatcher, SharedKernel_GroupDecidesNotTiming) {
  Harness h;
  h.records({p2p_record(true, 100 * kMs + 10'000, 1), p2p_record(false, 120 * kMs, 1),
             p2p_record(true, 120 * kMs + 1'000, 2)});
  h.events({launch(60, 100 * kMs)}, {kernel(60, 101 * kMs, 102 * kMs, true)});
  h.poll(500 * kMs, /*final=*/true);
  ASSERT_EQ(h.out.size(), 3u);
  EXPECT_EQ(h.out[0].correlation_id, 60u);
  EXPECT_EQ(h.out[1].correlation_id, 60u);
  EXPECT_EQ(h.out[0].kernel_ops, 2);
  EXPECT_EQ(h.out[1].kernel_ops, 2);
  EXPECT_EQ(h.out[2].gpu_start, 0);
  EXPECT_EQ(h.out[2].kernel_ops, 0);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 1);
}

// A grouped AllGather + ReduceScatter fused into one plan: one kernel, two collectives; the
// next group's collective alone on its kernel says 1.
TEST(CollectiveMatcher, SharedKernel_FusedCollectivesOfAGroup) {
  Harness h;
  PluginRecord ag = plugin_record(3, 100 * kMs + 10'000, kThread, 7);
  ag.record.type = CollectiveType::kAllGather;
  PluginRecord rs = plugin_record(4, 100 * kMs + 11'000, kThread, 7);
  rs.record.type = CollectiveType::kReduceScatter;
  h.records({ag, rs, plugin_record(5, 200 * kMs + 10'000, kThread, 8)});
  h.events({launch(70, 100 * kMs), launch(71, 200 * kMs)},
           {kernel(70, 101 * kMs, 130 * kMs, true), kernel(71, 201 * kMs, 230 * kMs, true)});
  h.poll(400 * kMs);
  ASSERT_EQ(h.out.size(), 3u);
  EXPECT_EQ(h.out[0].type, CollectiveType::kAllGather);
  EXPECT_EQ(h.out[1].type, CollectiveType::kReduceScatter);
  EXPECT_EQ(h.out[0].gpu_end, 130 * kMs);
  EXPECT_EQ(h.out[1].gpu_end, 130 * kMs);
  EXPECT_EQ(h.out[0].kernel_ops, 2);
  EXPECT_EQ(h.out[1].kernel_ops, 2);
  EXPECT_EQ(h.out[2].correlation_id, 71u);
  EXPECT_EQ(h.out[2].kernel_ops, 1);
}

// A plan's records drained in two ticks: the first is held (its count is not known yet) until
// the second comes or the watermark is past; then both say 2.
TEST(CollectiveMatcher, SharedKernel_RecordsHeldUntilThePlanIsOver) {
  Harness h;
  h.events({launch(80, 100 * kMs)}, {kernel(80, 101 * kMs, 102 * kMs, true)});
  h.records({p2p_record(true, 100 * kMs + 10'000, 3)});
  h.poll(100 * kMs + 1'000'000);  // 1 ms past: its plan may not be over
  EXPECT_TRUE(h.out.empty());
  EXPECT_EQ(h.matcher.pending(), 1u);
  h.records({p2p_record(false, 100 * kMs + 12'000, 3)});
  h.poll(100 * kMs + 2'000'000);
  EXPECT_TRUE(h.out.empty());
  h.poll(120 * kMs);
  ASSERT_EQ(h.out.size(), 2u);
  EXPECT_EQ(h.out[0].kernel_ops, 2);
  EXPECT_EQ(h.out[1].kernel_ops, 2);
  EXPECT_EQ(h.matcher.pending(), 0u);
}

// Record-first order (a host that starts the events before the launch) with groups: a plan's
// records share the first launch after them; the next plan's record closes the window.
TEST(CollectiveMatcher, SharedKernel_RecordFirstGroups) {
  Harness h;
  h.records({p2p_record(true, 100 * kMs, 1), p2p_record(false, 100 * kMs + 1'000, 1),
             p2p_record(true, 200 * kMs, 2), p2p_record(false, 200 * kMs + 1'000, 2)});
  h.events({launch(90, 100 * kMs + 5'000), launch(91, 200 * kMs + 5'000)},
           {kernel(90, 101 * kMs, 102 * kMs, true), kernel(91, 201 * kMs, 202 * kMs, true)});
  h.poll(400 * kMs);
  ASSERT_EQ(h.out.size(), 4u);
  EXPECT_EQ(h.out[0].correlation_id, 90u);
  EXPECT_EQ(h.out[1].correlation_id, 90u);
  EXPECT_EQ(h.out[2].correlation_id, 91u);
  EXPECT_EQ(h.out[3].correlation_id, 91u);
  for (const auto& r : h.out) EXPECT_EQ(r.kernel_ops, 2);
  EXPECT_EQ(h.stats.get(Stat::collectives_unmatched), 0);
}

}  // namespace
}  // namespace gpuacct::inject
