#include "analysis/import/kernel_order.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/model/stable_hash.h"

namespace gpuacct {
namespace {

struct Scenario {
  std::vector<GpuOp> ops;             // NCCL and other kernels
  std::vector<HostApiCall> launches;  // one per op
};

// Three NCCL streams (two on device 0, one on device 1) whose first NCCL kernels start in the
// order (0,7), (1,3), (0,9); compute kernels between them; kernels on one stream never overlap.
Scenario make_scenario(std::mt19937_64& rng, int per_stream) {
  Scenario s;
  struct Lane {
    uint16_t device;
    uint32_t stream;
    TimeNs t;
    CollectiveType type;
  };
  std::vector<Lane> lanes = {{0, 7, 1000, CollectiveType::kAllReduce},
                             {1, 3, 2000, CollectiveType::kAllGather},
                             {0, 9, 3000, CollectiveType::kSendRecv},
                             {0, 1, 500, CollectiveType::kNone}};  // compute: ignored
  uint64_t correlation = 1;
  for (Lane& lane : lanes) {
    for (int i = 0; i < per_stream; ++i) {
      GpuOp op;
      op.device = lane.device;
      op.stream = lane.stream;
      op.start = lane.t + static_cast<TimeNs>(rng() % 500);
      op.end = op.start + 1 + static_cast<TimeNs>(rng() % 3000);
      lane.t = op.end;
      op.collective = lane.type;
      op.correlation_id = correlation % 5 == 0 ? 0 : correlation;  // some launches unknown
      HostApiCall call;
      call.kind = HostApiKind::kLaunch;
      call.correlation_id = correlation;
      call.start = op.start - 400;
      call.end = op.start - 300;
      ++correlation;
      s.ops.push_back(op);
      s.launches.push_back(call);
    }
  }
  return s;
}

// (comm, seq) -> the record, every record emitted once.
using Result = std::map<std::pair<uint64_t, uint64_t>, CollectiveRecord>;

Result all_at_once(const Scenario& s, std::mt19937_64& rng, bool calls_first) {
  Result out;
  KernelOrderIdentity order([&](const CollectiveRecord& r) {
    EXPECT_TRUE(out.emplace(std::make_pair(r.comm_hash, r.seq), r).second);
  });
  std::vector<GpuOp> ops = s.ops;
  std::shuffle(ops.begin(), ops.end(), rng);
  if (calls_first)
    for (const auto& c : s.launches) order.on_api_call(c);
  for (const auto& op : ops) order.on_gpu_op(op);
  if (!calls_first)
    for (const auto& c : s.launches) order.on_api_call(c);
  order.finish();
  EXPECT_EQ(order.counts().streams, 3);
  EXPECT_EQ(order.counts().out_of_order, 0);
  return out;
}

void expect_numbering(const Scenario& s, const Result& got) {
  // Streams by first NCCL kernel: (0,7) -> 0, (1,3) -> 1, (0,9) -> 2; seq = start order.
  const std::map<std::pair<uint16_t, uint32_t>, int64_t> position = {
      {{0, 7}, 0}, {{1, 3}, 1}, {{0, 9}, 2}};
  std::map<std::pair<uint16_t, uint32_t>, std::vector<GpuOp>> by_stream;
  for (const GpuOp& op : s.ops)
    if (op.is_communication()) by_stream[{op.device, op.stream}].push_back(op);
  size_t total = 0;
  for (auto& [key, ops] : by_stream) {
    std::sort(ops.begin(), ops.end(), [](const GpuOp& a, const GpuOp& b) { return a.start < b.start; });
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto it = got.find({kernel_order_comm_hash(position.at(key)), i});
      ASSERT_NE(it, got.end());
      const CollectiveRecord& r = it->second;
      EXPECT_EQ(r.gpu_start, ops[i].start);
      EXPECT_EQ(r.gpu_end, ops[i].end);
      EXPECT_EQ(r.device, key.first);
      EXPECT_EQ(r.stream, key.second);
      EXPECT_EQ(r.type, ops[i].collective);
      EXPECT_EQ(r.source, CollectiveSource::kKernelOrder);
      EXPECT_EQ(r.correlation_id, ops[i].correlation_id);
      EXPECT_EQ(r.host_enqueue, ops[i].correlation_id == 0 ? 0 : ops[i].start - 400);
      ++total;
    }
  }
  EXPECT_EQ(total, got.size());
}

TEST(KernelOrder, NumbersNcclKernelsPerStreamWhateverTheArrivalOrder) {
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 50; ++trial) {
    const Scenario s = make_scenario(rng, 40);
    const Result got = all_at_once(s, rng, trial % 2 == 0);
    EXPECT_EQ(got.size(), 120u);
    expect_numbering(s, got);
  }
}

// Live: batches in time order with some kernels late, a watermark after each batch.  Records
// come out before finish(), and they are those of all-at-once.
TEST(KernelOrder, WatermarksReleaseKernelsInOrderAsTheyBecomeSafe) {
  std::mt19937_64 rng(8);
  const Scenario s = make_scenario(rng, 60);
  std::vector<size_t> order(s.ops.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Arrival time: the op's end plus a delay (a busy delivery thread).
  std::vector<TimeNs> arrives(s.ops.size());
  for (size_t i = 0; i < s.ops.size(); ++i)
    arrives[i] = s.ops[i].end + static_cast<TimeNs>(rng() % 20000);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return arrives[a] < arrives[b]; });
  Result got;
  size_t emitted_before_finish = 0;
  KernelOrderIdentity identity([&](const CollectiveRecord& r) {
    EXPECT_TRUE(got.emplace(std::make_pair(r.comm_hash, r.seq), r).second);
  });
  for (const auto& c : s.launches) identity.on_api_call(c);
  TimeNs watermark = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    identity.on_gpu_op(s.ops[order[k]]);
    if (k % 10 == 9) {
      // Everything that ended before this has arrived (the arrival delay bounds lateness).
      watermark = arrives[order[k]] - 20000;
      identity.on_watermark(watermark);
    }
  }
  emitted_before_finish = got.size();
  identity.finish();
  EXPECT_GT(emitted_before_finish, 60u);
  EXPECT_EQ(identity.counts().out_of_order, 0);
  EXPECT_EQ(identity.counts().released_early, 0);
  EXPECT_EQ(got.size(), 180u);
  expect_numbering(s, got);
}

// Two ranks launch the same collectives in the same order with their own timing: (comm, seq)
// names the same instance on both.
TEST(KernelOrder, TwoRanksAgreeOnCommAndSeq) {
  std::mt19937_64 rng_a(1);
  std::mt19937_64 rng_b(2);
  const Scenario a = make_scenario(rng_a, 25);
  const Scenario b = make_scenario(rng_b, 25);
  const Result ra = all_at_once(a, rng_a, true);
  const Result rb = all_at_once(b, rng_b, false);
  ASSERT_EQ(ra.size(), rb.size());
  for (auto ia = ra.begin(), ib = rb.begin(); ia != ra.end(); ++ia, ++ib) {
    EXPECT_EQ(ia->first, ib->first);
    EXPECT_EQ(ia->second.type, ib->second.type);
  }
}

TEST(KernelOrder, HeldLimitNumbersEarlyAndCountsIt) {
  std::mt19937_64 rng(4);
  const Scenario s = make_scenario(rng, 30);
  std::vector<GpuOp> ops = s.ops;
  std::reverse(ops.begin(), ops.end());  // latest first: the limit forces early numbering
  KernelOrderOptions options;
  options.held_op_limit = 5;
  int64_t emitted = 0;
  KernelOrderIdentity identity([&](const CollectiveRecord&) { ++emitted; }, options);
  for (const auto& op : ops) identity.on_gpu_op(op);
  identity.finish();
  EXPECT_EQ(emitted, 90);
  EXPECT_EQ(identity.counts().released_early, 85);
  EXPECT_GT(identity.counts().out_of_order, 0);
}

TEST(KernelOrder, CommHashIsStableAndDistinct) {
  std::set<uint64_t> seen;
  for (int64_t p = 0; p < 10000; ++p) EXPECT_TRUE(seen.insert(kernel_order_comm_hash(p)).second);
  // Files written by another build must match: FNV-1a of "kernel_order:<position>".
  EXPECT_EQ(kernel_order_comm_hash(12), stable_hash64("kernel_order:12"));
  EXPECT_EQ(stable_hash64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(stable_hash64("a"), 0xaf63dc4c8601ec8cULL);  // the published FNV-1a test vector
}

}  // namespace
}  // namespace gpuacct
