// Matching that cannot be trusted (job_merge.h, *Matching*): point-to-point records under
// kernel-order identity are never matched; a communicator whose matched instances are not one
// operation each (a rank's records shifted by one) is found unreliable and its steps fall back
// to the transfer floor, while correct kernel-order matching of all-reduces still aligns.
#include "analysis/job/job_merge.h"

#include <map>

#include <gtest/gtest.h>

#include "analysis/job/job_test_util.h"
#include "analysis/import/kernel_order.h"

namespace gpuacct {
namespace {

using testing::PlantedJob;
using testing::PlantedRank;
using testing::plant;
using testing::planted_inputs;

bool has_text(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

// The floor method computed here from the planted step rows: per step every rank has (all do
// in a planted job), transfer = the least exposed communication, waiting = each rank's excess.
struct FloorSplit {
  std::vector<int64_t> waited, transfer;
};
FloorSplit floor_split(const std::vector<PlantedRank>& ranks) {
  FloorSplit f;
  f.waited.assign(ranks.size(), 0);
  f.transfer.assign(ranks.size(), 0);
  for (size_t step = 0; step < ranks[0].rows.size(); ++step) {
    int64_t floor = ranks[0].rows[step].cat.comm_exposed;
    for (const PlantedRank& r : ranks) floor = std::min(floor, r.rows[step].cat.comm_exposed);
    for (size_t s = 0; s < ranks.size(); ++s) {
      f.waited[s] += ranks[s].rows[step].cat.comm_exposed - floor;
      f.transfer[s] += floor;
    }
  }
  return f;
}

PlantedJob two_hosts() {
  PlantedJob job;
  job.ranks = 8;
  job.hosts = 2;
  job.host_offset_ns = {0, 3'000'000};
  job.straggler = 2;
  job.steps = 30;
  job.seed = 11;
  return job;
}

// Every record as kernel-order identity gives it: comm = the first NCCL stream, no nranks.
void as_kernel_order(std::vector<PlantedRank>& ranks) {
  for (PlantedRank& r : ranks) {
    for (CollectiveRecord& c : r.records) {
      c.comm_hash = kernel_order_comm_hash(0);
      c.source = CollectiveSource::kKernelOrder;
      c.rank = -1;
      c.nranks = 0;
    }
  }
}

TEST(Matching, ToleranceAndPlausibility) {
  EXPECT_EQ(end_tolerance_ns(0), kEndToleranceFloorNs);
  EXPECT_EQ(end_tolerance_ns(2'000'000), kEndToleranceFloorNs + 4'000'000);
  EXPECT_EQ(end_tolerance_ns(-5), kEndToleranceFloorNs);
  // One operation: all end after the last arrival, within the transfer.
  std::vector<RankArrival> ok = {{0, 0, 2'010'000}, {1, 300'000, 2'000'000}, {2, 100, 2'020'000}};
  EXPECT_TRUE(instance_plausible(blame_instance(ok), 2'000'000));
  // A slow link: one rank's transfer 2x the others' still passes.
  std::vector<RankArrival> slow = {{0, 0, 1'000'000}, {1, 0, 1'000'000}, {2, 0, 2'000'000}};
  EXPECT_TRUE(instance_plausible(blame_instance(slow), 1'000'000));
  // The next operation of rank 2 paired with this one: it arrives after the others ended.
  std::vector<RankArrival> later = {{0, 0, 1'000'000}, {1, 0, 1'000'000}, {2, 1'200'000, 2'200'000}};
  EXPECT_FALSE(instance_plausible(blame_instance(later), 1'000'000));
  // Ends a whole operation apart without breaking causality (back-to-back kernels, clocks
  // aligned onto the pairing): the spread is far beyond twice the median transfer.
  std::vector<RankArrival> apart = {{0, 0, 100'000}, {1, 0, 100'000}, {2, 90'000, 5'000'000}};
  EXPECT_FALSE(instance_plausible(blame_instance(apart), 100'000));
}

TEST(Matching, PointToPointWithoutItsPeerIsNotMatchable) {
  CollectiveRecord r;
  r.type = CollectiveType::kSendRecv;
  r.source = CollectiveSource::kKernelOrder;
  EXPECT_FALSE(matchable_across_ranks(r));
  r.source = CollectiveSource::kNone;
  EXPECT_FALSE(matchable_across_ranks(r));
  // The plugin's: named by the transfer when it knew rank and peer (seq counted from 1).
  r.source = CollectiveSource::kNcclPlugin;
  EXPECT_FALSE(matchable_across_ranks(r));
  r.rank = 3;
  r.seq = 1;
  EXPECT_TRUE(matchable_across_ranks(r));
  r.rank = -1;
  EXPECT_FALSE(matchable_across_ranks(r));
  r.source = CollectiveSource::kKineto;  // the process group's seq
  EXPECT_TRUE(matchable_across_ranks(r));
  r.type = CollectiveType::kAllReduce;
  for (const auto source : {CollectiveSource::kKernelOrder, CollectiveSource::kNcclPlugin,
                            CollectiveSource::kKineto}) {
    r.source = source;
    EXPECT_TRUE(matchable_across_ranks(r));
  }
}

TEST(Matching, KernelOrderAllReducesStillAlignWithin50us) {
  const PlantedJob job = two_hosts();
  const JobView v = build_job_view(planted_inputs(job, [](std::vector<PlantedRank>& ranks) {
    as_kernel_order(ranks);
    ranks[0].records.insert(ranks[0].records.begin() + 1, ranks[0].records[0]);  // a duplicate
  }));
  EXPECT_EQ(v.method, std::string(kMethodCollectives));
  EXPECT_EQ(v.duplicate_records, 1);  // once, however many passes read it
  EXPECT_EQ(v.communicators_checked, 1);
  EXPECT_EQ(v.communicators_unreliable, 0);
  EXPECT_TRUE(v.unmatched.empty());
  EXPECT_EQ(v.floor_steps, 0);
  ASSERT_EQ(v.hosts.size(), 2u);
  EXPECT_NEAR(static_cast<double>(v.hosts[1].offset_ns), 3'000'000.0, 50'000.0);
  EXPECT_TRUE(v.hosts[1].aligned);
  EXPECT_LT(v.residual_p99_ns, 100'000.0);
  EXPECT_EQ(v.headline.rfind("rank 2 arrives last", 0), 0u) << v.headline;
}

// One rank's records shifted by one instance (its i-th paired with the others' (i+1)-th, or
// (i-1)-th): found unreliable, no offset from it, and the split is the floor's.
TEST(Matching, ARankShiftedByOneInstanceIsUnreliableAndFallsBackToTheFloor) {
  for (const int shift : {1, -1}) {
    SCOPED_TRACE("shift " + std::to_string(shift));
    const PlantedJob job = two_hosts();
    const FloorSplit want = floor_split(plant(job));
    const JobView v = build_job_view(planted_inputs(job, [&](std::vector<PlantedRank>& ranks) {
      as_kernel_order(ranks);
      // +1: its i-th record is named i + 1 (paired with the others' next operation: it ends
      // before they arrive); -1: its first is dropped and the others named one lower (paired
      // with their previous operation: it arrives after they ended).
      auto& shifted = ranks[5].records;
      if (shift < 0) shifted.erase(shifted.begin());
      for (CollectiveRecord& c : shifted) c.seq = shift > 0 ? c.seq + 1 : c.seq - 1;
    }));
    EXPECT_EQ(v.communicators_unreliable, 1);
    EXPECT_EQ(v.method, std::string(kMethodStepRowsFloor));
    EXPECT_TRUE(has_text(v.matching_notes, "matching unreliable, not used for clocks or blame"));
    EXPECT_TRUE(has_text(v.matching_notes, "AllReduce, kernel_order identity"));
    // No offset from the bad matching: the hosts stay unaligned rather than shifted by an
    // operation, and no instance is blamed.
    for (const JobHost& h : v.hosts) EXPECT_EQ(h.offset_ns, 0) << h.name;
    EXPECT_FALSE(v.hosts[1].aligned);
    EXPECT_EQ(v.instances, 0);
    EXPECT_EQ(v.residual_instances, 0);
    // Every record is listed as unmatched, for its reason.
    int64_t records = 0;
    for (const UnmatchedCollectiveRow& u : v.unmatched) {
      EXPECT_EQ(u.reason, std::string(kUnmatchedImplausible));
      EXPECT_EQ(u.type, CollectiveType::kAllReduce);
      records += u.records;
    }
    EXPECT_EQ(records, 8 * 30 * 3 - (shift < 0 ? 1 : 0));
    // The floor split, computed above from the rows alone.
    ASSERT_EQ(v.ranks.size(), 8u);
    for (size_t s = 0; s < v.ranks.size(); ++s) {
      EXPECT_EQ(v.ranks[s].waited_ns, want.waited[s]) << "rank " << s;
      EXPECT_EQ(v.ranks[s].transfer_ns, want.transfer[s]) << "rank " << s;
    }
  }
}

// Point-to-point kernels by kernel order beside all-reduces: the all-reduces are matched and
// blamed; the send/recv records are listed per rank and their steps use the floor.
TEST(Matching, KernelOrderPointToPointIsListedAndItsStepsUseTheFloor) {
  PlantedJob job = two_hosts();
  job.collective_every = 1;
  const JobView v = build_job_view(planted_inputs(job, [](std::vector<PlantedRank>& ranks) {
    as_kernel_order(ranks);
    for (PlantedRank& r : ranks) {
      for (CollectiveRecord& c : r.records) {
        if (c.step_index % 2 == 1) {  // odd steps: pipeline send/recv on their own stream
          c.type = CollectiveType::kSendRecv;
          c.comm_hash = kernel_order_comm_hash(1);
        }
      }
    }
  }));
  EXPECT_EQ(v.method, std::string(kMethodMixed));
  EXPECT_EQ(v.communicators_unreliable, 0);
  EXPECT_EQ(v.floor_steps, 15);
  EXPECT_EQ(v.instances, 15 * 3);
  EXPECT_NEAR(static_cast<double>(v.hosts[1].offset_ns), 3'000'000.0, 50'000.0);
  ASSERT_EQ(v.unmatched.size(), 8u);
  for (const UnmatchedCollectiveRow& u : v.unmatched) {
    EXPECT_EQ(u.type, CollectiveType::kSendRecv);
    EXPECT_EQ(u.reason, std::string(kUnmatchedNoPeer));
    EXPECT_EQ(u.records, 15 * 3);
    EXPECT_GT(u.duration_ns, 0);
    EXPECT_EQ(u.bytes, (uint64_t{64} << 20) * 45);
    EXPECT_EQ(u.bytes_known, 15 * 3);
  }
  EXPECT_TRUE(has_text(v.matching_notes, "360 point-to-point records without their peer"));
  EXPECT_TRUE(has_text(v.matching_notes, "15 steps whose collectives could not be matched"));
}

// The plugin's p2p records name the transfer (comm of the sender -> receiver pair, seq from
// 1): a pipeline pair on two hosts is matched send to receive, two ends per instance however
// large the communicator, and aligns the clocks.
TEST(Matching, PluginPointToPointIsMatchedSendToReceive) {
  PlantedJob job;
  job.ranks = 2;
  job.hosts = 2;
  job.host_offset_ns = {0, -2'000'000};
  job.steps = 20;
  job.collectives_per_step = 2;
  job.seed = 3;
  const JobView v = build_job_view(planted_inputs(job, [](std::vector<PlantedRank>& ranks) {
    for (PlantedRank& r : ranks) {
      for (CollectiveRecord& c : r.records) {
        c.type = CollectiveType::kSendRecv;
        c.comm_hash = 0x5e11d0001;  // the pair's (the plugin hashes communicator, 0, 1)
        c.seq += 1;
        c.nranks = 8;  // the communicator's size
      }
    }
  }));
  EXPECT_EQ(v.method, std::string(kMethodCollectives));
  EXPECT_TRUE(v.unmatched.empty());
  EXPECT_EQ(v.instances, 40);
  EXPECT_EQ(v.incomplete_instances, 0);
  EXPECT_EQ(v.types[static_cast<size_t>(CollectiveType::kSendRecv)].instances, 40);
  EXPECT_NEAR(static_cast<double>(v.hosts[1].offset_ns), -2'000'000.0, 50'000.0);
}

}  // namespace
}  // namespace gpuacct
