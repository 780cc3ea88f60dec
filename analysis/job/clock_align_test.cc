#include "analysis/job/clock_align.h"

#include <random>

#include <gtest/gtest.h>

#include "analysis/job/job_merge.h"
#include "analysis/job/job_test_util.h"

namespace gpuacct {
namespace {

using testing::PlantedJob;
using testing::planted_inputs;

// The offset of `host` relative to the reference host, as the job view found it.
int64_t found(const JobView& v, const std::string& host) {
  for (const JobHost& h : v.hosts) {
    if (h.name == host) return h.offset_ns;
  }
  ADD_FAILURE() << "no host " << host;
  return 0;
}

TEST(ClockAlign, RecoversPlantedOffsetsOfTwoHostsWithin50us) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    PlantedJob job;
    job.seed = seed;
    job.host_offset_ns = {-5'000'000, 5'000'000};  // node1 is 10 ms ahead of node0 (rank 0's)
    job.input_order = {5, 2, 7, 0, 3, 6, 1, 4};
    const JobView v = build_job_view(planted_inputs(job));
    EXPECT_EQ(v.hosts.size(), 2u);
    EXPECT_EQ(found(v, "node0"), 0) << "rank 0's host is the reference";
    EXPECT_NEAR(static_cast<double>(found(v, "node1")), 10'000'000.0, 50'000.0) << "seed " << seed;
    // Residual: aligned ends of one instance lie within the end jitter (+-10 us) plus the
    // offset error.
    EXPECT_LT(v.residual_p99_ns, 80'000.0);
    EXPECT_GT(v.residual_p50_ns, 0.0);
  }
}

TEST(ClockAlign, ThreeHostsWithOutliersMissingInstancesAndShuffledHosts) {
  PlantedJob job;
  job.ranks = 12;
  job.hosts = 3;
  job.host_of_rank = {2, 0, 1, 2, 1, 0, 0, 2, 1, 1, 2, 0};  // rank 0 on node2
  job.host_offset_ns = {5'000'000, -5'000'000, 1'234'567};
  job.outlier_share = 0.1;
  job.missing_share = 0.2;
  job.arrival_jitter_ns = 300'000;
  job.steps = 60;
  job.seed = 11;
  const JobView v = build_job_view(planted_inputs(job));
  // Relative to node2 (rank 0's host).
  EXPECT_EQ(found(v, "node2"), 0);
  EXPECT_NEAR(static_cast<double>(found(v, "node0")), 5'000'000.0 - 1'234'567.0, 50'000.0);
  EXPECT_NEAR(static_cast<double>(found(v, "node1")), -5'000'000.0 - 1'234'567.0, 50'000.0);
  EXPECT_GT(v.incomplete_instances, 0);
}

TEST(ClockAlign, RanksOfOneHostShareAClockAndAreNotShifted) {
  PlantedJob job;
  job.hosts = 1;
  job.host_offset_ns = {7'000'000};
  const JobView v = build_job_view(planted_inputs(job));
  ASSERT_EQ(v.hosts.size(), 1u);
  EXPECT_EQ(v.hosts[0].ranks.size(), 8u);
  for (const JobRankResult& r : v.ranks) EXPECT_EQ(r.clock_offset_ns, 0);
  EXPECT_NE(render_job_view(v).find("one clock, not shifted"), std::string::npos);
}

TEST(ClockAlign, SolverAloneTakesTheMedianNotTheMean) {
  // Host 1 is 2 ms ahead; a third of the instances carry a 1 ms outlier on host 1.
  ClockAligner aligner(2, 0);
  std::mt19937_64 rng(3);
  for (int64_t i = 0; i < 300; ++i) {
    const int64_t t = 1'000'000'000 + i * 10'000'000;
    const int64_t outlier = i % 3 == 0 ? 1'000'000 : 0;
    aligner.add_instance({{0, t}, {0, t + 5'000}, {1, t + 2'000'000 + outlier}, {1, t + 2'003'000}});
  }
  const ClockAlignment a = aligner.solve();
  EXPECT_EQ(a.instances_cross_host, 300);
  // Host 0's ends: t, t+5us (lower median t); host 1: the lower median of its two.
  EXPECT_NEAR(static_cast<double>(a.host_offset_ns[1]), 2'000'000.0, 5'000.0);
  EXPECT_EQ(a.host_offset_ns[0], 0);
}

TEST(ClockAlign, AHostThatSharesNoInstanceIsNotAligned) {
  ClockAligner aligner(3, 0);
  for (int i = 0; i < 10; ++i) aligner.add_instance({{0, 100 + i}, {1, 300 + i}});
  aligner.add_instance({{2, 50}});  // alone: says nothing
  const ClockAlignment a = aligner.solve();
  EXPECT_TRUE(a.host_aligned[0]);
  EXPECT_TRUE(a.host_aligned[1]);
  EXPECT_FALSE(a.host_aligned[2]);
  EXPECT_EQ(a.host_offset_ns[1], 200);
  EXPECT_EQ(a.host_offset_ns[2], 0);
  EXPECT_EQ(a.instances_seen, 11);
  EXPECT_EQ(a.instances_cross_host, 10);
}

TEST(SampleReservoir, PercentilesOfABoundedSample) {
  SampleReservoir r(1000);
  for (int i = 0; i < 100000; ++i) r.add(i % 100);
  EXPECT_EQ(r.seen(), 100000);
  EXPECT_NEAR(r.percentile(50), 50, 6);
  EXPECT_NEAR(r.percentile(99), 99, 2);
  SampleReservoir empty;
  EXPECT_EQ(empty.percentile(50), 0);
}

}  // namespace
}  // namespace gpuacct
