// Slow links (link_blame.h), hosts inferred (job_hosts.h), and what the job view says of them:
// generated jobs (job_test_util.h), each fact asserted against what was planted.
#include "analysis/job/link_blame.h"

#include <cstring>

#include <gtest/gtest.h>

#include "analysis/job/job_hosts.h"
#include "analysis/job/job_merge.h"
#include "analysis/job/job_test_util.h"

namespace gpuacct {
namespace {

using testing::planted_inputs;
using testing::PlantedJob;

CollectiveRecord all_reduce(uint64_t bytes, const char* algo, const char* proto) {
  CollectiveRecord r;
  r.type = CollectiveType::kAllReduce;
  r.bytes = bytes;
  std::strncpy(r.algo.text, algo, sizeof r.algo.text - 1);
  std::strncpy(r.proto.text, proto, sizeof r.proto.text - 1);
  return r;
}

TEST(LinkBlame, ProtocolsMoveDataAtNcclsModelledShareOfTheLink) {
  EXPECT_DOUBLE_EQ(link_protocol_efficiency(all_reduce(1, "RING", "SIMPLE")), 1.0);
  EXPECT_DOUBLE_EQ(link_protocol_efficiency(all_reduce(1, "Ring", "Simple")), 1.0);
  EXPECT_DOUBLE_EQ(link_protocol_efficiency(all_reduce(1, "Ring", "LL")), 0.25);
  EXPECT_DOUBLE_EQ(link_protocol_efficiency(all_reduce(1, "RING", "LL128")), 0.92);
  EXPECT_DOUBLE_EQ(link_protocol_efficiency(all_reduce(1, "", "")), 1.0);
  CollectiveRecord gather = all_reduce(1, "RING", "LL");
  gather.type = CollectiveType::kAllGather;
  EXPECT_DOUBLE_EQ(link_protocol_efficiency(gather), 1.0 / 3.0);
}

TEST(LinkBlame, ExpectedTransferFromTheGivenReferenceOrTheJobsOwnBest) {
  // 64 MiB all-reduce on 8 ranks: 2*7/8 x 64 MiB bus bytes.
  const CollectiveRecord r = all_reduce(64ull << 20, "RING", "SIMPLE");
  const double bus = 64.0 * (1 << 20) * 1.75;
  LinkReference given(50);
  EXPECT_DOUBLE_EQ(given.expected_ns(r, 8), bus / 50);
  EXPECT_DOUBLE_EQ(given.expected_busbw_gbs(r, 8), 50);
  const CollectiveRecord ll = all_reduce(64ull << 20, "RING", "LL");
  EXPECT_DOUBLE_EQ(given.expected_ns(ll, 8), bus / (50 * 0.25));
  // The job's own: the fastest tenth of 100 instances (transfers 2.00 .. 2.99 ms).
  LinkReference own;
  for (int i = 0; i < 100; ++i) own.add(r, 8, 2'000'000 + 10'000 * i);
  own.finish();
  EXPECT_NEAR(own.expected_ns(r, 8), 2'099'000, 1'000);
  // Another size is another group: no reference for it.
  EXPECT_EQ(own.expected_ns(all_reduce(1ull << 20, "RING", "SIMPLE"), 8), 0.0);
  // Bytes unknown: the communicator's own instances, a time per instance.
  CollectiveRecord unknown = all_reduce(0, "", "");
  unknown.comm_hash = 7;
  own.add(unknown, 8, 500'000);
  own.finish();
  EXPECT_DOUBLE_EQ(own.expected_ns(unknown, 8), 500'000);
  EXPECT_DOUBLE_EQ(own.expected_busbw_gbs(unknown, 8), 0);
}

TEST(LinkBlame, OnlyTheExposedTailOfASlowTransferShortensTheStep) {
  // DDP: bucket 1's all-reduce [0, 4.7 ms] overlaps the backward of bucket 2 until 4.5 ms;
  // bucket 2's [4.7, 9.4 ms] is alone.  Both are 2.35 ms slower than the reference: the step
  // loses 0.2 ms of the first (its exposed tail) and all 2.35 ms of the second.
  const std::vector<LinkPiece> pieces = {{0, 4'700'000, 2'350'000},
                                         {4'700'000, 9'400'000, 2'350'000}};
  EXPECT_EQ(link_gain_ns(pieces, 4'900'000), 2'550'000);
  EXPECT_EQ(link_gain_ns(pieces, 0), 0);
  EXPECT_EQ(link_gain_ns({{0, 1'000'000, 0}}, 1'000'000), 0);  // not slow: nothing to gain
}

TEST(JobHosts, InferredFromClocksLayoutOrBothElseUnknown) {
  const std::vector<int> ranks = {0, 1, 2, 3, 4, 5, 6, 7};
  using Off = std::optional<int64_t>;
  const std::vector<Off> two_clocks = {Off(0),         Off(3'000),     Off(-2'000),
                                       Off(0),         Off(9'978'000), Off(9'980'000),
                                       Off(9'979'000), Off(9'978'000)};
  const std::vector<Off> one_clock(8, Off(0));
  const std::vector<Off> unaligned(8, std::nullopt);
  const std::vector<int> layout = {0, 1, 2, 3, 0, 1, 2, 3};
  const std::vector<int> device0(8, 0);
  const std::vector<int> halves = {0, 0, 0, 0, 1, 1, 1, 1};
  HostInference h = infer_hosts(ranks, two_clocks, device0, 50'000);
  EXPECT_EQ(h.basis, "clock offsets");
  EXPECT_EQ(h.count, 2);
  EXPECT_EQ(h.host_of, halves);
  h = infer_hosts(ranks, one_clock, layout, 50'000);
  EXPECT_EQ(h.basis, "the device layout");
  EXPECT_EQ(h.host_of, halves);
  h = infer_hosts(ranks, two_clocks, layout, 50'000);
  EXPECT_EQ(h.basis, "clock offsets and the device layout");
  EXPECT_EQ(h.count, 2);
  // Two hosts whose clocks agree (PTP): the layout still parts them; a layout of 2 GPUs per
  // host inside one clock group gives 4 hosts.
  h = infer_hosts(ranks, one_clock, {0, 1, 0, 1, 0, 1, 0, 1}, 50'000);
  EXPECT_EQ(h.count, 4);
  // Nothing to go by: unknown, never one host per rank.
  for (const auto& offsets : {one_clock, unaligned}) {
    h = infer_hosts(ranks, offsets, device0, 50'000);
    EXPECT_EQ(h.count, 0);
    EXPECT_TRUE(h.basis.empty());
    EXPECT_TRUE(h.host_of.empty());
  }
  h = infer_hosts(ranks, one_clock, {0, 1, 2, -1, 0, 1, 2, 3}, 50'000);  // a device unknown
  EXPECT_EQ(h.count, 0);
}

PlantedJob eight_ranks() {
  PlantedJob job;
  job.ranks = 8;
  job.hosts = 2;
  job.host_offset_ns = {-5'000'000, 5'000'000};
  job.steps = 40;
  return job;
}

TEST(JobViewLink, ASlowLinkOnEveryFifthStepIsBlamedOnThoseStepsWithTheStepWithoutIt) {
  PlantedJob job = eight_ranks();
  job.link_slow_every = 5;
  const JobView slow = build_job_view(planted_inputs(job));
  PlantedJob normal = eight_ranks();
  const JobView base = build_job_view(planted_inputs(normal));
  ASSERT_TRUE(slow.link.blamed) << slow.headline;
  EXPECT_EQ(slow.headline.rfind("the link is the wall in 8 of 40 steps", 0), 0u) << slow.headline;
  EXPECT_EQ(slow.link.steps_slow, 8);
  for (const LinkStep& w : slow.link.worst) EXPECT_EQ(w.step_index % 5, 4) << w.step_index;
  EXPECT_EQ(slow.link.slow_instances, 8 * job.collectives_per_step);
  const double what_if = static_cast<double>(slow.link.what_if_step_ns) / 40;
  const double step_without = static_cast<double>(base.job_step_ns) / 40;
  EXPECT_NEAR(what_if / step_without, 1.0, 0.05);
  EXPECT_FALSE(base.link.blamed);
  EXPECT_EQ(base.link.what_if_step_ns, base.job_step_ns);
  EXPECT_EQ(base.what_if_step_ns, base.job_step_ns);  // nobody stands out: nothing to remove
  EXPECT_EQ(base.headline.rfind("no rank stands out", 0), 0u) << base.headline;
}

TEST(JobViewTies, ATieHasNoLastRank) {
  // Every rank arrives at the same moment: nobody made the others wait.
  PlantedJob job = eight_ranks();
  job.arrival_jitter_ns = 0;
  const JobView v = build_job_view(planted_inputs(job));
  ASSERT_GT(v.instances, 0);
  for (const JobRankResult& r : v.ranks) {
    EXPECT_EQ(r.last_count, 0) << r.rank;
    EXPECT_EQ(r.late_ns, 0) << r.rank;
  }
  EXPECT_EQ(v.blamed_steps, 0);
  EXPECT_EQ(v.what_if_step_ns, v.job_step_ns);
  // A straggler (late to each step's first collective; the other two are ties) is the last
  // at its instances only: a tie is nobody's last arrival.
  job.straggler = 5;
  const JobView s = build_job_view(planted_inputs(job));
  int64_t lasts = 0;
  for (const JobRankResult& r : s.ranks) lasts += r.last_count;
  EXPECT_EQ(s.ranks[5].last_count, job.steps);
  EXPECT_EQ(lasts, job.steps);
  EXPECT_EQ(s.instances, 3 * job.steps);
}

TEST(JobViewHosts, HostsWithoutNamesAreInferredFromTheirClocks) {
  const PlantedJob job = eight_ranks();
  const auto no_names = [](std::vector<testing::PlantedRank>& ranks) {
    for (auto& r : ranks) r.hostname.clear();
  };
  const JobView v = build_job_view(planted_inputs(job, no_names));
  EXPECT_EQ(v.host_count, 2);
  EXPECT_EQ(v.host_basis, "inferred from clock offsets");
  ASSERT_EQ(v.hosts.size(), 2u);
  // rank % 2 is the planted host (job_test_util.h): the inferred hosts hold those ranks.
  EXPECT_EQ(v.hosts[0].ranks, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_TRUE(v.hosts[0].inferred);
  EXPECT_NEAR(static_cast<double>(v.hosts[1].offset_ns - v.hosts[0].offset_ns), 10'000'000, 50'000);
  // One clock and no layout: unknown, one clock per rank for the alignment, no count.
  PlantedJob same = eight_ranks();
  same.host_offset_ns = {0, 0};
  const JobView u = build_job_view(planted_inputs(same, no_names));
  EXPECT_EQ(u.host_count, -1);
  EXPECT_EQ(u.host_basis, "unknown");
  EXPECT_EQ(u.ranks[0].host, "unknown");
  EXPECT_NE(render_job_view(u).find("on an unknown number of hosts"), std::string::npos);
}

}  // namespace
}  // namespace gpuacct
