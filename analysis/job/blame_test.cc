#include "analysis/job/blame.h"

#include <gtest/gtest.h>

#include "analysis/job/job_merge.h"
#include "analysis/job/job_test_util.h"

namespace gpuacct {
namespace {

using testing::PlantedJob;
using testing::planted_inputs;
using testing::PlantedRank;

TEST(Blame, BusBandwidthFactorsPerType) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveType::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveType::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveType::kReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveType::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveType::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveType::kSendRecv, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveType::kAllReduce, 1), 1.0);
  // 1 GB in 1 ms = 1000 GB/s algbw; x 2(n-1)/n = 1.75 for n = 8.
  EXPECT_DOUBLE_EQ(bus_bandwidth_gbs(1'000'000'000, 1'000'000, CollectiveType::kAllReduce, 8), 1750);
  EXPECT_EQ(bus_bandwidth_gbs(0, 1'000'000, CollectiveType::kAllReduce, 8), 0);
  EXPECT_EQ(bus_bandwidth_gbs(1000, 0, CollectiveType::kAllReduce, 8), 0);
}

TEST(Blame, InstanceLastArrivalLatenessWaitAndTransfer) {
  const std::vector<RankArrival> ranks = {
      {0, 100, 1000}, {1, 400, 1010}, {2, 700, 1020}, {3, 200, 1900}};
  const InstanceBlame b = blame_instance(ranks);
  EXPECT_EQ(b.last_slot, 2);
  EXPECT_EQ(b.last_arrival, 700);
  EXPECT_EQ(b.lateness_ns, 300);  // vs the second latest (400)
  EXPECT_EQ(b.arrival_spread_ns, 600);
  EXPECT_EQ(b.transfer_ns, 310);  // transfers 300, 310, 320, 1200: lower median
  EXPECT_EQ(b.end_spread_ns, 900);
  EXPECT_EQ(wait_ns(b, ranks[0]), 600);
  EXPECT_EQ(wait_ns(b, ranks[2]), 0);
  EXPECT_EQ(transfer_ns(b, ranks[3]), 1200);
  EXPECT_EQ(b.ends_before_last_arrival, 0);
  const InstanceBlame odd = blame_instance({{0, 100, 50}, {1, 90, 200}});
  EXPECT_EQ(odd.ends_before_last_arrival, 1);
  EXPECT_EQ(transfer_ns(odd, {0, 100, 50}), 0);
}

TEST(Blame, StepExcessWallsOfTheLateRank) {
  StepRow a, b, c;
  for (StepRow* r : {&a, &b, &c}) {
    r->window_begin = 0;
    r->cat.compute = 10'000'000;
    r->cat.data_wait = 1'000'000;
    r->cat.comm_exposed = 2'000'000;
  }
  c.cat.data_wait += 4'000'000;  // c: 4 ms more data
  c.cat.launch_gap = 1'000'000;  // and 1 ms of launch gaps
  c.cat.comm_exposed = 0;
  for (StepRow* r : {&a, &b, &c}) r->window_end = r->cat.sum();
  const StepBlame s = blame_step(7, {{0, &a, 0, 4'000'000}, {1, &b, 0, 4'000'000}, {2, &c, 4'000'000, 0}});
  EXPECT_EQ(s.late_slot, 2);
  EXPECT_EQ(s.late_ns, 4'000'000);
  EXPECT_EQ(s.excess.data, 4'000'000);
  EXPECT_EQ(s.excess.launch, 1'000'000);
  EXPECT_EQ(s.excess.communication, 0);
  EXPECT_EQ(s.cause, Wall::kData);
  // 4 ms of lateness over 5 ms of excess: 3.2 ms data, 0.8 ms launch.
  EXPECT_EQ(s.attributed[static_cast<size_t>(Wall::kData)], 3'200'000);
  EXPECT_EQ(s.attributed[static_cast<size_t>(Wall::kLaunch)], 800'000);
  EXPECT_EQ(s.unexplained_ns, 0);
  EXPECT_EQ(s.job_step_ns, 16'000'000);
  EXPECT_EQ(s.slowest_slot, 2);
  EXPECT_EQ(s.what_if_step_ns, 12'000'000);
  // Nobody late: no blame, what-if is the step.
  const StepBlame none = blame_step(8, {{0, &a, 0, 0}, {1, &b, 0, 0}});
  EXPECT_EQ(none.late_slot, -1);
  EXPECT_EQ(none.what_if_step_ns, none.job_step_ns);
}

TEST(Blame, PlantedStragglerIsNamedWithItsDataWallInEveryStepAndItsCostWithin1Percent) {
  for (const std::vector<int>& order : {std::vector<int>{}, std::vector<int>{6, 1, 5, 0, 7, 3, 2, 4}}) {
    PlantedJob job;
    job.straggler = 5;
    job.host_offset_ns = {3'000'000, -2'000'000};
    job.input_order = order;
    const JobView v = build_job_view(planted_inputs(job));
    ASSERT_EQ(v.method, std::string(kMethodCollectives));
    ASSERT_EQ(v.steps, job.steps);
    const JobRankResult& s = v.ranks[5];
    ASSERT_EQ(s.rank, 5);
    EXPECT_EQ(s.late_steps, job.steps) << "the late rank of every step";
    const double per_step = static_cast<double>(s.late_ns) / static_cast<double>(v.steps);
    EXPECT_NEAR(per_step, 15e6, 0.01 * 15e6);
    const double data = static_cast<double>(s.late_attributed[static_cast<size_t>(Wall::kData)]) /
                        static_cast<double>(v.steps);
    EXPECT_NEAR(data, 15e6, 0.01 * 15e6);
    for (const StepBlame& b : v.top_steps) {
      EXPECT_EQ(v.ranks[static_cast<size_t>(b.late_slot)].rank, 5);
      EXPECT_EQ(b.cause, Wall::kData);
    }
    EXPECT_EQ(v.headline.rfind("rank 5 arrives last", 0), 0u) << v.headline;
    EXPECT_NE(v.headline.find("data wait"), std::string::npos) << v.headline;
    // What-if: about 15 ms less per step.
    EXPECT_NEAR(static_cast<double>(v.job_step_ns - v.what_if_step_ns) / static_cast<double>(v.steps),
                15e6, 0.01 * 15e6);
    // The others' communication is mostly waiting for rank 5: corrected.
    ASSERT_FALSE(v.corrections.empty());
    EXPECT_NE(v.corrections[0].find("waiting for rank 5 (data)"), std::string::npos)
        << v.corrections[0];
    EXPECT_TRUE(v.slow_links.empty());
  }
}

TEST(Blame, PlantedSlowLinkIsTransferNotWaiting) {
  PlantedJob job;
  job.slow_link = 3;
  job.host_offset_ns = {0, 4'000'000};
  const JobView v = build_job_view(planted_inputs(job));
  for (const JobRankResult& r : v.ranks) {
    EXPECT_EQ(r.slow_link, r.rank == 3) << "rank " << r.rank;
  }
  const JobRankResult& slow = v.ranks[3];
  EXPECT_NEAR(slow.transfer_ratio, 2.0, 0.1);
  // It arrives on time: its lateness and its waits are jitter, not the 2 ms it transfers more.
  EXPECT_LT(static_cast<double>(slow.late_ns) / static_cast<double>(v.steps), 200'000.0);
  EXPECT_LT(static_cast<double>(slow.waited_ns) / static_cast<double>(slow.instances), 100'000.0);
  ASSERT_EQ(v.slow_links.size(), 1u);
  EXPECT_NE(v.slow_links[0].find("rank 3: slow link"), std::string::npos);
  EXPECT_EQ(v.headline.find("rank 3 arrives last"), std::string::npos) << v.headline;
}

TEST(Blame, WithoutCollectiveRowsTheTransferFloorIsUsedAndSaid) {
  PlantedJob job;
  job.straggler = 2;
  job.with_collectives = false;
  const JobView v = build_job_view(planted_inputs(job));
  EXPECT_EQ(v.method, std::string(kMethodStepRowsFloor));
  EXPECT_EQ(v.instances, 0);
  EXPECT_EQ(v.headline.rfind("rank 2 has the most work", 0), 0u) << v.headline;
  EXPECT_NE(render_job_view(v).find("step rows only: transfer floor"), std::string::npos);
  // The others' excess exposed communication over the floor is about the 15 ms they waited.
  EXPECT_NEAR(static_cast<double>(v.ranks[0].waited_ns) / static_cast<double>(v.steps), 15e6, 0.3e6);
}

// GPUACCT_SAMPLE: steps CUPTI did not trace (every other one here, on every rank, as the same
// C API step indices give) hold no GPU side: they are left out of blame, as warm-up is; the
// traced steps still name the straggler and its data wall.
TEST(Blame, UntracedStepsAreLeftOutOfBlame) {
  PlantedJob job;
  job.straggler = 5;
  const JobView full = build_job_view(planted_inputs(job));
  const JobView v = build_job_view(planted_inputs(job, [](std::vector<PlantedRank>& ranks) {
    for (PlantedRank& rank : ranks) {
      for (StepRow& r : rank.rows) {
        if (r.step_index % 2 == 0) continue;
        r.sampled = false;
        const int64_t data_wait = r.cat.data_wait;
        r.cat = CategoryNs{};
        r.cat.data_wait = data_wait;
      }
    }
  }));
  ASSERT_EQ(full.ranks[5].late_steps, job.steps);
  EXPECT_EQ(v.ranks[5].late_steps, (job.steps + 1) / 2);
  for (const StepBlame& b : v.top_steps) {
    EXPECT_EQ(b.step_index % 2, 0) << "an untraced step was blamed";
    EXPECT_EQ(b.cause, Wall::kData);
  }
}

}  // namespace
}  // namespace gpuacct
